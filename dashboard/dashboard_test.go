package dashboard

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/plans"
)

// tokens maps bearer tokens to users; users maps users to the namespaces they may
// read ("*": all) and patch.
type fakeAuth struct {
	tokens    map[string]string
	anonymous bool
}

func (f *fakeAuth) Authenticate(_ context.Context, token string) (*Identity, error) {
	u, ok := f.tokens[token]
	if !ok {
		return nil, ErrUnauthenticated
	}
	return &Identity{User: u, session: token}, nil
}

func (f *fakeAuth) Anonymous() *Identity {
	if !f.anonymous {
		return nil
	}
	return &Identity{User: "system:anonymous", Anonymous: true}
}

type fakeAuthz struct {
	read, patch map[string][]string // user -> namespaces ("*": all)
}

func (f *fakeAuthz) Allowed(_ context.Context, id *Identity, a Access) (bool, error) {
	if id.Anonymous {
		return readOnly(a.Verb), nil
	}
	m := f.read
	if a.Verb == "patch" {
		m = f.patch
	}
	for _, ns := range m[id.User] {
		if ns == "*" || a.Resource == "moduleinstances" && ns == a.Namespace && a.Namespace != "" {
			return true, nil
		}
	}
	return false, nil
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = cairnv1.AddToScheme(s)
	return s
}

func instance(ns, name, ready, message string) *cairnv1.ModuleInstance {
	mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Annotations: map[string]string{cairnv1.TenantAnnotation: "tenant-" + ns}}}
	mi.Spec.Module.Chart = &cairnv1.ChartSource{URL: "oci://registry.example.com/charts/podinfo", Version: "6.7.0"}
	mi.Status.LastAppliedRevision = "0123456789abcdef0123456789abcdef01234567"
	mi.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionStatus(ready), Reason: "Synced",
		Message: message, LastTransitionTime: metav1.Now()}}
	return mi
}

type fixture struct {
	srv *httptest.Server
	c   client.Client
	s   *Server
}

func newFixture(t *testing.T, anonymous bool, objs ...client.Object) *fixture {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(objs...).WithStatusSubresource(&cairnv1.ModuleInstance{}).Build()
	s, err := New(Options{Reader: c, Live: c, Namespace: "cairn-system", Log: logr.Discard(),
		Auth: &fakeAuth{tokens: map[string]string{"admin-token": "admin", "alice-token": "alice", "bob-token": "bob"}, anonymous: anonymous},
		Authz: &fakeAuthz{
			read:  map[string][]string{"admin": {"*"}, "alice": {"team-a"}, "bob": {"team-a"}},
			patch: map[string][]string{"admin": {"*"}, "alice": {"team-a"}},
		},
		Act:       Self{Client: c},
		CommitURL: func(sha string) string { return "https://git.example.com/ops/platform/commit/" + sha },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, c: c, s: s}
}

func (f *fixture) get(t *testing.T, path, token string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return resp, b.String()
}

func (f *fixture) post(t *testing.T, path, token string, form url.Values) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestFleetShowsWhatTheUserMaySee: the fleet lists the instances of the namespaces
// the user may read, with the counts of those only; no token is sent to log in;
// every page carries the security headers.
func TestFleetShowsWhatTheUserMaySee(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, false, instance("team-a", "web", "True", "ok"), instance("team-a", "api", "False", "render failed"),
		instance("team-b", "secret-project", "True", "ok"))

	resp, _ := f.get(t, "/", "")
	g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))
	g.Expect(resp.Header.Get("Location")).To(Equal("/login"))
	resp, _ = f.get(t, "/", "not-a-token")
	g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))

	resp, body := f.get(t, "/", "admin-token")
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring("team-b/secret-project"))
	g.Expect(resp.Header.Get("Content-Security-Policy")).To(ContainSubstring("script-src 'self'"))
	g.Expect(resp.Header.Get("X-Frame-Options")).To(Equal("DENY"))

	_, body = f.get(t, "/", "alice-token")
	g.Expect(body).To(ContainSubstring(`data-instance="team-a/web"`))
	g.Expect(body).To(ContainSubstring(`data-instance="team-a/api"`))
	g.Expect(body).NotTo(ContainSubstring("secret-project"))
	g.Expect(body).NotTo(ContainSubstring("team-b"))
	g.Expect(body).To(MatchRegexp(`(?s)2 <span>instances</span>.*1 <span>ready</span>.*1 <span>failed</span>`))

	_, body = f.get(t, "/?state=failed", "alice-token")
	g.Expect(body).To(ContainSubstring(`data-instance="team-a/api"`))
	g.Expect(body).NotTo(ContainSubstring(`data-instance="team-a/web"`))

	resp, _ = f.get(t, "/instances/team-b/secret-project", "alice-token")
	g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound), "not told apart from an instance that does not exist")
}

