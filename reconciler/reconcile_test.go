package reconciler

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/status"
	"cairn.dev/cairn/render/declarations"
)

func TestInDependencyOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		deps map[string][]string // key -> what it waits on, in key order
	}{
		{"independent", map[string][]string{"a": nil, "b": nil, "c": nil}},
		{"chain", map[string][]string{"a": nil, "b": {"a"}, "c": {"b"}}},
		{"diamond", map[string][]string{"a": nil, "b": {"a"}, "c": {"a"}, "d": {"b", "c"}}},
		{"a dependency named twice", map[string][]string{"a": nil, "b": {"a", "a"}}},
		{"a dependency outside the keys is ignored", map[string][]string{"a": {"gone"}, "b": {"a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var keys []string
			for k := range tc.deps {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			var mu sync.Mutex
			var order []string
			inDependencyOrder(keys, func(k string) []string { return tc.deps[k] }, func(k string) {
				mu.Lock()
				defer mu.Unlock()
				for _, d := range tc.deps[k] {
					if slices.Contains(keys, d) {
						g.Expect(order).To(ContainElement(d), "%s ran before its dependency %s", k, d)
					}
				}
				order = append(order, k)
			})
			g.Expect(order).To(ConsistOf(keys), "every key runs exactly once")
		})
	}
}

func TestInDependencyOrderRunsIndependentKeysTogether(t *testing.T) {
	g := NewWithT(t)
	var started sync.WaitGroup
	started.Add(2)
	together := make(chan bool, 2)
	inDependencyOrder([]string{"a", "b"}, func(string) []string { return nil }, func(string) {
		started.Done()
		ok := make(chan struct{})
		go func() { started.Wait(); close(ok) }()
		select {
		case <-ok:
			together <- true
		case <-time.After(5 * time.Second):
			together <- false
		}
	})
	g.Expect(<-together && <-together).To(BeTrue(), "neither waited for the other")
}

func TestDependencyVerdict(t *testing.T) {
	ready := &InstanceOutcome{Result: InstanceResult{Action: outcome.ActionUnchanged, Ready: true}, SatisfiesDependents: true}
	failed := &InstanceOutcome{Result: InstanceResult{Action: outcome.ActionFailed}}
	progressing := &InstanceOutcome{Result: InstanceResult{Action: outcome.ActionProgressing}}
	dep := func(key string, o *InstanceOutcome) dependencyState {
		return dependencyState{key: key, declared: true, outcome: o}
	}
	for _, tc := range []struct {
		name    string
		deps    []dependencyState
		pending bool
		wait    string // "" when it may go ahead
	}{
		{"no dependencies", nil, false, ""},
		{"all ready", []dependencyState{dep("ns/a", ready), dep("ns/b", ready)}, false, ""},
		{"one not reconciled yet", []dependencyState{dep("ns/a", ready), dep("ns/b", nil)}, true, ""},
		{"not ready", []dependencyState{dep("ns/a", failed)}, false, "dependency ns/a is not ready"},
		{"progressing", []dependencyState{dep("ns/a", progressing)}, false, "dependency ns/a is progressing: applied, not yet healthy"},
		{"not declared", []dependencyState{{key: "ns/gone"}}, false, "dependency ns/gone is not a valid instance"},
		{"the first reason wins", []dependencyState{dep("ns/a", failed), dep("ns/b", progressing)}, false, "dependency ns/a is not ready"},
		{"pending wins over a failure", []dependencyState{dep("ns/a", failed), dep("ns/b", nil)}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f, pending := dependencyVerdict(tc.deps)
			g.Expect(pending).To(Equal(tc.pending))
			if tc.wait == "" {
				g.Expect(f).To(BeNil())
				return
			}
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Kind).To(Equal(outcome.Waiting))
			g.Expect(f.Reason).To(Equal(cairnv1.ReasonDependencyNotReady))
			g.Expect(f.Error()).To(Equal(tc.wait))
		})
	}
}

func TestRequeueAt(t *testing.T) {
	g := NewWithT(t)
	now := time.Now()
	later, earlier := now.Add(time.Minute), now.Add(-time.Minute)
	g.Expect(requeueAt(nil, now)).To(BeZero(), "nothing to retry")
	g.Expect(requeueAt(&later, now)).To(Equal(time.Minute))
	g.Expect(requeueAt(&earlier, now)).To(BeNumerically(">", 0), "overdue: at once, never zero (zero means never)")
}

