package dashboard

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/status"
)

// The states a fleet row is filtered by.
const (
	stateReady       = "ready"
	stateFailed      = "failed"
	stateProgressing = "progressing"
	stateSuspended   = "suspended"
	stateHeld        = "held"
)

// row is one instance of the fleet page.
type row struct {
	Namespace, Name, Tenant string
	Module                  string
	Revision, RevisionURL   string
	Ready, Reason, Message  string
	State                   string
	Held                    string
	Suspended               bool
	Drift                   string
	LastSync                *metav1.Time
	Took                    string // how long the last reconcile took
	Objects                 int32
}

type counts struct {
	Total, Ready, Failed, Progressing, Suspended, Held int
}

type filter struct {
	Tenant, Namespace, State string
}

// platformView is what the fleet page shows of the Platform.
type platformView struct {
	Revision, RevisionURL, Attempted string
	Ready, Reason, Message           string
	LastSync                         *metav1.Time
	Repository                       string
	Conditions                       []metav1.Condition
	Recent                           []syncRow
}

// syncRow is one of the Platform's recent syncs, as the fleet page shows it.
type syncRow struct {
	Revision, Since, Took, Result          string
	Affected, Failed, PruneGuard, Warnings int32
}

func syncRows(records []cairnv1.SyncRecord) []syncRow {
	out := make([]syncRow, 0, len(records))
	for _, r := range records {
		out = append(out, syncRow{Revision: r.Revision, Since: since(&r.Started), Took: r.Duration.Duration.String(), Result: r.Result,
			Affected: r.Changed, Failed: r.Failed, PruneGuard: r.PruneGuard, Warnings: r.Warnings})
	}
	return out
}

type fleetView struct {
	Platform   *platformView
	Counts     counts
	Rows       []row
	Filter     filter
	Tenants    []string
	Namespaces []string
	States     []string
}

// visibleNamespaces decides which of namespaces id may see: every one when it may
// list ModuleInstances in all of them, else those where it may get them.
func (s *Server) visibleNamespaces(ctx context.Context, id *Identity, namespaces []string) (func(string) bool, error) {
	all, err := s.opts.Authz.Allowed(ctx, id, Access{Verb: "list", Resource: "moduleinstances"})
	if err != nil {
		return nil, err
	}
	if all {
		return func(string) bool { return true }, nil
	}
	ok := map[string]bool{}
	for _, ns := range namespaces {
		if ok[ns] {
			continue
		}
		allowed, err := s.opts.Authz.Allowed(ctx, id, Access{Verb: "get", Resource: "moduleinstances", Namespace: ns})
		if err != nil {
			return nil, err
		}
		ok[ns] = allowed
	}
	return func(ns string) bool { return ok[ns] }, nil
}