// TestValuesAreEscaped: a message and an annotation holding markup are shown as text.
func TestValuesAreEscaped(t *testing.T) {
	g := NewWithT(t)
	mi := instance("team-a", "web", "False", `<script>alert("owned")</script>`)
	mi.Annotations[cairnv1.TenantAnnotation] = `<img src=x onerror=alert(1)>`
	f := newFixture(t, false, mi)
	for _, path := range []string{"/", "/instances/team-a/web"} {
		_, body := f.get(t, path, "alice-token")
		g.Expect(body).NotTo(ContainSubstring("<script>alert"), path)
		g.Expect(body).NotTo(ContainSubstring("<img src=x"), path)
		g.Expect(body).To(ContainSubstring("&lt;script&gt;alert("), path)
	}
}

// TestActionsAreAuthorisedPerRequest: a request needs the page's CSRF token and
// patch on moduleinstances in the namespace; one allowed writes the annotation and
// an Event naming the user; anonymous readers make none.
func TestActionsAreAuthorisedPerRequest(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, true, instance("team-a", "web", "True", "ok"))
	_, page := f.get(t, "/instances/team-a/web", "alice-token")
	m := csrfField.FindStringSubmatch(page)
	g.Expect(m).NotTo(BeNil(), "alice may act: the page has the forms")
	aliceCSRF := m[1]
	_, bobPage := f.get(t, "/instances/team-a/web", "bob-token")
	g.Expect(bobPage).NotTo(ContainSubstring(`/team-a/web/suspend"`), "bob may only read: no forms")
	bobCSRF := f.s.csrfToken(&Identity{session: "bob-token"})

	g.Expect(f.post(t, "/instances/team-a/web/suspend", "alice-token", url.Values{}).StatusCode).To(Equal(http.StatusForbidden), "no CSRF token")
	g.Expect(f.post(t, "/instances/team-a/web/suspend", "alice-token", url.Values{"csrf": {bobCSRF}}).StatusCode).To(Equal(http.StatusForbidden), "another session's token")
	g.Expect(f.post(t, "/instances/team-a/web/suspend", "bob-token", url.Values{"csrf": {bobCSRF}}).StatusCode).To(Equal(http.StatusForbidden), "no patch")
	mi := &cairnv1.ModuleInstance{}
	g.Expect(f.c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "web"}, mi)).To(Succeed())
	g.Expect(mi.Annotations).NotTo(HaveKey(cairnv1.SuspendAnnotation))

	resp := f.post(t, "/instances/team-a/web/suspend", "alice-token", url.Values{"csrf": {aliceCSRF}})
	g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))
	g.Expect(f.c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "web"}, mi)).To(Succeed())
	g.Expect(mi.Annotations).To(HaveKeyWithValue(cairnv1.SuspendAnnotation, "true"))
	var events corev1.EventList
	g.Expect(f.c.List(context.Background(), &events, client.InNamespace("team-a"))).To(Succeed())
	g.Expect(events.Items).To(ContainElement(And(HaveField("Reason", EventReason),
		HaveField("Message", "alice asked a suspension from the dashboard"))))

	resp = f.post(t, "/instances/team-a/web/hold", "alice-token", url.Values{"csrf": {aliceCSRF}})
	g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))
	g.Expect(f.c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "web"}, mi)).To(Succeed())
	g.Expect(mi.Annotations[cairnv1.HoldAnnotation]).To(ContainSubstring(`"by":"alice"`))

	_, anon := f.get(t, "/instances/team-a/web", "")
	g.Expect(anon).NotTo(ContainSubstring(`name="csrf"`), "anonymous readers get no forms")
}

// TestEventsStreamOnlyWhatTheUserMaySee: a change in a namespace the user may read
// reaches its stream; one elsewhere does not.
func TestEventsStreamOnlyWhatTheUserMaySee(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/events", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("text/event-stream"))
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	g.Eventually(lines).Should(Receive(Equal("retry: 1000")))
	f.s.Hub().Changed("team-b")
	g.Consistently(lines, 500*time.Millisecond).ShouldNot(Receive(Equal("event: change")))
	f.s.Hub().Changed("team-a")
	g.Eventually(lines, 2*time.Second).Should(Receive(Equal("event: change")))
}

