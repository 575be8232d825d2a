package reconciler

import (
	"context"
	"fmt"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/testobj"
	"cairn.dev/cairn/reconciler/contracts"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/status"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/render/declarations"
)

const widgetKind = "Widget.example.com"

var widgetGK = schema.GroupKind{Group: "example.com", Kind: "Widget"}

// contractRun is one instance of contractsFixture.
type contractRun struct {
	key       string
	objects   []*unstructured.Unstructured // its render; nil: not rendered this time
	provides  []string                     // its CR's status.provides
	requires  []cairnv1.ContractRequirement
	dependsOn []string // names of instances of its namespace
	noCR      bool     // a new instance: no CR, no status
	unchanged bool     // the revision does not affect it
	suspended bool     // suspended in Git
}

// contractsFixture is a sync whose renders are done: its instances in the order
// given, each rendered or not, with the status its CR records.
func contractsFixture(runs ...contractRun) *RevisionState {
	s := &RevisionState{revisionInput: revisionInput{set: &declarations.Set{}}, verdicts: verdicts{conflicted: map[string]bool{}},
		byKey: map[string]*instanceState{}}
	for _, c := range runs {
		ns, name := splitKey(c.key)
		mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		mi.Spec.Suspend = c.suspended
		for _, d := range c.dependsOn {
			mi.Spec.DependsOn = append(mi.Spec.DependsOn, cairnv1.InstanceReference{Name: d})
		}
		r := &instanceState{instancePlan: instancePlan{mi: mi, affected: !c.unchanged}}
		if c.objects != nil {
			r.rendered, r.objects, r.shape = &render.Result{}, c.objects, shapeOf(c.objects)
		}
		if !c.noCR {
			r.was = mi.DeepCopy()
			r.was.Status.Provides, r.was.Status.Requires = c.provides, c.requires
		}
		s.runs = append(s.runs, r)
		s.byKey[c.key] = r
	}
	return s
}

func widgets(names ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, n := range names {
		out = append(out, testobj.Object("example.com/v1", "Widget", "", n))
	}
	return out
}

