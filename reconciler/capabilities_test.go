package reconciler

import (
	"context"
	"errors"
	"testing"
	"testing/fstest"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/status"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/render/declarations"
)

// stubDiscovery answers discovery as a cluster would.
type stubDiscovery struct {
	version      string
	versionErr   error
	groups       []*metav1.APIGroup
	resources    []*metav1.APIResourceList
	resourcesErr error
	calls        int
}

func (d *stubDiscovery) ServerVersionWithContext(context.Context) (*version.Info, error) {
	d.calls++
	return &version.Info{GitVersion: d.version}, d.versionErr
}

func (d *stubDiscovery) ServerGroupsAndResourcesWithContext(context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	d.calls++
	return d.groups, d.resources, d.resourcesErr
}

func group(name string, versions ...string) *metav1.APIGroup {
	g := &metav1.APIGroup{Name: name}
	for _, v := range versions {
		gv := schema.GroupVersion{Group: name, Version: v}.String()
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: v})
	}
	return g
}

func resources(gv string, kinds ...string) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: gv}
	for _, k := range kinds {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: k + "s", Kind: k})
	}
	return l
}

// TestDiscoverCapabilities: the capabilities are the cluster's version and, as in
// `helm install`, every group/version and group/version/kind it serves, sorted and
// without repeats (a kind's subresources share its kind); a group whose discovery
// failed keeps its group/version; any other failure is an error.
func TestDiscoverCapabilities(t *testing.T) {
	groups := []*metav1.APIGroup{group("", "v1"), group("apps", "v1"), group("metrics.k8s.io", "v1beta1")}
	served := []*metav1.APIResourceList{resources("v1", "ConfigMap", "Service"), resources("apps/v1", "Deployment", "Deployment")}
	partial := &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("503")}}
	for _, tc := range []struct {
		name    string
		d       *stubDiscovery
		want    *render.Capabilities
		wantErr string
	}{
		{"served", &stubDiscovery{version: "v1.37.2", groups: groups, resources: served}, &render.Capabilities{KubeVersion: "v1.37.2",
			APIVersions: []string{"apps/v1", "apps/v1/Deployment", "metrics.k8s.io/v1beta1", "v1", "v1/ConfigMap", "v1/Service"}}, ""},
		{"an APIService that does not answer", &stubDiscovery{version: "v1.37.2", groups: groups, resources: served, resourcesErr: partial},
			&render.Capabilities{KubeVersion: "v1.37.2",
				APIVersions: []string{"apps/v1", "apps/v1/Deployment", "metrics.k8s.io/v1beta1", "v1", "v1/ConfigMap", "v1/Service"}}, ""},
		{"version unreadable", &stubDiscovery{versionErr: errors.New("connection refused")}, nil,
			"failed to read the cluster's Kubernetes version: connection refused"},
		{"discovery failed", &stubDiscovery{version: "v1.37.2", resourcesErr: errors.New("the server is currently unable to handle the request")}, nil,
			"failed to discover the cluster's API versions: the server is currently unable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := discoverCapabilities(context.Background(), tc.d)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// capabilitiesFixture is a sync of a revision with a chart instance and a CUE
// instance, against a cluster that discovery answers with d.
func capabilitiesFixture(t *testing.T, d *stubDiscovery) *RevisionState {
	t.Helper()
	doc := func(name, module string) string {
		return "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata: {name: " + name + ", namespace: team-a}\nspec:\n  module: " + module + "\n"
	}
	fsys := fstest.MapFS{
		"platform.yaml": {Data: []byte("apiVersion: cairn.dev/v1alpha1\nkind: Platform\nmetadata: {name: cluster}\nspec:\n  moduleRegistry: modules\n  namespaces: {allow: [\"team-*\"]}\n---\napiVersion: cairn.dev/v1alpha1\nkind: Registry\nmetadata: {name: modules}\nspec: {hostname: modules.example.com}\n")},
		"web.yaml":      {Data: []byte(doc("web", "{chart: {url: oci://modules.example.com/charts/web, version: 1.0.0}}"))},
		"db.yaml":       {Data: []byte(doc("db", "{cue: {path: example.com/m@v0, version: v0.1.0}}"))},
	}
	set, err := declarations.Load(fsys, declarations.Options{})
	if err != nil || len(set.Instances) != 2 {
		t.Fatalf("failed to load the fixture: %v %v", err, set.Invalid)
	}
	rev := Revision{SHA: "new", Changed: []string{}}
	return &RevisionState{
		revisionInput: revisionInput{e: &Engine{cluster: &Cluster{discovery: d}}, set: set, rev: rev, changes: newChanges(rev, "."), now: time.Now()},
		clusterView:   clusterView{live: map[string]*cairnv1.ModuleInstance{}},
		byKey:         map[string]*instanceState{}}
}

// TestChartInstancesRenderAgainWhenCapabilitiesChange: a ready chart instance whose
// chart rendered against other capabilities than the cluster's now is affected, once
// (its status then records the new digest); a CUE instance never is; a failed chart
// instance keeps its retry schedule; when discovery fails, nothing is affected by it.
// Discovery runs once per sync, and only for a revision with a chart instance.
func TestChartInstancesRenderAgainWhenCapabilitiesChange(t *testing.T) {
	served := func() *stubDiscovery {
		return &stubDiscovery{version: "v1.37.2", groups: []*metav1.APIGroup{group("", "v1")}, resources: []*metav1.APIResourceList{resources("v1", "ConfigMap")}}
	}
	current := digestJSON(&render.Capabilities{KubeVersion: "v1.37.2", APIVersions: []string{"v1", "v1/ConfigMap"}})
	for _, tc := range []struct {
		name     string
		instance string
		d        *stubDiscovery
		recorded string
		failed   bool
		affected bool
		why      string
	}{
		{name: "same capabilities", instance: "web", d: served(), recorded: current, why: "unchanged"},
		{name: "an API newly served", instance: "web", d: served(), recorded: "sha256:before", affected: true,
			why: "the cluster's capabilities changed (its Kubernetes version or the API versions it serves): the chart renders again"},
		{name: "synced before cairn recorded capabilities", instance: "web", d: served(), recorded: "", affected: true, why: "the cluster's capabilities changed"},
		{name: "a CUE instance", instance: "db", d: served(), recorded: "sha256:before", why: "unchanged"},
		{name: "a failed chart instance keeps its retry", instance: "web", d: served(), recorded: "sha256:before", failed: true, why: "not retried before"},
		{name: "discovery failed", instance: "web", d: &stubDiscovery{versionErr: errors.New("down")}, recorded: "sha256:before", why: "unchanged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := capabilitiesFixture(t, tc.d)
			mi := s.set.Instance("team-a", tc.instance)
			live := mi.DeepCopy()
			live.Generation = 1
			live.Annotations = map[string]string{specDigestAnnotation: s.specDigest(mi)}
			live.Status.LastAttemptedInput = inputDigest(s.specDigest(mi), "", "")
			live.Status.CapabilitiesDigest = tc.recorded
			status.Succeeded(live, "old", cairnv1.ReasonSucceeded, "ok")
			if tc.failed {
				status.Failed(live, "new", outcome.NewTransient(cairnv1.ReasonApplyFailed, errors.New("boom")), s.now.Add(time.Hour))
			}
			s.live[mi.Namespace+"/"+mi.Name] = live
			s.discoverForCharts(context.Background())
			s.discoverForCharts(context.Background())
			calls := 2 // one version and one group/resource read per sync
			if tc.d.versionErr != nil {
				calls = 1
			}
			g.Expect(tc.d.calls).To(Equal(calls))
			r := s.newInstanceRun(mi)
			g.Expect(r.affected).To(Equal(tc.affected))
			g.Expect(r.why).To(HavePrefix(tc.why))
			if tc.d.versionErr == nil {
				g.Expect(s.capabilitiesDigest(context.Background(), r.mi)).To(Equal(map[bool]string{true: current, false: ""}[tc.instance == "web"]))
			}
		})
	}
}

// TestNoDiscoveryWithoutCharts: a revision without chart instances reads nothing of
// discovery.
func TestNoDiscoveryWithoutCharts(t *testing.T) {
	g := NewWithT(t)
	d := &stubDiscovery{version: "v1.37.2"}
	s := capabilitiesFixture(t, d)
	s.set.Instances = []*cairnv1.ModuleInstance{s.set.Instance("team-a", "db")}
	s.discoverForCharts(context.Background())
	g.Expect(d.calls).To(BeZero())
	g.Expect(s.caps).To(BeNil())
}
