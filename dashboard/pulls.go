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

// visiblePlan is rec's plan cut to the instances id may see; ok is false when it
// shows id nothing (a tenant sees only plans that touch its namespaces).
func (s *Server) visiblePlan(ctx context.Context, id *Identity, rec *plans.Record) (pullView, bool, error) {
	namespaces := make([]string, 0, len(rec.Plan.Instances))
	for _, ip := range rec.Plan.Instances {
		namespaces = append(namespaces, ip.Namespace)
	}
	visible, err := s.visibleNamespaces(ctx, id, namespaces)
	if err != nil {
		return pullView{}, false, err
	}
	v := pullView{Row: pullRow{Number: rec.Number, State: rec.State, HeadRef: rec.HeadRef, Head: rec.HeadSHA,
		HeadURL: s.commitURL(rec.HeadSHA), MergeSHA: rec.MergeSHA, MergeURL: s.commitURL(rec.MergeSHA), PlannedAt: rec.PlannedAt,
		Fork: rec.Fork, DiffsLeftOut: rec.DiffsLeftOut}}
	if rec.Plan.Error != "" {
		if ok, _ := s.opts.Authz.Allowed(ctx, id, Access{Verb: "get", Resource: "platforms"}); ok {
			v.Row.Error = rec.Plan.Error
		}
	}
	create, configure, prune := 0, 0, 0
	for _, ip := range rec.Plan.Instances {
		if !visible(ip.Namespace) {
			continue
		}
		pi := pullInstance{InstancePlan: ip}
		switch ip.Action {
		case outcome.PlanCreate:
			v.Row.Create++
		case outcome.PlanUpdate:
			v.Row.Update++
		case outcome.PlanDelete:
			v.Row.Delete++
		case outcome.PlanError:
			v.Row.Errors++
		}
		create, configure, prune = create+len(ip.Create), configure+len(ip.Configure), prune+len(ip.Prune)
		if rec.State == forge.PRMerged && rec.MergeSHA != "" {
			pi.Applied = s.applied(ctx, rec.MergeSHA, ip)
			switch pi.Applied {
			case appliedAsPlanned:
				v.Row.AsPlanned++
			case appliedOtherwise:
				v.Row.Otherwise++
			case notSyncedYet:
				v.Row.NotSynced++
			}
		}
		v.Instances = append(v.Instances, pi)
	}
	v.Row.Objects = fmt.Sprintf("%d to create, %d to configure, %d to prune", create, configure, prune)
	return v, len(v.Instances) > 0 || v.Row.Error != "", nil
}

// applied says whether the instance's sync of the merge commit applied the render
// its plan made (the digests of its history), "" for an instance the plan left
// alone.
func (s *Server) applied(ctx context.Context, merge string, ip reconciler.InstancePlan) string {
	if ip.Action != outcome.PlanCreate && ip.Action != outcome.PlanUpdate || ip.RenderDigest == "" {
		return ""
	}
	mi := &cairnv1.ModuleInstance{}
	if err := s.opts.Reader.Get(ctx, client.ObjectKey{Namespace: ip.Namespace, Name: ip.Name}, mi); err != nil {
		return notSyncedYet
	}
	for _, h := range mi.Status.History {
		if h.Revision == merge {
			if h.RenderDigest == ip.RenderDigest {
				return appliedAsPlanned
			}
			return appliedOtherwise
		}
	}
	return notSyncedYet
}

// pulls serves the plans of the pull requests: those waiting first.
func (s *Server) pulls(w http.ResponseWriter, r *http.Request, id *Identity) {
	p := s.base(id, "Pull requests")
	p.Pulls = &pullsView{}
	if s.opts.Plans != nil {
		recs, err := s.opts.Plans.List(r.Context())
		if err != nil {
			s.opts.Log.Error(err, "failed to list the plans")
			s.fail(w, r, id, http.StatusServiceUnavailable, "the plans could not be read: try again")
			return
		}
		for _, rec := range recs {
			v, ok, err := s.visiblePlan(r.Context(), id, rec)
			if err != nil {
				s.fail(w, r, id, http.StatusServiceUnavailable, "the access review failed: try again")
				return
			}
			if !ok {
				continue
			}
			if rec.State == forge.PROpen || rec.State == "" {
				p.Pulls.Open = append(p.Pulls.Open, v.Row)
			} else {
				p.Pulls.Done = append(p.Pulls.Done, v.Row)
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
		if v, ok, err = s.visiblePlan(r.Context(), id, rec); err != nil {
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