// planFixture is a sync of revision "new" over four instances, each in its own file:
// team-a/db, team-a/web (dependsOn db), team-a/api (a local module) and team-b/cache.
func planFixture(t *testing.T, changed []string) *RevisionState {
	t.Helper()
	doc := func(ns, name, extra string) string {
		return "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n" + extra
	}
	cue := "  module: {cue: {path: example.com/m@v0, version: v0.1.0}}\n"
	fsys := fstest.MapFS{
		"platform.yaml":        {Data: []byte("apiVersion: cairn.dev/v1alpha1\nkind: Platform\nmetadata: {name: cluster}\nspec:\n  moduleRegistry: modules\n  namespaces: {allow: [\"team-*\"]}\n---\napiVersion: cairn.dev/v1alpha1\nkind: Registry\nmetadata: {name: modules}\nspec: {hostname: modules.example.com}\n")},
		"instances/db.yaml":    {Data: []byte(doc("team-a", "db", cue))},
		"instances/web.yaml":   {Data: []byte(doc("team-a", "web", cue+"  dependsOn: [{name: db}]\n"))},
		"instances/api.yaml":   {Data: []byte(doc("team-a", "api", "  module: {local: {path: ./modules/api}}\n"))},
		"instances/cache.yaml": {Data: []byte(doc("team-b", "cache", cue))},
	}
	set, err := declarations.Load(fsys, declarations.Options{})
	if err != nil {
		t.Fatalf("failed to load the fixture: %v", err)
	}
	if len(set.Instances) != 4 {
		t.Fatalf("fixture: %d instances, want 4 (invalid: %v)", len(set.Instances), set.Invalid)
	}
	rev := Revision{SHA: "new", Changed: changed}
	return &RevisionState{
		revisionInput: revisionInput{set: set, rev: rev, changes: newChanges(rev, "."), now: time.Now()},
		clusterView: clusterView{live: map[string]*cairnv1.ModuleInstance{},
			moduleDigests: map[string]string{"modules/api": "digest-now"}},
		byKey: map[string]*instanceState{}}
}

// synced is the CR of mi after a successful sync of revision "old" whose spec is
// still s's view of it.
func synced(s *RevisionState, ns, name string) *cairnv1.ModuleInstance {
	mi := s.set.Instance(ns, name).DeepCopy()
	mi.Generation = 1
	mi.Annotations = map[string]string{specDigestAnnotation: s.specDigest(mi)}
	src, _ := s.repositorySource(mi)
	mi.Status.SourceDigest = src
	mi.Status.LastAttemptedInput = inputDigest(s.specDigest(mi), src, "")
	status.Succeeded(mi, "old", cairnv1.ReasonSucceeded, "ok")
	return mi
}

// declarationChanged makes mi's CR record an older declaration, as its last attempt.
func declarationChanged(mi *cairnv1.ModuleInstance) {
	mi.Annotations[specDigestAnnotation] = "before"
	mi.Status.LastAttemptedInput = "before"
}

