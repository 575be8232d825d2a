package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// chromium is Debian's package (hack/prereqs.sh installs it); the tests never skip
// without it.
const chromium = "/usr/bin/chromium"

// newBrowser starts a headless Chromium of its own (its own profile: its own
// cookies) for one user of t, and returns the context its actions run in.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("the dashboard's tests need Debian's chromium at %s (hack/prereqs.sh installs it): %v", chromium, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1400, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no deadline of its own
		t.Fatalf("failed to start chromium: %v", err)
	}
	return ctx
}

// run runs steps in the browser with a deadline, failing t on an error.
func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// value runs a in the browser with a deadline and returns its value.
func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

// eval evaluates a JavaScript expression in the page (a promise awaited).
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	return value(t, ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
}

// text is the text of the first element sel matches.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return value(t, ctx, chromedp.Text(chromedp.CSS(sel)))
}

// screenshot writes the whole page to the test results (CAIRN_TEST_RESULTS, else
// test/e2e/results), where the README's pictures are taken from.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png := value(t, ctx, chromedp.FullScreenshot(100))
	dir := os.Getenv("CAIRN_TEST_RESULTS")
	if dir == "" {
		dir = "results"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}

// userToken creates ServiceAccount name in ns, binds it there to clusterRoles, and
// returns a token of it: a user of the dashboard with those roles in that namespace.
func (e *env) userToken(name, ns string, clusterRoles ...string) string {
	e.t.Helper()
	e.g.Expect(e.c.Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})).To(Succeed())
	for _, role := range clusterRoles {
		e.g.Expect(e.c.Create(e.ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + role, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
		})).To(Succeed())
	}
	cs, err := kubernetes.NewForConfig(e.cluster.RESTConfig)
	e.g.Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(e.ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	e.g.Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// login logs the browser in to the dashboard at base with token.
func login(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	run(t, ctx, chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SetValue(chromedp.CSS("#token"), token), chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("table.fleet")))
}