// TestContractsPhase runs the contracts phase of a sync (inferContracts) over
// renders and recorded statuses: who provides, who requires whom, which
// newcomers fail a conflict, which instances fail a cycle.
func TestContractsPhase(t *testing.T) {
	crd := testobj.CRD("example.com", "Widget")
	for _, tc := range []struct {
		name     string
		runs     []contractRun
		provider string            // the provider of Widget after the phase ("": none)
		requires map[string]string // requirer -> the provider it requires
		failed   map[string]string // key -> reason and part of the message
		cyclic   []string
		pending  map[string][]string // requirer -> the kinds it waits for
	}{{
		name: "a requirer of a provider rendered this time waits for it to serve the kind",
		runs: []contractRun{
			{key: "infra/prov", objects: []*unstructured.Unstructured{crd}},
			{key: "team/use", objects: widgets("w")},
		},
		provider: "infra/prov", requires: map[string]string{"team/use": "infra/prov"},
		pending: map[string][]string{"team/use": {widgetKind}},
	}, {
		name: "a provider not rendered this time provides what its status records, served already",
		runs: []contractRun{
			{key: "infra/prov", provides: []string{widgetKind}, unchanged: true},
			{key: "team/use", objects: widgets("w")},
		},
		provider: "infra/prov", requires: map[string]string{"team/use": "infra/prov"},
	}, {
		name: "a requirer not rendered this time keeps the requirement its status records",
		runs: []contractRun{
			{key: "infra/prov", objects: []*unstructured.Unstructured{crd}, provides: []string{widgetKind}},
			{key: "team/use", requires: []cairnv1.ContractRequirement{{Instance: "infra/prov", Kinds: []string{widgetKind}}}, unchanged: true},
		},
		provider: "infra/prov", requires: map[string]string{"team/use": "infra/prov"},
	}, {
		name: "a newcomer that renders the CRD of a kind another provides fails, the provider goes on",
		runs: []contractRun{
			{key: "infra/prov", provides: []string{widgetKind}, unchanged: true},
			{key: "team/copy", objects: []*unstructured.Unstructured{crd}},
			{key: "team/use", objects: widgets("w")},
		},
		provider: "infra/prov", requires: map[string]string{"team/use": "infra/prov"},
		failed: map[string]string{"team/copy": cairnv1.ReasonContractConflict +
			": the CustomResourceDefinition of Widget.example.com is provided by infra/prov already, and by team/copy"},
	}, {
		name: "the provider that served the kind before keeps it when both render it",
		runs: []contractRun{
			{key: "team/copy", objects: []*unstructured.Unstructured{crd}},
			{key: "infra/prov", objects: []*unstructured.Unstructured{crd}, provides: []string{widgetKind}},
			{key: "team/use", objects: widgets("w")},
		},
		provider: "infra/prov", requires: map[string]string{"team/use": "infra/prov"},
		failed: map[string]string{"team/copy": "is provided by infra/prov already, and by team/copy"},
	}, {
		name: "two new providers of one kind both fail, and nobody requires either",
		runs: []contractRun{
			{key: "a/one", objects: []*unstructured.Unstructured{crd}, noCR: true},
			{key: "b/two", objects: []*unstructured.Unstructured{crd}},
			{key: "team/use", objects: widgets("w")},
		},
		failed: map[string]string{
			"a/one": "is provided by more than one instance: a/one, b/two; a kind has one provider",
			"b/two": "is provided by more than one instance: a/one, b/two",
		},
	}, {
		name: "a dependsOn and a provider not yet serving its kind make a cycle: both fail",
		runs: []contractRun{
			{key: "team/prov", objects: []*unstructured.Unstructured{crd}, dependsOn: []string{"use"}},
			{key: "team/use", objects: widgets("w")},
		},
		provider: "team/prov", requires: map[string]string{"team/use": "team/prov"},
		failed: map[string]string{
			"team/prov": cairnv1.ReasonDependencyCycle + ": a cycle of dependsOn and provided kinds: team/prov -> team/use -> team/prov",
			"team/use":  "team/prov -> team/use -> team/prov",
		},
		cyclic: []string{"team/prov", "team/use"},
	}, {
		name: "a provider that served the kind once is no edge: no cycle",
		runs: []contractRun{
			{key: "team/prov", objects: []*unstructured.Unstructured{crd}, provides: []string{widgetKind}, dependsOn: []string{"use"}},
			{key: "team/use", objects: widgets("w")},
		},
		provider: "team/prov", requires: map[string]string{"team/use": "team/prov"},
	}, {
		name: "an instance the revision does not affect is in the cycle but does not fail",
		runs: []contractRun{
			{key: "team/prov", objects: []*unstructured.Unstructured{crd}, dependsOn: []string{"use"}},
			{key: "team/use", requires: []cairnv1.ContractRequirement{{Instance: "team/prov", Kinds: []string{widgetKind}}}, unchanged: true},
		},
		provider: "team/prov", requires: map[string]string{"team/use": "team/prov"},
		failed: map[string]string{"team/prov": "team/prov -> team/use -> team/prov"},
		cyclic: []string{"team/prov", "team/use"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := contractsFixture(tc.runs...)
			s.inferContracts(nil)

			if tc.provider == "" {
				g.Expect(s.contracts.ProviderOf(widgetGK)).To(BeEmpty())
			} else {
				g.Expect(s.contracts.ProviderOf(widgetGK)).To(Equal(tc.provider))
				g.Expect(s.contracts.Conflicts()).To(BeEmpty(), "the conflict is resolved by failing the newcomers")
			}
			for _, r := range s.runs {
				key := r.key()
				if want, ok := tc.requires[key]; ok {
					g.Expect(s.contracts.Providers(key)).To(Equal([]string{want}), key)
				} else {
					g.Expect(s.contracts.Providers(key)).To(BeEmpty(), key)
				}
				if want, ok := tc.failed[key]; ok {
					g.Expect(r.failure).NotTo(BeNil(), key)
					g.Expect(r.failure.Reason+": "+r.failure.Error()).To(ContainSubstring(want), key)
				} else {
					g.Expect(r.failure).To(BeNil(), key)
				}
				g.Expect(s.cyclic[key]).To(Equal(slices.Contains(tc.cyclic, key)), key)
				var pending []string
				for _, p := range s.pendingProviders(r) {
					pending = append(pending, p.Kinds...)
				}
				g.Expect(pending).To(Equal(tc.pending[key]), key)
			}
		})
	}
}