func TestIsAffected(t *testing.T) {
	failedAt := func(rev string, retryIn time.Duration) func(*RevisionState, *cairnv1.ModuleInstance) {
		return func(s *RevisionState, mi *cairnv1.ModuleInstance) {
			status.Failed(mi, rev, outcome.NewTransient(cairnv1.ReasonApplyFailed, errors.New("boom")), s.now.Add(retryIn-5*time.Second))
		}
	}
	for _, tc := range []struct {
		name     string
		instance string // in team-a
		changed  []string
		live     func(s *RevisionState, mi *cairnv1.ModuleInstance) // nil: the CR as synced; set mi to nil by returning from none
		noCR     bool
		affected bool
		why      string
		forced   bool
		// refreshed: the plan made a new refresh part of the instance's input.
		refreshed bool
	}{
		{name: "new instance", instance: "web", noCR: true, affected: true, why: "new instance"},
		{name: "unchanged", instance: "web", changed: []string{"instances/web.yaml"}, why: "unchanged"},
		{name: "declaration changed", instance: "web", changed: []string{"instances/web.yaml"},
			live: func(_ *RevisionState, mi *cairnv1.ModuleInstance) { declarationChanged(mi) }, affected: true, why: "declaration changed"},
		{name: "a commit that leaves its input as it was leaves it alone, whatever paths it touches", instance: "web",
			changed: []string{"instances/web.yaml", "platform.yaml", "modules/api/main.cue"}, why: "unchanged"},
		{name: "the Platform's file changed", instance: "web", changed: []string{"platform.yaml"},
			live: func(_ *RevisionState, mi *cairnv1.ModuleInstance) { declarationChanged(mi) }, affected: true, why: "declaration changed"},
		{name: "an unknown diff looks at every digest", instance: "web", changed: nil,
			live: func(_ *RevisionState, mi *cairnv1.ModuleInstance) { declarationChanged(mi) }, affected: true, why: "declaration changed"},
		{name: "edited in the cluster", instance: "web", changed: []string{},
			live: func(_ *RevisionState, mi *cairnv1.ModuleInstance) { mi.Generation = 2 }, affected: true,
			why: "spec changed since the last sync (an interrupted sync or an edit in the cluster)"},
		{name: "local module changed", instance: "api", changed: []string{"modules/api/main.cue"},
			live: func(_ *RevisionState, mi *cairnv1.ModuleInstance) {
				mi.Status.SourceDigest, mi.Status.LastAttemptedInput = "digest-before", "before"
			}, affected: true, why: "local module changed"},
		{name: "an input written but never attempted (a crash between the revision step and the reconcile)", instance: "api",
			changed: []string{}, live: func(_ *RevisionState, mi *cairnv1.ModuleInstance) {
				mi.Annotations[inputRevisionAnnotation] = "0123456789abcdef"
				mi.Status.LastAttemptedInput = "before"
			}, affected: true, why: "input written at 0123456789ab not synced yet"},
		{name: "a CR an older cairn synced, with no input digest", instance: "web", changed: []string{},
			live: func(_ *RevisionState, mi *cairnv1.ModuleInstance) { mi.Status.LastAttemptedInput = "" }, affected: true,
			why: "input digest not recorded yet"},
		{name: "suspended in Git", instance: "web", live: func(s *RevisionState, _ *cairnv1.ModuleInstance) {
			s.set.Instance("team-a", "web").Spec.Suspend = true
		}, why: "suspended"},
		{name: "suspended in the cluster", instance: "web", changed: []string{"instances/web.yaml"}, live: func(_ *RevisionState, mi *cairnv1.ModuleInstance) {
			mi.Annotations[cairnv1.SuspendAnnotation] = "true"
			declarationChanged(mi)
		}, why: "suspended in the cluster (cairn suspend)"},
		{name: "resumed", instance: "web", changed: []string{}, live: func(_ *RevisionState, mi *cairnv1.ModuleInstance) { status.Suspended(mi, false) },
			affected: true, why: "resumed"},
		{name: "reconcile requested", instance: "web", changed: []string{}, live: func(_ *RevisionState, mi *cairnv1.ModuleInstance) {
			mi.Annotations[cairnv1.ReconcileRequestAnnotation] = "2026-12-01T10:00:00Z"
		}, affected: true, forced: true, why: "reconcile requested (cairn reconcile): every object applied again"},
		{name: "reconcile request already handled", instance: "web", changed: []string{}, live: func(_ *RevisionState, mi *cairnv1.ModuleInstance) {
			mi.Annotations[cairnv1.ReconcileRequestAnnotation] = "2026-12-01T10:00:00Z"
			mi.Status.LastHandledReconcileAt = "2026-12-01T10:00:00Z"
		}, why: "unchanged"},
		{name: "a Secret of a Registry it uses changed in the cluster", instance: "web", changed: []string{},
			live: func(s *RevisionState, _ *cairnv1.ModuleInstance) { s.rev.Refreshed = []string{"other", "modules"} }, affected: true,
			refreshed: true, why: "the Secrets or ConfigMaps of Registry modules changed in the cluster: rendered and verified again"},
		{name: "a refresh the revision step wrote, not attempted yet (the reconcile of a replica, which knows no refresh of its own)",
			instance: "web", changed: []string{}, live: func(_ *RevisionState, mi *cairnv1.ModuleInstance) {
				mi.Annotations[refreshAnnotation] = "modules@2026-12-03T12:00:00Z"
			}, affected: true, why: "the Secrets or ConfigMaps of Registry modules changed in the cluster: rendered and verified again"},
		{name: "a refresh attempted already", instance: "web", changed: []string{}, live: func(s *RevisionState, mi *cairnv1.ModuleInstance) {
			mi.Annotations[refreshAnnotation] = "modules@2026-12-03T12:00:00Z"
			mi.Status.LastAttemptedInput = inputDigest(s.specDigest(mi), mi.Status.SourceDigest, "modules@2026-12-03T12:00:00Z")
		}, why: "unchanged"},
		{name: "a Secret of a Registry it does not use changed", instance: "api", changed: []string{},
			live: func(s *RevisionState, _ *cairnv1.ModuleInstance) { s.rev.Refreshed = []string{"modules"} }, why: "unchanged"},
		{name: "failed at an older revision", instance: "web", changed: []string{}, live: failedAt("old", time.Hour),
			affected: true, why: "retrying a failed sync at a new revision"},
		{name: "failed at this revision, retry not due", instance: "web", changed: []string{}, live: failedAt("new", time.Hour),
			why: "not retried before"},
		{name: "failed at this revision, retry due", instance: "web", changed: []string{}, live: failedAt("new", -time.Second),
			affected: true, why: "retrying a failed sync (Transient retry due)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := planFixture(t, tc.changed)
			var live *cairnv1.ModuleInstance
			if !tc.noCR {
				live = synced(s, "team-a", tc.instance)
				if tc.live != nil {
					tc.live(s, live)
				}
			}
			r := s.planInstance(s.set.Instance("team-a", tc.instance), live)
			refresh := ""
			if live != nil {
				refresh = live.Annotations[refreshAnnotation]
			}
			before := inputDigest(r.specDigest, r.sourceDigest, refresh)
			affected, why := r.affected, r.why
			g.Expect(affected).To(Equal(tc.affected))
			g.Expect(why).To(HavePrefix(tc.why))
			g.Expect(r.forced).To(Equal(tc.forced))
			if tc.refreshed {
				g.Expect(r.refresh).To(HavePrefix("modules@"))
				g.Expect(r.inputDigest).NotTo(Equal(before), "a refresh is a new input: the CR is written and its reconcile woken")
				g.Expect(r.inputDigest).To(Equal(inputDigest(r.specDigest, r.sourceDigest, r.refresh)))
			} else {
				g.Expect(r.inputDigest).To(Equal(before))
			}
		})
	}
}

