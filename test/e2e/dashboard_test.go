package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/dashboard"
	"cairn.dev/cairn/manifests/controller"
)

// TestDashboard drives headless Chromium against the dashboard of `cairn
// controller`, run with the installed ServiceAccount's token (so the dashboard's
// ClusterRole is what lets it review tokens and access and impersonate users):
// an operator of one namespace logs in with a ServiceAccount token and sees its
// instances, not another namespace's; a commit shows up on the open page without a
// reload; an annotation holding a script is shown as text and never runs; the
// operator's suspend (and its hold and release) is made as the operator and recorded
// as an Event naming them;
// a viewer gets no buttons and its forged request is refused; a user of another
// namespace sees only that one. Screenshots of each page go to the test results.
func TestDashboard(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	other := e.ns + "-b"
	e.grantNamespace(e.ns, "*")
	e.grantNamespace(other, "*")
	sa := "  serviceAccountName: deployer\n"
	web := inst{name: "web", ns: e.ns, configs: configs("a"), extra: sa}
	api := inst{name: "api", ns: e.ns, configs: configs("a"), extra: sa, dependsOn: []string{"web"}}
	hidden := inst{name: "hidden", ns: other, configs: configs("a"), extra: sa}
	files := appRepo("", web, api, hidden)
	const note = `<script>window.cairnOwned = 1</script><b>bold</b>`
	files["instances/web.yaml"] = strings.Replace(web.yaml(), "metadata:\n",
		fmt.Sprintf("metadata:\n  annotations:\n    note: %q\n", note), 1)
	repo := newGitRepo(t, files)
	e.installController(bin, repo)
	kubeconfig, _ := e.controllerIdentity()
	addr := freeLoopbackAddr(t)
	ctrl := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-0"},
		append(e.controllerArgsAs(t, repo, kubeconfig, freeLoopbackAddr(t), "0"), "--dashboard-bind-address", addr)...)
	base := "http://" + addr
	ready := func(ns, name string) func() bool {
		return func() bool { mi := e.instance(ns, name); return mi != nil && stateOf(mi).ready }
	}
	for _, i := range []inst{web, api, hidden} {
		e.g.Eventually(ready(i.ns, i.name), 2*time.Minute, 200*time.Millisecond).Should(BeTrue(), ctrl.String)
	}
	operator := e.userToken("operator", e.ns, controller.DashboardOperateRole, "view") // Kubernetes' own view: the objects' health
	viewer := e.userToken("viewer", e.ns, controller.DashboardViewRole)
	outsider := e.userToken("outsider", other, controller.DashboardViewRole)

	// The operator: the fleet of its namespace.
	b := newBrowser(t)
	run(t, b, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	screenshot(t, b, "dashboard-login")
	login(t, b, base, operator)
	fleet := text(t, b, "table.fleet")
	e.g.Expect(fleet).To(ContainSubstring(e.ns + "/web"))
	e.g.Expect(fleet).To(ContainSubstring(e.ns + "/api"))
	e.g.Expect(fleet).NotTo(ContainSubstring("hidden"), "another namespace's instance")
	screenshot(t, b, "dashboard-fleet")

	// A commit shows up on the open page, with no reload.
	eval[string](t, b, `window.cairnMark = "still this page"`)
	api.configs = configs("a", "b")
	began := time.Now()
	sha := repo.commit("api: a and b", map[string]string{"instances/api.yaml": api.yaml()})
	cell := fmt.Sprintf(`document.querySelector('tr[data-instance="%s/api"] td:nth-child(4)').textContent`, e.ns)
	e.g.Eventually(func() string {
		got, _ := chromedp.Run(b, chromedp.Evaluate[string](cell))
		return strings.TrimSpace(got)
	}, time.Minute, 50*time.Millisecond).Should(Equal(sha[:12]), ctrl.String)
	shown := time.Since(began)
	e.g.Expect(eval[string](t, b, `window.cairnMark`)).To(Equal("still this page"), "updated in place, not reloaded")
	mi := e.instance(e.ns, "api")
	applied := mi.Status.History[0].Time.Time
	t.Logf("a commit on the open fleet page %s after the push (the controller polls every 1s); shown %s after its apply was recorded",
		shown.Round(time.Millisecond), time.Since(applied).Round(time.Millisecond))

	// The instance page: the annotation is text, and never runs.
	run(t, b, chromedp.Navigate(base+"/instances/"+e.ns+"/web"), chromedp.WaitVisible(chromedp.CSS("table.history")))
	e.g.Expect(text(t, b, "table.annotations")).To(ContainSubstring(note), "shown as text")
	e.g.Expect(eval[string](t, b, `typeof window.cairnOwned`)).To(Equal("undefined"), "the script never ran")
	objects := text(t, b, "details.inventory")
	e.g.Expect(objects).To(ContainSubstring("web Current"), "the Deployment's health, read as the operator")
	e.g.Expect(objects).To(ContainSubstring("web-a Current"))
	e.g.Expect(eval[int](t, b, fmt.Sprintf(`document.querySelectorAll('svg.graph a[href="/instances/%s/api"]').length`, e.ns))).
		To(Equal(1), "its graph: api comes after it")
	e.g.Expect(text(t, b, "table.events")).NotTo(ContainSubstring("No event."), "the instance's Events, read as the operator")
	run(t, b, chromedp.Click(chromedp.CSS(`a.name[href$="_web-a__ConfigMap"]`)), chromedp.WaitVisible(chromedp.CSS("pre.object")))
	e.g.Expect(text(t, b, "pre.object")).To(ContainSubstring("value: v-a"), "the object, read as the operator")
	run(t, b, chromedp.Navigate(base+"/instances/"+e.ns+"/web"), chromedp.WaitVisible(chromedp.CSS("table.history")))
	screenshot(t, b, "dashboard-instance")

	// The operator suspends web: made as the operator, recorded naming them.
	run(t, b, chromedp.Click(chromedp.CSS(`button[value="suspend"]`)), chromedp.WaitVisible(chromedp.CSS(".notice")))
	e.g.Eventually(func() string { return e.instance(e.ns, "web").Annotations[cairnv1.SuspendAnnotation] }, 10*time.Second).Should(Equal("true"))
	user := "system:serviceaccount:" + e.ns + ":operator"
	e.g.Expect(e.eventsOf(e.ns, "web")).To(ContainElement(And(HaveField("Reason", dashboard.EventReason),
		HaveField("Message", user+" asked a suspension from the dashboard"))))
	e.g.Expect(suspendWriter(e.instance(e.ns, "web"))).To(Equal("cairn-suspend"), "written with the request's own field manager")
	e.g.Eventually(func() bool { return stateOf(e.instance(e.ns, "web")).suspended }, 30*time.Second, 200*time.Millisecond).Should(BeTrue(), ctrl.String)
	run(t, b, chromedp.WaitVisible(chromedp.CSS(`button[value="resume"]`)), chromedp.Click(chromedp.CSS(`button[value="resume"]`)),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	e.g.Eventually(func() bool { _, ok := e.instance(e.ns, "web").Annotations[cairnv1.SuspendAnnotation]; return ok }, 10*time.Second).Should(BeFalse())

	// Hold and release: recorded by the controller, in the operator's name.
	run(t, b, chromedp.WaitVisible(chromedp.CSS(`button[value="hold"]`)), chromedp.Click(chromedp.CSS(`button[value="hold"]`)),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	e.g.Eventually(func() string {
		if h := e.instance(e.ns, "web").Status.Held; h != nil {
			return h.By
		}
		return ""
	}, 30*time.Second, 200*time.Millisecond).Should(Equal(user), ctrl.String)
	run(t, b, chromedp.WaitVisible(chromedp.CSS(`button[value="release"]`)), chromedp.Click(chromedp.CSS(`button[value="release"]`)),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	e.g.Eventually(func() bool { return e.instance(e.ns, "web").Status.Held == nil }, 30*time.Second, 200*time.Millisecond).Should(BeTrue(), ctrl.String)

	// A viewer: no buttons, and a request forged with its own CSRF token is refused.
	v := newBrowser(t)
	login(t, v, base, viewer)
	run(t, v, chromedp.Navigate(base+"/instances/"+e.ns+"/web"), chromedp.WaitVisible(chromedp.CSS("table.history")))
	e.g.Expect(eval[int](t, v, `document.querySelectorAll('section.actions button').length`)).To(BeZero())
	e.g.Expect(text(t, v, "details.inventory")).To(ContainSubstring("you may not read it"), "the viewer may not read the objects themselves")
	code := eval[int](t, v, fmt.Sprintf(`fetch("/instances/%s/web/suspend", {method: "POST", credentials: "same-origin",
		body: new URLSearchParams({csrf: document.querySelector('input[name="csrf"]').value})}).then(r => r.status)`, e.ns))
	e.g.Expect(code).To(Equal(403))
	e.g.Consistently(func() bool { _, ok := e.instance(e.ns, "web").Annotations[cairnv1.SuspendAnnotation]; return ok }, time.Second).Should(BeFalse())

	// A user of the other namespace sees only that one.
	o := newBrowser(t)
	login(t, o, base, outsider)
	fleet = text(t, o, "table.fleet")
	e.g.Expect(fleet).To(ContainSubstring(other + "/hidden"))
	e.g.Expect(fleet).NotTo(ContainSubstring(e.ns + "/web"))
	run(t, o, chromedp.Navigate(base+"/instances/"+e.ns+"/web"))
	e.g.Expect(text(t, o, "main")).To(ContainSubstring("no ModuleInstance " + e.ns + "/web that you may see"))

	// A viewer of every namespace: all the instances, and the Platform with its syncs.
	e.g.Eventually(ready(e.ns, "web"), 30*time.Second, 200*time.Millisecond).Should(BeTrue(),
		"resumed under a sharded controller: reconciled again, not left suspended")
	a := newBrowser(t)
	login(t, a, base, e.clusterViewerToken("fleet-viewer"))
	fleet = text(t, a, "table.fleet")
	e.g.Expect(fleet).To(ContainSubstring(e.ns + "/web"))
	e.g.Expect(fleet).To(ContainSubstring(other + "/hidden"))
	e.g.Expect(text(t, a, "section.platform")).To(ContainSubstring(sha[:12]), "the Platform's revision")
	e.g.Expect(text(t, a, "table.syncs")).To(ContainSubstring("Succeeded"), "its last syncs")
	screenshot(t, a, "dashboard-fleet-all")
	e.g.Expect(ctrl.String()).NotTo(ContainSubstring(operator), "no token in the controller's log")
}

// clusterViewerToken is a token of ServiceAccount name in the test's namespace,
// bound cluster-wide to cairn-dashboard-view.
func (e *env) clusterViewerToken(name string) string {
	e.t.Helper()
	token := e.userToken(name, e.ns)
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: controller.DashboardViewRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: e.ns}}}
	e.g.Expect(e.c.Create(e.ctx, binding)).To(Succeed())
	e.t.Cleanup(func() { _ = e.c.Delete(context.Background(), binding) })
	return token
}