// TestPendingProviders: a requirer waits for the kinds its provider has not
// served yet (its status does not record them), and for nothing once it has.
func TestPendingProviders(t *testing.T) {
	gadget := testobj.CRD("example.com", "Gadget")
	uses := append(widgets("w"), testobj.Object("example.com/v1", "Gadget", "", "g"))
	for _, tc := range []struct {
		name    string
		prov    contractRun
		cyclic  bool
		pending []cairnv1.ContractRequirement
	}{
		{name: "a new provider: every kind", prov: contractRun{noCR: true},
			pending: []cairnv1.ContractRequirement{{Instance: "infra/prov", Kinds: []string{"Gadget.example.com", widgetKind}}}},
		{name: "served one kind: the other", prov: contractRun{provides: []string{widgetKind}},
			pending: []cairnv1.ContractRequirement{{Instance: "infra/prov", Kinds: []string{"Gadget.example.com"}}}},
		{name: "served both: none", prov: contractRun{provides: []string{"Gadget.example.com", widgetKind}}},
		{name: "in a cycle: waits on nothing", prov: contractRun{noCR: true}, cyclic: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			prov := tc.prov
			prov.key, prov.objects = "infra/prov", []*unstructured.Unstructured{testobj.CRD("example.com", "Widget"), gadget}
			s := contractsFixture(prov, contractRun{key: "team/use", objects: uses})
			s.contracts = contracts.Infer(map[string][]*unstructured.Unstructured{"infra/prov": prov.objects, "team/use": uses}, nil)
			s.cyclic = map[string]bool{"team/use": tc.cyclic}
			g.Expect(s.pendingProviders(s.byKey["team/use"])).To(Equal(tc.pending))
		})
	}
}

// TestDependentsRemain: a provider that left Git is not removed while an instance
// that stays uses a kind it provides: by its render, by its status when it was not
// rendered, or by the status of a CR this revision does not sync.
func TestDependentsRemain(t *testing.T) {
	requiresProv := []cairnv1.ContractRequirement{{Instance: "infra/prov", Kinds: []string{widgetKind}}}
	many := make([]contractRun, 12)
	for i := range many {
		many[i] = contractRun{key: fmt.Sprintf("team/use-%02d", i), objects: widgets("w")}
	}
	for _, tc := range []struct {
		name    string
		runs    []contractRun
		held    bool // a CR whose file could not be read requires the provider
		removed bool // an instance removed in the same commit requires it
		refused string
	}{
		{name: "nobody uses its kinds", runs: []contractRun{{key: "team/plain", objects: []*unstructured.Unstructured{testobj.Object("v1", "ConfigMap", "", "c")}}}},
		{name: "a rendered instance uses its kind", runs: []contractRun{{key: "team/use", objects: widgets("w")}},
			refused: "infra/prov left Git but 1 instance(s) still use the kinds it provides (Widget.example.com): team/use; remove them first, or in the same commit"},
		{name: "an instance not rendered requires it by its status", runs: []contractRun{{key: "team/use", requires: requiresProv, unchanged: true}},
			refused: "1 instance(s) still use the kinds it provides (Widget.example.com): team/use;"},
		{name: "another instance provides the kind now", runs: []contractRun{
			{key: "infra/new", objects: []*unstructured.Unstructured{testobj.CRD("example.com", "Widget")}},
			{key: "team/use", objects: widgets("w")},
		}},
		{name: "a CR this revision does not sync requires it", held: true,
			refused: "1 instance(s) still use the kinds it provides (Widget.example.com): team/held;"},
		{name: "an instance removed with it does not hold it back", removed: true},
		{name: "at most ten requirers are named", runs: many,
			refused: "12 instance(s) still use the kinds it provides (Widget.example.com): team/use-00, team/use-01, team/use-02, " +
				"team/use-03, team/use-04, team/use-05, team/use-06, team/use-07, team/use-08, team/use-09 and 2 more;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := contractsFixture(tc.runs...)
			s.inferContracts(nil)
			other := func(name string) *cairnv1.ModuleInstance {
				mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}}
				mi.Status.Requires = requiresProv
				return mi
			}
			if tc.held {
				s.held = append(s.held, other("held"))
			}
			if tc.removed {
				s.removed = append(s.removed, other("gone"))
			}
			prov := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "prov"}}
			prov.Status.Provides = []string{widgetKind}
			f := s.dependentsRemain(prov)
			if tc.refused == "" {
				g.Expect(f).To(BeNil())
				return
			}
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Reason).To(Equal(cairnv1.ReasonDependentsRemain))
			g.Expect(f.Error()).To(ContainSubstring(tc.refused))
		})
	}
}