func TestPlanMarksDependentsAndFindsRemoved(t *testing.T) {
	for _, tc := range []struct {
		name     string
		changed  []string
		edit     func(s *RevisionState)
		affected []string
		removed  []string
	}{
		{name: "nothing changed", changed: []string{}},
		{name: "a dependency changed: its dependent follows", changed: []string{"instances/db.yaml"},
			edit:     func(s *RevisionState) { declarationChanged(s.live["team-a/db"]) },
			affected: []string{"team-a/db", "team-a/web"}},
		{name: "a dependent changed: its dependency stays", changed: []string{"instances/web.yaml"},
			edit:     func(s *RevisionState) { declarationChanged(s.live["team-a/web"]) },
			affected: []string{"team-a/web"}},
		{name: "a suspended dependent does not follow", changed: []string{"instances/db.yaml"},
			edit: func(s *RevisionState) {
				declarationChanged(s.live["team-a/db"])
				s.live["team-a/web"].Annotations[cairnv1.SuspendAnnotation] = "true"
			},
			affected: []string{"team-a/db"}},
		{name: "a CR whose declaration left Git is removed", changed: []string{"instances/old.yaml"},
			edit: func(s *RevisionState) {
				gone := synced(s, "team-b", "cache")
				gone.Name = "old"
				s.live["team-b/old"] = gone
			},
			removed: []string{"team-b/old"}},
		{name: "a CR whose file could not be read is held, not removed", changed: []string{},
			edit: func(s *RevisionState) {
				gone := synced(s, "team-b", "cache")
				gone.Name = "old"
				gone.Annotations[sourceAnnotation] = "instances/old.yaml"
				s.live["team-b/old"] = gone
				s.set.Unparsed = []string{"instances/old.yaml"}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := planFixture(t, tc.changed)
			for _, mi := range s.set.Instances {
				s.live[mi.Namespace+"/"+mi.Name] = synced(s, mi.Namespace, mi.Name)
			}
			if tc.edit != nil {
				tc.edit(s)
			}
			s.plan()
			var affected, removed []string
			for _, r := range s.runs {
				if r.affected {
					affected = append(affected, r.key())
				}
			}
			for _, live := range s.removed {
				removed = append(removed, live.Namespace+"/"+live.Name)
			}
			g.Expect(affected).To(ConsistOf(tc.affected))
			g.Expect(removed).To(ConsistOf(tc.removed))
			g.Expect(s.runs[0].key()).To(Equal("team-a/api"), "in dependsOn order, ties by key")
		})
	}
}