type miState struct{ ready, suspended bool }

func stateOf(mi *cairnv1.ModuleInstance) miState {
	var s miState
	for _, c := range mi.Status.Conditions {
		if c.Type == "Ready" {
			s.ready = c.Status == "True"
			s.suspended = c.Reason == cairnv1.ReasonSuspended
		}
	}
	return s
}

func suspendWriter(mi *cairnv1.ModuleInstance) string {
	for _, f := range mi.ManagedFields {
		if f.FieldsV1 != nil && strings.Contains(string(f.FieldsV1.Raw), cairnv1.SuspendAnnotation) {
			return f.Manager
		}
	}
	return ""
}

func (e *env) eventsOf(ns, name string) []corev1.Event {
	var list corev1.EventList
	e.g.Expect(e.c.List(e.ctx, &list, client.InNamespace(ns))).To(Succeed())
	var out []corev1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

// TestDashboardPullRequests: `cairn sync` against a real Gitea keeps each pull
// request's plan in the cluster; `cairn dashboard` (the local one, as the
// kubeconfig's user, logged in through the key of the URL it prints) shows it
// waiting, with its rendered diff; once merged, the open page shows, by itself,
// the instance applied as planned.
func TestDashboardPullRequests(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	e.ensureCairnNamespace()
	e.freeSyncLease()
	web := inst{name: "web", ns: e.ns, configs: configs("a")}
	f, _ := newForgeEnv(t, e, appRepo("", web))
	dir := t.TempDir()
	tokenFile, secretFile := filepath.Join(dir, "token"), filepath.Join(dir, "webhook-secret")
	e.g.Expect(os.WriteFile(tokenFile, []byte(f.gitea.Token+"\n"), 0o600)).To(Succeed())
	e.g.Expect(os.WriteFile(secretFile, []byte(f.secret+"\n"), 0o600)).To(Succeed())
	hooks := freeLoopbackAddr(t)
	e.g.Expect(f.gitea.AddWebhook(e.ctx, f.repo, "http://"+hooks+"/hooks/gitea", f.secret, "push", "pull_request")).To(Succeed())
	sync := startCairnProcess(t, bin, "sync", "--repo", f.gitURL(), "--interval", "2s", "--drift-interval", "0",
		"--forge", "gitea", "--forge-url", f.gitea.URL, "--forge-token-file", tokenFile, "--listen", hooks, "--webhook-secret-file", secretFile,
		"--kubeconfig", e.cluster.Kubeconfig, "--cache-dir", filepath.Join(dir, "cache"))
	sync.waitListening(t, "http://"+hooks+"/hooks/gitea")
	e.g.Eventually(func() bool { mi := e.instance(e.ns, "web"); return mi != nil && stateOf(mi).ready }, time.Minute, 200*time.Millisecond).Should(BeTrue(), sync.String)

	dash := startCairnProcess(t, bin, "dashboard", "--address", freeLoopbackAddr(t), "--kubeconfig", e.cluster.Kubeconfig)
	var url string
	e.g.Eventually(func() string {
		url = regexp.MustCompile(`http://\S+/login\?key=\S+`).FindString(dash.String())
		return url
	},
		30*time.Second, 100*time.Millisecond).ShouldNot(BeEmpty(), dash.String)
	base := strings.SplitN(url, "/login", 2)[0]

	web.configs = configs("a", "b")
	head := f.putFile("web-b", "main", "instances/web.yaml", web.yaml())
	number, err := f.gitea.CreatePullRequest(e.ctx, f.repo, "web-b", "main", "web: a and b")
	e.g.Expect(err).NotTo(HaveOccurred())
	f.waitPlanComment(number, head)

	b := newBrowser(t)
	run(t, b, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("table.fleet")))
	row := fmt.Sprintf(`tr[data-pull="%d"]`, number)
	run(t, b, chromedp.Navigate(base+"/pulls"), chromedp.WaitVisible(chromedp.CSS(row)))
	e.g.Expect(text(t, b, row)).To(ContainSubstring("0 create, 1 update, 0 delete"))
	e.g.Expect(text(t, b, row)).To(ContainSubstring("1 to create, 0 to configure, 0 to prune"))
	screenshot(t, b, "dashboard-pulls")
	run(t, b, chromedp.Navigate(fmt.Sprintf("%s/pulls/%d", base, number)), chromedp.WaitVisible(chromedp.CSS("pre.diff")))
	e.g.Expect(text(t, b, "pre.diff")).To(ContainSubstring("web-b"), "the rendered diff")
	screenshot(t, b, "dashboard-pull")

	// Merged: the open page says so by itself, with no reload.
	run(t, b, chromedp.Navigate(base+"/pulls"), chromedp.WaitVisible(chromedp.CSS(row)))
	eval[string](t, b, `window.cairnMark = "still this page"`)
	e.g.Expect(f.gitea.MergePullRequest(e.ctx, f.repo, number)).To(Succeed())
	e.g.Eventually(func() string {
		got, _ := chromedp.Run(b, chromedp.Text(chromedp.CSS(row)))
		return got
	}, time.Minute, 100*time.Millisecond).Should(ContainSubstring("merged · 1 as planned"), sync.String)
	e.g.Expect(eval[string](t, b, `window.cairnMark`)).To(Equal("still this page"), "updated in place, not reloaded")
}
