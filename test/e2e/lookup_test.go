package e2e

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/sign"
)

// keptPasswordChart packages render/testdata/charts/kept, which generates its
// database password once and keeps it with `lookup`.
func keptPasswordChart(t *testing.T) []byte {
	t.Helper()
	ch, err := loader.LoadDir(filepath.Join("..", "..", "render", "testdata", "charts", "kept"))
	if err != nil {
		t.Fatal(err)
	}
	return packaged(t, ch)
}

func packaged(t *testing.T, ch *chart.Chart) []byte {
	t.Helper()
	data, err := sign.PackageChart(ch)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// spyChart reads a Secret of cairn's namespace into a ConfigMap.
func spyChart(t *testing.T) []byte {
	t.Helper()
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "spy", Version: "0.1.0"}}
	ch.Templates = []*chart.File{{Name: "templates/configmap.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-loot
data:
  loot: {{ lookup "v1" "Secret" "` + reconciler.DefaultNamespace + `" "cairn-digest-key" | toJson | quote }}
`)}}
	return packaged(t, ch)
}

// TestLookupKeepsAGeneratedPassword: a chart's `lookup` reads the live cluster as the
// instance's identity, so a password it generates once and keeps with lookup survives
// three values changes (the instance's other objects change each time). A chart that
// looks into cairn's namespace fails, naming the refusal, and renders nothing, while
// the other instance syncs.
func TestLookupKeepsAGeneratedPassword(t *testing.T) {
	e := newEnv(t)
	reg := startRegistry(t, false, false)
	rc := registryClient(t, reg, false)
	pushChart(t, e.ctx, rc, "charts/kept", keptPasswordChart(t), nil)
	pushChart(t, e.ctx, rc, "charts/spy", spyChart(t), nil)
	url := "oci://" + reg.Host + "/charts/"
	web := func(greeting string) string {
		return chartInstanceYAML("web", e.ns, url+"kept", "0.1.0", "  values:\n    greeting: "+greeting+"\n")
	}
	repo := newGitRepo(t, map[string]string{
		"platform.yaml":      platformWithVerify("", ""),
		"registries.yaml":    registryYAML("charts", reg.Host, true, ""),
		"instances/web.yaml": web("hello"),
		"instances/spy.yaml": chartInstanceYAML("spy", e.ns, url+"spy", "0.1.0", ""),
	})
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
	password := func() string {
		s := e.get("v1", "Secret", e.ns, "web-db")
		e.g.Expect(s).NotTo(BeNil())
		return s.Object["data"].(map[string]any)["password"].(string)
	}
	first := password()
	e.g.Expect(first).NotTo(BeEmpty())
	spy := result(res, e.ns, "spy")
	e.g.Expect(spy.Action).To(BeEquivalentTo("Failed"), "%+v", spy)
	e.g.Expect(spy.Message).To(ContainSubstring("lookup v1 Secret in " + reconciler.DefaultNamespace + " cairn-digest-key"))
	e.g.Expect(spy.Message).To(ContainSubstring("cairn's namespace " + reconciler.DefaultNamespace + " is never read"))
	e.g.Expect(e.configMap(e.ns, "spy-loot")).To(BeNil())

	for _, greeting := range []string{"bonjour", "hallo", "hello"} {
		repo.commit("greeting "+greeting, map[string]string{"instances/web.yaml": web(greeting)})
		res = e.sync(repo)
		e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
		e.g.Expect(e.configMap(e.ns, "web-greeting").Data).To(HaveKeyWithValue("greeting", greeting))
		e.g.Expect(password()).To(Equal(first), "kept across the values change to %s", greeting)
	}
	e.logEverything()
}

// listerChart lists every Secret of the cluster with `lookup` into a ConfigMap.
func listerChart(t *testing.T) []byte {
	t.Helper()
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "lister", Version: "0.1.0"}}
	ch.Templates = []*chart.File{{Name: "templates/configmap.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-seen
data:
  {{- $seen := "" }}
  {{- range (lookup "v1" "Secret" "" "").items }}
  {{- $seen = printf "%s %s/%s" $seen .metadata.namespace .metadata.name }}
  {{- end }}
  seen: {{ $seen | quote }}
`)}}
	return packaged(t, ch)
}

// TestLookupAcrossNamespacesSkipsCairns: an instance whose ServiceAccount may list
// Secrets cluster-wide lists them all with `lookup`: it sees those of other
// namespaces, never one of cairn's namespace.
func TestLookupAcrossNamespacesSkipsCairns(t *testing.T) {
	e := newEnv(t)
	e.grantNamespace(e.ns, "*")
	lister := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-secret-lister"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-secret-lister"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: lister.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "deployer", Namespace: e.ns}}}
	hidden := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: reconciler.DefaultNamespace, Name: e.ns + "-hidden"}}
	visible := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "visible"}}
	for _, o := range []client.Object{lister, binding, hidden, visible} {
		e.g.Expect(e.c.Create(e.ctx, o)).To(Succeed())
		t.Cleanup(func() { _ = e.c.Delete(context.Background(), o) })
	}
	reg := startRegistry(t, false, false)
	pushChart(t, e.ctx, registryClient(t, reg, false), "charts/lister", listerChart(t), nil)
	repo := newGitRepo(t, map[string]string{
		"platform.yaml":   platformWithVerify("", ""),
		"registries.yaml": registryYAML("charts", reg.Host, true, ""),
		"instances/lister.yaml": chartInstanceYAML("lister", e.ns, "oci://"+reg.Host+"/charts/lister", "0.1.0",
			"  serviceAccountName: deployer\n"),
	})
	res := e.sync(repo)

	e.g.Expect(result(res, e.ns, "lister").Ready).To(BeTrue(), "%+v", res)
	seen := e.configMap(e.ns, "lister-seen").Data["seen"]
	e.g.Expect(seen).To(ContainSubstring(" "+e.ns+"/visible"), "the list is cluster-wide")
	e.g.Expect(seen).NotTo(ContainSubstring(" "+reconciler.DefaultNamespace+"/"), "nothing of cairn's namespace")
}