// TestTokenReviewerRefusesAnEmptyUser: an authenticated token whose user name is
// empty is refused, and so is one the cluster does not authenticate.
func TestTokenReviewerRefusesAnEmptyUser(t *testing.T) {
	g := NewWithT(t)
	answers := map[string]struct {
		ok   bool
		user string
	}{"good": {true, "alice"}, "empty": {true, " "}, "bad": {false, "mallory"}}
	c := fake.NewClientBuilder().WithScheme(scheme()).WithInterceptorFuncs(reviewFuncs(answers)).Build()
	tr := &TokenReviewer{Client: c}
	id, err := tr.Authenticate(context.Background(), "good")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.User).To(Equal("alice"))
	_, err = tr.Authenticate(context.Background(), "empty")
	g.Expect(errors.Is(err, ErrUnauthenticated)).To(BeTrue())
	_, err = tr.Authenticate(context.Background(), "bad")
	g.Expect(errors.Is(err, ErrUnauthenticated)).To(BeTrue())
	g.Expect(tr.Anonymous()).To(BeNil())
}

func reviewFuncs(answers map[string]struct {
	ok   bool
	user string
}) interceptor.Funcs {
	return interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if r, ok := obj.(*authenticationv1.TokenReview); ok {
			a := answers[r.Spec.Token]
			r.Status.Authenticated, r.Status.User.Username = a.ok, a.user
			return nil
		}
		return c.Create(ctx, obj, opts...)
	}}
}

// TestGraphShowsOnlyVisibleDependents: an instance's page draws what it depends on
// and what depends on it, leaving out a dependent in a namespace the user may not
// see.
func TestGraphShowsOnlyVisibleDependents(t *testing.T) {
	g := NewWithT(t)
	web := instance("team-a", "web", "True", "ok")
	api := instance("team-a", "api", "True", "ok")
	api.Spec.DependsOn = []cairnv1.InstanceReference{{Name: "web"}}
	spy := instance("team-b", "spy", "True", "ok")
	spy.Spec.DependsOn = []cairnv1.InstanceReference{{Name: "web", Namespace: "team-a"}}
	f := newFixture(t, false, web, api, spy)
	_, body := f.get(t, "/instances/team-a/web", "alice-token")
	g.Expect(body).To(ContainSubstring(`<svg xmlns="http://www.w3.org/2000/svg" class="graph"`))
	g.Expect(body).To(ContainSubstring(`<a href="/instances/team-a/api">`))
	g.Expect(body).NotTo(ContainSubstring("spy"), "a dependent alice may not see")
	_, body = f.get(t, "/instances/team-a/web", "admin-token")
	g.Expect(body).To(ContainSubstring(`<a href="/instances/team-b/spy">`))
}

// TestPullsShowWhatTheUserMaySee: a tenant sees the plans that touch its
// namespaces, cut to those; a merged pull request says which instance was applied
// as planned (its history has the planned render at the merge commit).
func TestPullsShowWhatTheUserMaySee(t *testing.T) {
	g := NewWithT(t)
	web := instance("team-a", "web", "True", "ok")
	web.Status.History = []cairnv1.HistoryEntry{{Revision: "merge", RenderDigest: "hmac-sha256:planned"}}
	f := newFixture(t, false, web)
	store := &plans.Store{Client: f.c, Namespace: "cairn-system"}
	f.s.opts.Plans = store
	ctx := context.Background()
	g.Expect(store.Save(ctx, &plans.Record{Number: 3, HeadSHA: "h3", HeadRef: "scale-web", State: "merged", MergeSHA: "merge",
		Plan: &reconciler.Plan{Instances: []reconciler.InstancePlan{
			{Namespace: "team-a", Name: "web", Action: "Update", RenderDigest: "hmac-sha256:planned", Configure: []string{"apps/v1/Deployment/team-a/web"},
				Diff: "-replicas: 1\n+replicas: <script>2</script>\n"},
			{Namespace: "team-b", Name: "db", Action: "Update", RenderDigest: "hmac-sha256:x", Diff: "team-b's secret plan"},
		}}})).To(Succeed())
	g.Expect(store.Save(ctx, &plans.Record{Number: 4, HeadSHA: "h4", HeadRef: "only-b", State: "open",
		Plan: &reconciler.Plan{Instances: []reconciler.InstancePlan{{Namespace: "team-b", Name: "db", Action: "Update"}}}})).To(Succeed())

	_, body := f.get(t, "/pulls", "alice-token")
	g.Expect(body).To(ContainSubstring(`data-pull="3"`))
	g.Expect(body).NotTo(ContainSubstring(`data-pull="4"`), "a plan of team-b only")
	g.Expect(body).To(ContainSubstring("1 as planned"))
	resp, body := f.get(t, "/pulls/3", "alice-token")
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring("applied as planned"))
	g.Expect(body).To(ContainSubstring("&#43;replicas: &lt;script&gt;2&lt;/script&gt;"))
	g.Expect(body).NotTo(ContainSubstring("team-b"))
	resp, _ = f.get(t, "/pulls/4", "alice-token")
	g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
	_, body = f.get(t, "/pulls", "admin-token")
	g.Expect(body).To(ContainSubstring(`data-pull="4"`))
}

