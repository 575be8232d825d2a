package render

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestChartHooks renders testdata/helm/charts/hooks and checks each hook as
// Helm's releaseutil parses it and in the order Helm's execHook runs them:
// events of helm.sh/hook (trimmed, lower-cased; an unknown one skips the
// hook; test, test-success and rollbacks never run), helm.sh/hook-weight (an
// integer, else 0), helm.sh/hook-delete-policy as written (lower-cased), the
// template as source; ordered by weight, then name, then Helm's kind order.
func TestChartHooks(t *testing.T) {
	g := NewWithT(t)
	archive := chartArchive(t, "hooks", dirFiles(t, filepath.Join(helmCharts, "hooks")))
	res, err := RenderChart(context.Background(), chartRequest(archive, ""))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objectIDs(res)).To(Equal([]string{"ConfigMap/team-a/web-main"}))

	type row struct {
		hook     string
		events   []string
		weight   int
		policies []string
		source   string
	}
	var got []row
	for _, h := range res.Hooks {
		got = append(got, row{h.String(), h.Events, h.Weight, h.DeletePolicies, h.Source})
	}
	install, remove := "hooks/templates/install.yaml", "hooks/templates/delete.yaml"
	g.Expect(got).To(Equal([]row{
		{"ServiceAccount/team-a/web-setup", []string{HookPreInstall}, -5, nil, install},
		{"Secret/team-a/web-setup", []string{HookPreInstall}, -5, nil, install},
		{"ConfigMap/team-a/web-a-after", []string{HookPostInstall}, 0, nil, install},
		{"ConfigMap/elsewhere/web-after-delete", []string{HookPostDelete}, 0, nil, remove},
		{"ConfigMap/team-a/web-b-after", []string{HookPostInstall, HookPostUpgrade}, 0, []string{HookFailed}, install},
		{"ConfigMap/team-a/web-before-delete", []string{HookPreDelete}, 3, nil, remove},
		{"Job/team-a/web-setup", []string{HookPreInstall, HookPreUpgrade}, 5, []string{HookSucceeded, HookBeforeCreation}, install},
	}))

	var pre []string
	for _, h := range HooksFor(res.Hooks, HookPreInstall) {
		pre = append(pre, h.String())
	}
	g.Expect(pre).To(Equal([]string{"ServiceAccount/team-a/web-setup", "Secret/team-a/web-setup", "Job/team-a/web-setup"}))
}

// TestHookDeletes: a hook without delete policies has before-hook-creation
// (Helm's default); one with policies has exactly those.
func TestHookDeletes(t *testing.T) {
	for _, tc := range []struct {
		policies               []string
		before, success, fails bool
	}{
		{nil, true, false, false},
		{[]string{HookSucceeded}, false, true, false},
		{[]string{HookFailed, HookBeforeCreation}, true, false, true},
	} {
		g := NewWithT(t)
		h := Hook{DeletePolicies: tc.policies}
		g.Expect(h.Deletes(HookBeforeCreation)).To(Equal(tc.before), "%v", tc.policies)
		g.Expect(h.Deletes(HookSucceeded)).To(Equal(tc.success), "%v", tc.policies)
		g.Expect(h.Deletes(HookFailed)).To(Equal(tc.fails), "%v", tc.policies)
	}
}

// TestChartHooksDigest: a change to a hook alone (its object, weight or delete
// policy) changes the render's digest; the objects stay the same.
func TestChartHooksDigest(t *testing.T) {
	g := NewWithT(t)
	files := dirFiles(t, filepath.Join(helmCharts, "hooks"))
	base, err := RenderChart(context.Background(), chartRequest(chartArchive(t, "hooks", files), ""))
	g.Expect(err).NotTo(HaveOccurred())
	seen := map[string]bool{base.Digest: true}
	for _, change := range []struct{ old, new string }{
		{`helm.sh/hook-weight: "5"`, `helm.sh/hook-weight: "6"`},
		{`"hook-succeeded, Before-Hook-Creation"`, `"hook-succeeded"`},
		{"image: busybox", "image: alpine"},
	} {
		changed := withFiles(files, map[string]string{"templates/install.yaml": replaceOnce(t, files["templates/install.yaml"], change.old, change.new)})
		res, err := RenderChart(context.Background(), chartRequest(chartArchive(t, "hooks", changed), ""))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Objects).To(Equal(base.Objects))
		g.Expect(seen).NotTo(HaveKey(res.Digest), "%s -> %s", change.old, change.new)
		seen[res.Digest] = true
	}
}

// TestChartHooksInWorker: a render in a worker process returns the same hooks
// and digest as one in process.
func TestChartHooksInWorker(t *testing.T) {
	g := NewWithT(t)
	archive := chartArchive(t, "hooks", dirFiles(t, filepath.Join(helmCharts, "hooks")))
	want, err := RenderChart(context.Background(), chartRequest(archive, ""))
	g.Expect(err).NotTo(HaveOccurred())
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 1})
	defer r.Close()
	got, err := r.RenderChart(context.Background(), chartRequest(archive, ""))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Digest).To(Equal(want.Digest))
	g.Expect(got.Hooks).To(Equal(want.Hooks))
}

// replaceOnce replaces old, which s must hold exactly once.
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if strings.Count(s, old) != 1 {
		t.Fatalf("%q is not in the template exactly once", old)
	}
	return strings.Replace(s, old, new, 1)
}

// FuzzChartHooks: any template output gives hooks or an InvalidObject or
// LimitExceeded error, never a panic; the hooks have an event cairn runs each, and
// are ordered by weight.
func FuzzChartHooks(f *testing.F) {
	for _, seed := range []string{
		"kind: Job\nmetadata:\n  name: j\n  annotations:\n    helm.sh/hook: pre-install\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    helm.sh/hook: ' post-Install,pre-delete'\n    helm.sh/hook-weight: '-3'\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  annotations: {helm.sh/hook: pre-install, helm.sh/hook-weight: x}\n",
		"apiVersion: v1\nkind: List\nitems: []\nmetadata:\n  name: l\n  annotations: {helm.sh/hook: test}\n",
		"- a\n- b\n", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, manifest string) {
		col := &collector{limits: DefaultLimits()}
		hooks, err := chartHooks(map[string]string{"c/templates/x.yaml": manifest}, col)
		if err != nil {
			if r := Reason(err); r != ReasonInvalidObject && r != ReasonLimitExceeded {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		for i, h := range hooks {
			if len(runnable(h.hook.Events)) == 0 {
				t.Fatalf("hook %s runs on no event cairn runs", h.hook.Name)
			}
			if i > 0 && hooks[i-1].hook.Weight > h.hook.Weight {
				t.Fatalf("hooks out of weight order: %d before %d", hooks[i-1].hook.Weight, h.hook.Weight)
			}
		}
	})
}
