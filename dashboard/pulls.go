package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/plans"
)

// The verdicts on a merged pull request's instance.
const (
	appliedAsPlanned = "applied as planned"
	appliedOtherwise = "applied differently"
	notSyncedYet     = "not synced yet"
)

// pullRow is one pull request of the plans page, counted over the instances the
// user may see.
type pullRow struct {
	Number                          int
	State, HeadRef, Head, HeadURL   string
	MergeSHA, MergeURL              string
	PlannedAt                       time.Time
	Create, Update, Delete, Errors  int
	Objects                         string
	AsPlanned, Otherwise, NotSynced int
	Error                           string
	Fork, DiffsLeftOut              bool
}

// pullInstance is one instance of a pull request's plan.
type pullInstance struct {
	reconciler.InstancePlan
	Applied string // for a merged pull request: appliedAsPlanned...
}

type pullsView struct {
	Open, Done []pullRow
}

type pullView struct {
	Row       pullRow
	Instances []pullInstance
}

// pullRowOf is the list's row of sum, counted over the instances visible says id may
// see; ok is false when it shows id nothing (a tenant sees only the plans that
// touch its namespaces).
func (s *Server) pullRowOf(ctx context.Context, id *Identity, sum plans.Summary, visible func(string) bool) (pullRow, bool) {
	row := pullRow{Number: sum.Number, State: sum.State, HeadRef: sum.HeadRef, Head: sum.HeadSHA, HeadURL: s.commitURL(sum.HeadSHA),
		MergeSHA: sum.MergeSHA, MergeURL: s.commitURL(sum.MergeSHA), PlannedAt: sum.PlannedAt, Fork: sum.Fork, DiffsLeftOut: sum.DiffsLeftOut}
	if sum.Error {
		if ok, _ := s.opts.Authz.Allowed(ctx, id, Access{Verb: "get", Resource: "platforms"}); ok {
			row.Error = "the revision's declarations cannot be used: open the plan"
		}
	}
	create, configure, prune, shown := 0, 0, 0, 0
	for _, si := range sum.Instances {
		if !visible(si.Namespace) {
			continue
		}
		shown++
		switch outcome.PlanAction(si.Action) {
		case outcome.PlanCreate:
			row.Create++
		case outcome.PlanUpdate:
			row.Update++
		case outcome.PlanDelete:
			row.Delete++
		case outcome.PlanError:
			row.Errors++
		}
		create, configure, prune = create+si.Create, configure+si.Configure, prune+si.Prune
		switch s.applied(ctx, sum, si.Namespace, si.Name, outcome.PlanAction(si.Action), si.RenderDigest) {
		case appliedAsPlanned:
			row.AsPlanned++
		case appliedOtherwise:
			row.Otherwise++
		case notSyncedYet:
			row.NotSynced++
		}
	}
	row.Objects = fmt.Sprintf("%d to create, %d to configure, %d to prune", create, configure, prune)
	return row, shown > 0 || row.Error != ""
}

// applied says what became of an instance's planned render once its pull request
// was merged: applied as planned (it runs that render now, or its history holds it
// at the merge commit), applied otherwise (its history holds another render at the
// merge commit, or a render applied since the merge), or not synced yet; "" for an
// instance the plan left alone, or a pull request not merged.
func (s *Server) applied(ctx context.Context, sum plans.Summary, ns, name string, action outcome.PlanAction, digest string) string {
	if sum.State != forge.PRMerged || sum.MergeSHA == "" || digest == "" ||
		action != outcome.PlanCreate && action != outcome.PlanUpdate {
		return ""
	}
	mi := &cairnv1.ModuleInstance{}
	if err := s.opts.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mi); err != nil {
		return notSyncedYet
	}
	if mi.Status.RenderDigest == digest {
		return appliedAsPlanned
	}
	for _, h := range mi.Status.History {
		switch {
		case h.Revision == sum.MergeSHA && h.RenderDigest == digest:
			return appliedAsPlanned
		case h.Revision == sum.MergeSHA, sum.MergedAt != nil && h.Time.After(*sum.MergedAt):
			return appliedOtherwise
		}
	}
	return notSyncedYet
}