// TestFleetShowsThePlatformsSyncs: a user who may read the Platform sees its
// revision and its last syncs, with the prune guards' refusals.
func TestFleetShowsThePlatformsSyncs(t *testing.T) {
	g := NewWithT(t)
	p := &cairnv1.Platform{ObjectMeta: metav1.ObjectMeta{Name: cairnv1.PlatformName}}
	p.Status.LastSyncedRevision = "abcdef0123456789abcdef0123456789abcdef01"
	p.Status.RecentSyncs = []cairnv1.SyncRecord{{Revision: p.Status.LastSyncedRevision, Started: metav1.Now(),
		Duration: metav1.Duration{Duration: 1500 * time.Millisecond}, Result: "InstancesFailed", Changed: 3, Failed: 1, PruneGuard: 1}}
	f := newFixture(t, false, p)
	_, body := f.get(t, "/", "admin-token")
	g.Expect(body).To(ContainSubstring(`<a href="https://git.example.com/ops/platform/commit/abcdef0123456789abcdef0123456789abcdef01">abcdef012345</a>`))
	g.Expect(body).To(MatchRegexp(`<td>1.5s</td><td>InstancesFailed</td><td>3</td><td>1</td><td><span class="error">1 refused</span>`))
	_, body = f.get(t, "/", "alice-token")
	g.Expect(body).NotTo(ContainSubstring("InstancesFailed"), "alice may not read the Platform")
}

// TestObjectsAreShownWithSecretsMasked: an object of the inventory is shown as it
// is; a Secret's values and kubectl's copy of it never are; an object outside the
// inventory is not served.
func TestObjectsAreShownWithSecretsMasked(t *testing.T) {
	g := NewWithT(t)
	web := instance("team-a", "web", "True", "ok")
	web.Status.Inventory = &cairnv1.Inventory{Count: 2, Entries: []cairnv1.InventoryEntry{
		{ID: "team-a_creds__Secret", Version: "v1"}, {ID: "team-a_web-a__ConfigMap", Version: "v1"}}}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "creds",
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"aHVudGVyMg=="}}`}},
		Data: map[string][]byte{"password": []byte("hunter2")}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-a"}, Data: map[string]string{"value": "v-a"}}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "not-web"}, Data: map[string]string{"value": "x"}}
	f := newFixture(t, false, web, creds, cm, other)
	resp, body := f.get(t, "/instances/team-a/web/object?id=team-a_creds__Secret", "alice-token")
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring("password: (7 bytes, not shown)"))
	g.Expect(body).NotTo(ContainSubstring("hunter2"))
	g.Expect(body).NotTo(ContainSubstring("aHVudGVyMg"))
	_, body = f.get(t, "/instances/team-a/web/object?id=team-a_web-a__ConfigMap", "alice-token")
	g.Expect(body).To(ContainSubstring("value: v-a"))
	resp, _ = f.get(t, "/instances/team-a/web/object?id=team-a_not-web__ConfigMap", "alice-token")
	g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound), "not in the inventory")
	_, page := f.get(t, "/instances/team-a/web", "alice-token")
	g.Expect(page).To(ContainSubstring(`href="/instances/team-a/web/object?id=team-a_creds__Secret"`))
	g.Expect(page).NotTo(ContainSubstring("hunter2"))
}