// fleetOf builds the fleet page of the instances id may see, filtered by f.
func (s *Server) fleetOf(ctx context.Context, id *Identity, f filter) (*fleetView, error) {
	var list cairnv1.ModuleInstanceList
	if err := s.opts.Reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("failed to list ModuleInstances: %w", err)
	}
	namespaces := make([]string, 0, len(list.Items))
	for i := range list.Items {
		namespaces = append(namespaces, list.Items[i].Namespace)
	}
	visible, err := s.visibleNamespaces(ctx, id, namespaces)
	if err != nil {
		return nil, err
	}
	v := &fleetView{Filter: f, States: []string{stateReady, stateFailed, stateProgressing, stateHeld, stateSuspended}}
	tenants, nss := map[string]bool{}, map[string]bool{}
	for i := range list.Items {
		mi := &list.Items[i]
		if !visible(mi.Namespace) {
			continue
		}
		r := s.rowOf(mi)
		tenants[r.Tenant], nss[r.Namespace] = true, true
		v.Counts.add(r)
		if f.Tenant != "" && r.Tenant != f.Tenant || f.Namespace != "" && r.Namespace != f.Namespace ||
			f.State != "" && !r.is(f.State) {
			continue
		}
		v.Rows = append(v.Rows, r)
	}
	sort.Slice(v.Rows, func(i, j int) bool {
		a, b := v.Rows[i], v.Rows[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	v.Tenants, v.Namespaces = sortedKeys(tenants), sortedKeys(nss)
	if p, err := s.platformOf(ctx, id); err == nil {
		v.Platform = p
	}
	return v, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func (c *counts) add(r row) {
	c.Total++
	switch {
	case r.Suspended:
		c.Suspended++
	case r.State == stateReady:
		c.Ready++
	case r.State == stateFailed:
		c.Failed++
	default:
		c.Progressing++
	}
	if r.Held != "" {
		c.Held++
	}
}

func (r row) is(state string) bool {
	switch state {
	case stateHeld:
		return r.Held != ""
	}
	return r.State == state
}

// rowOf is the fleet row of mi.
func (s *Server) rowOf(mi *cairnv1.ModuleInstance) row {
	r := row{Namespace: mi.Namespace, Name: mi.Name, Tenant: mi.Annotations[cairnv1.TenantAnnotation],
		Module: moduleOf(mi.Spec.Module), Revision: mi.Status.LastAppliedRevision, Ready: "Unknown"}
	r.RevisionURL = s.commitURL(r.Revision)
	if c := conditions.Get(mi, "Ready"); c != nil {
		r.Ready, r.Reason, r.Message = string(c.Status), c.Reason, c.Message
		r.LastSync = &c.LastTransitionTime
	}
	switch {
	case r.Ready == "True":
		r.State = stateReady
	case r.Ready == "False" && !conditions.IsTrue(mi, "Reconciling"):
		r.State = stateFailed
	default:
		r.State = stateProgressing
	}
	r.Suspended = mi.Spec.Suspend || status.SuspendAnnotated(mi)
	if r.Suspended { // counted, and filtered, as suspended only
		r.State = stateSuspended
	}
	if h := mi.Status.Held; h != nil {
		r.Held = h.RenderDigest
		if r.Held == "" {
			r.Held = h.Revision
		}
	}
	if c := conditions.Get(mi, cairnv1.DriftedCondition); c != nil {
		r.Drift = c.Reason
		if c.Status == metav1.ConditionTrue {
			r.Drift = "drifted: " + c.Reason
		}
	}
	if len(mi.Status.History) > 0 {
		r.LastSync = &mi.Status.History[0].Time
		if d := mi.Status.History[0].Duration; d != nil {
			r.Took = d.Duration.String()
		}
	}
	if mi.Status.Inventory != nil {
		r.Objects = mi.Status.Inventory.Count
	}
	return r
}

// moduleOf says what an instance renders, as its declaration names it.
func moduleOf(m cairnv1.ModuleSource) string {
	switch {
	case m.Chart != nil:
		return "chart " + m.Chart.URL + at(m.Chart.Version)
	case m.CUE != nil:
		return "cue " + m.CUE.Path + at(m.CUE.Version)
	case m.Timoni != nil && m.Timoni.URL != "":
		return "timoni " + m.Timoni.URL + at(m.Timoni.Version)
	case m.Timoni != nil:
		return "timoni " + m.Timoni.Path
	case m.Kustomize != nil:
		return "kustomize " + m.Kustomize.Path
	case m.Local != nil:
		return "local " + m.Local.Path
	}
	return "-"
}

func at(version string) string {
	if version == "" {
		return ""
	}
	return "@" + version
}

func (s *Server) commitURL(sha string) string {
	if s.opts.CommitURL == nil || sha == "" || strings.HasPrefix(sha, "dir:") {
		return ""
	}
	return s.opts.CommitURL(sha)
}

// platformOf is the Platform, when id may read it.
func (s *Server) platformOf(ctx context.Context, id *Identity) (*platformView, error) {
	ok, err := s.opts.Authz.Allowed(ctx, id, Access{Verb: "get", Resource: "platforms"})
	if err != nil || !ok {
		return nil, fmt.Errorf("not allowed")
	}
	var p cairnv1.Platform
	if err := s.opts.Reader.Get(ctx, client.ObjectKey{Name: cairnv1.PlatformName}, &p); err != nil {
		return nil, err
	}
	v := &platformView{Revision: p.Status.LastSyncedRevision, Attempted: p.Status.LastAttemptedRevision,
		LastSync: p.Status.LastSyncTime, Repository: p.Status.Repository, Ready: "Unknown", Conditions: p.Status.Conditions,
		Recent: syncRows(p.Status.RecentSyncs)}
	v.RevisionURL = s.commitURL(v.Revision)
	if c := conditions.Get(&p, "Ready"); c != nil {
		v.Ready, v.Reason, v.Message = string(c.Status), c.Reason, c.Message
	}
	return v, nil
}

// since says how long ago t was, for people.
func since(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	d := time.Since(t.Time)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

func short(s string) string {
	if i := strings.IndexByte(s, ':'); i > 0 && len(s) > i+13 {
		return s[:i+13] // digest: algorithm and 12 hex
	}
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