// TestInstanceDependencies: what an instance reconcile waits for before it applies:
// its dependsOn and the providers whose kinds it uses that have not served them
// yet, each pending until it has an outcome at this revision (an instance the
// revision does not affect has one at once, from its status), then a reason to
// wait unless it is ready.
func TestInstanceDependencies(t *testing.T) {
	crd := testobj.CRD("example.com", "Widget")
	ready := &InstanceOutcome{Result: InstanceResult{Action: outcome.ActionUpdated, Ready: true}, SatisfiesDependents: true}
	failed := &InstanceOutcome{Result: InstanceResult{Action: outcome.ActionFailed}}
	progressing := &InstanceOutcome{Result: InstanceResult{Action: outcome.ActionProgressing}}
	plain := []*unstructured.Unstructured{testobj.Object("v1", "ConfigMap", "", "c")}
	for _, tc := range []struct {
		name     string
		runs     []contractRun // team/app is the instance reconciled
		outcomes map[string]*InstanceOutcome
		pending  []string // what it waits on that has no outcome yet
		wait     string   // the reason it waits, and its message
	}{{
		name: "a dependency the revision does not affect: its status says it is ready",
		runs: []contractRun{{key: "team/db", unchanged: true}, {key: "team/app", objects: plain, dependsOn: []string{"db"}}},
	}, {
		name:    "a dependency the revision affects, not reconciled yet",
		runs:    []contractRun{{key: "team/db", objects: plain}, {key: "team/app", objects: plain, dependsOn: []string{"db"}}},
		pending: []string{"team/db"},
	}, {
		name:     "a dependency that failed",
		runs:     []contractRun{{key: "team/db", objects: plain}, {key: "team/app", objects: plain, dependsOn: []string{"db"}}},
		outcomes: map[string]*InstanceOutcome{"team/db": failed},
		wait:     cairnv1.ReasonDependencyNotReady + ": dependency team/db is not ready",
	}, {
		name: "a dependency that is not declared",
		runs: []contractRun{{key: "team/app", objects: plain, dependsOn: []string{"db"}}},
		wait: cairnv1.ReasonDependencyNotReady + ": dependency team/db is not a valid instance",
	}, {
		name:    "a suspended dependency not recorded yet",
		runs:    []contractRun{{key: "team/db", unchanged: true, suspended: true}, {key: "team/app", objects: plain, dependsOn: []string{"db"}}},
		pending: []string{"team/db"},
	}, {
		name:    "a new provider of a kind it uses, not reconciled yet",
		runs:    []contractRun{{key: "infra/prov", objects: []*unstructured.Unstructured{crd}}, {key: "team/app", objects: widgets("w")}},
		pending: []string{"infra/prov"},
	}, {
		name:     "a new provider that is progressing",
		runs:     []contractRun{{key: "infra/prov", objects: []*unstructured.Unstructured{crd}}, {key: "team/app", objects: widgets("w")}},
		outcomes: map[string]*InstanceOutcome{"infra/prov": progressing},
		wait:     cairnv1.ReasonProviderNotReady + ": provider infra/prov of Widget.example.com is progressing: applied, not yet healthy",
	}, {
		name:     "a new provider that is ready",
		runs:     []contractRun{{key: "infra/prov", objects: []*unstructured.Unstructured{crd}}, {key: "team/app", objects: widgets("w")}},
		outcomes: map[string]*InstanceOutcome{"infra/prov": ready},
	}, {
		name: "a provider that served the kind before is not waited for",
		runs: []contractRun{{key: "infra/prov", objects: []*unstructured.Unstructured{crd}, provides: []string{widgetKind}},
			{key: "team/app", objects: widgets("w")}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := contractsFixture(tc.runs...)
			s.e = &Engine{}
			for _, r := range s.runs {
				if r.was != nil && r.key() != "team/app" {
					status.Succeeded(r.was, "old", cairnv1.ReasonSucceeded, "ok")
				}
			}
			s.inferContracts(nil)
			st := s.forReconciles()
			for key, out := range tc.outcomes {
				st.outcomes[key] = out
			}
			g.Expect(pendingOn(st.dependencies(context.Background(), s.byKey["team/app"]))).To(Equal(tc.pending))
			f, pending := dependencyVerdict(st.dependencies(context.Background(), s.byKey["team/app"]))
			g.Expect(pending).To(Equal(len(tc.pending) > 0))
			if tc.wait == "" {
				g.Expect(f).To(BeNil())
				return
			}
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Kind).To(Equal(outcome.Waiting))
			g.Expect(f.Reason + ": " + f.Error()).To(Equal(tc.wait))
		})
	}
}
