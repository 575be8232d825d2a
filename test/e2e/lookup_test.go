package e2e

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

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