func TestInstanceResultAndOutcome(t *testing.T) {
	now := time.Now()
	// mk edits a reconcile of the instance, which runs when the edit leaves the
	// instance affected (the others keep the CR as the revision step found it).
	mk := func(edit func(r *instanceReconcile)) *instanceState {
		mi := &cairnv1.ModuleInstance{}
		mi.Namespace, mi.Name = "team-a", "web"
		live := mi.DeepCopy()
		status.Succeeded(live, "old", cairnv1.ReasonSucceeded, "ok")
		e := &instanceState{instancePlan: instancePlan{mi: mi, affected: true, was: live}}
		x := e.reconcileOn(live)
		edit(x)
		if x.affected {
			e.done(x)
		}
		return e
	}
	for _, tc := range []struct {
		name      string
		run       *instanceState
		action    outcome.Action
		retry     outcome.Kind
		ready     bool
		satisfies bool
		requeue   bool
	}{
		{"updated", mk(func(r *instanceReconcile) { status.Succeeded(r.live, "new", cairnv1.ReasonSucceeded, "ok") }), outcome.ActionUpdated, "", true, true, false},
		{"created", mk(func(r *instanceReconcile) { r.created = true }), outcome.ActionCreated, "", true, true, false},
		{"unchanged", mk(func(r *instanceReconcile) { r.affected, r.why = false, "unchanged" }), outcome.ActionUnchanged, "", true, true, false},
		{"failed", mk(func(r *instanceReconcile) {
			r.failure = outcome.NewTransient(cairnv1.ReasonApplyFailed, errors.New("boom"))
			status.Failed(r.live, "new", r.failure, now)
		}), outcome.ActionFailed, outcome.Transient, false, false, true},
		{"progressing", mk(func(r *instanceReconcile) {
			r.failure = &outcome.Failure{Kind: outcome.Progressing, Reason: cairnv1.ReasonProgressing, Err: errors.New("not yet")}
			status.Failed(r.live, "new", r.failure, now)
		}), outcome.ActionProgressing, outcome.Progressing, false, false, true},
		{"failed before, retry not due", mk(func(r *instanceReconcile) {
			r.affected, r.why = false, "not retried before"
			status.Failed(r.live, "new", outcome.NewStalled(cairnv1.ReasonRenderFailed, errors.New("bad")), now)
		}), outcome.ActionFailed, outcome.Stalled, false, false, true},
		{"suspended after a good sync", mk(func(r *instanceReconcile) { r.affected, r.mi.Spec.Suspend = false, true }), outcome.ActionSkipped, "", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			st := (&RevisionState{revisionInput: revisionInput{e: &Engine{opts: Options{Concurrency: 1, ApplyConcurrency: 1}}, now: now}}).forReconciles()
			out := st.keep(tc.run)
			g.Expect(out.Result.Action).To(Equal(tc.action))
			g.Expect(out.Result.Retry).To(Equal(tc.retry))
			g.Expect(out.Result.Ready).To(Equal(tc.ready))
			g.Expect(out.SatisfiesDependents).To(Equal(tc.satisfies))
			g.Expect(out.RequeueAfter > 0).To(Equal(tc.requeue), "requeued for its retry")
			g.Expect(st.outcome("team-a/web")).To(HaveValue(Equal(out)), "kept for its dependents")
		})
	}
}

func TestCountInstancesAndNextRetry(t *testing.T) {
	g := NewWithT(t)
	soon, later := time.Now().Add(time.Minute), time.Now().Add(time.Hour)
	res := &SyncResult{Instances: []InstanceResult{
		{Action: outcome.ActionUpdated, Ready: true}, {Action: outcome.ActionUnchanged, Ready: true},
		{Action: outcome.ActionFailed, NextRetryAt: &later}, {Action: outcome.ActionProgressing, NextRetryAt: &soon},
		{Action: outcome.ActionDeleted},
	}}
	g.Expect(countInstances(res)).To(Equal(cairnv1.InstanceCounts{Total: 4, Ready: 2, Failed: 1, Progressing: 1}))
	g.Expect(res.NextRetry()).To(Equal(soon))
	g.Expect(res.Failed()).To(BeTrue())
	unusable := &SyncResult{Error: errors.New("bad"), RetryAt: later}
	g.Expect(unusable.NextRetry()).To(Equal(later))
}