// pulls serves the plans of the pull requests: those waiting first. It reads the
// plans' summaries only (the Secrets' metadata).
func (s *Server) pulls(w http.ResponseWriter, r *http.Request, id *Identity) {
	p := s.base(id, "Pull requests")
	p.Pulls = &pullsView{}
	if s.opts.Plans != nil {
		sums, err := s.opts.Plans.Summaries(r.Context())
		if err != nil {
			s.opts.Log.Error(err, "failed to list the plans")
			s.fail(w, r, id, http.StatusServiceUnavailable, "the plans could not be read: try again")
			return
		}
		var namespaces []string
		for _, sum := range sums {
			for _, si := range sum.Instances {
				namespaces = append(namespaces, si.Namespace)
			}
		}
		visible, err := s.visibleNamespaces(r.Context(), id, namespaces)
		if err != nil {
			s.fail(w, r, id, http.StatusServiceUnavailable, "the access review failed: try again")
			return
		}
		for _, sum := range sums {
			row, ok := s.pullRowOf(r.Context(), id, sum, visible)
			if !ok {
				continue
			}
			if sum.State == forge.PROpen || sum.State == "" {
				p.Pulls.Open = append(p.Pulls.Open, row)
			} else {
				p.Pulls.Done = append(p.Pulls.Done, row)
			}
		}
	}
	s.render(w, r, "pulls", http.StatusOK, p)
}

// pull serves one pull request's plan.
func (s *Server) pull(w http.ResponseWriter, r *http.Request, id *Identity) {
	number, err := strconv.Atoi(r.PathValue("number"))
	if err != nil || number <= 0 || s.opts.Plans == nil {
		s.fail(w, r, id, http.StatusNotFound, "no such pull request")
		return
	}
	rec, err := s.opts.Plans.Get(r.Context(), number)
	if err != nil {
		s.opts.Log.Error(err, "failed to read a plan", "pr", number)
		s.fail(w, r, id, http.StatusServiceUnavailable, "the plan could not be read: try again")
		return
	}
	var v pullView
	ok := false
	if rec != nil {
		if v, ok, err = s.planOf(r.Context(), id, rec); err != nil {
			s.fail(w, r, id, http.StatusServiceUnavailable, "the access review failed: try again")
			return
		}
	}
	if !ok {
		s.fail(w, r, id, http.StatusNotFound, fmt.Sprintf("no plan of pull request #%d that you may see", number))
		return
	}
	p := s.base(id, fmt.Sprintf("Pull request #%d", number))
	p.Pull = &v
	s.render(w, r, "pull", http.StatusOK, p)
}

// planOf is rec's plan cut to the instances id may see.
func (s *Server) planOf(ctx context.Context, id *Identity, rec *plans.Record) (pullView, bool, error) {
	namespaces := make([]string, 0, len(rec.Plan.Instances))
	for _, ip := range rec.Plan.Instances {
		namespaces = append(namespaces, ip.Namespace)
	}
	visible, err := s.visibleNamespaces(ctx, id, namespaces)
	if err != nil {
		return pullView{}, false, err
	}
	sum := plans.SummaryOf(rec)
	row, ok := s.pullRowOf(ctx, id, sum, visible)
	if row.Error != "" {
		row.Error = rec.Plan.Error
	}
	v := pullView{Row: row}
	for _, ip := range rec.Plan.Instances {
		if visible(ip.Namespace) {
			v.Instances = append(v.Instances, pullInstance{InstancePlan: ip,
				Applied: s.applied(ctx, sum, ip.Namespace, ip.Name, ip.Action, ip.RenderDigest)})
		}
	}
	return v, ok, nil
}
