package demo

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// statusRow is a row of `cairn status` as make demo prints it: namespace, name, READY.
var statusRow = regexp.MustCompile(`(?m)^(team-[abc])\s+(\S+)\s+(True|False|Unknown)\s`)

// TestTwoDemosSideBySide: a second `make demo` with a DEMO_DIR and a registry port of
// its own runs beside the first: its copy of examples/ names its own registry, its
// replicas take other ports (printed), and in both every example instance is Ready.
func TestTwoDemosSideBySide(t *testing.T) {
	g := NewWithT(t)
	root, err := filepath.Abs("../..")
	g.Expect(err).NotTo(HaveOccurred())
	base := t.TempDir()
	type demo struct{ dir, registry, out string }
	demos := []*demo{{dir: filepath.Join(base, "a")}, {dir: filepath.Join(base, "b")}}
	for _, d := range demos {
		port := freePort(t)
		d.registry = fmt.Sprintf("127.0.0.1:%d", port)
		t.Cleanup(func() { makeTarget(t, root, "demo-down", "DEMO_DIR="+d.dir) })
		d.out = makeTarget(t, root, "demo", "DEMO_DIR="+d.dir, fmt.Sprintf("DEMO_REGISTRY_PORT=%d", port))
	}
	ports := map[string]bool{}
	for _, d := range demos {
		g.Expect(statusRow.FindAllStringSubmatch(d.out, -1)).To(HaveLen(14), "make demo prints the fourteen example instances:\n%s", tail(d.out))
		// make demo waits a minute for Ready, then prints what it sees: on a loaded
		// machine, wait here until every instance is Ready.
		g.Eventually(func() string { return notReady(t, root, d.dir) }, 3*time.Minute, 2*time.Second).Should(BeEmpty())
		registries, err := os.ReadFile(filepath.Join(d.dir, "platform", "registries.yaml"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(registries)).To(ContainSubstring("hostname: " + d.registry))
		g.Expect(string(registries)).NotTo(ContainSubstring("127.0.0.1:5001"))

		raw, err := os.ReadFile(filepath.Join(d.dir, "port-base"))
		g.Expect(err).NotTo(HaveOccurred())
		portBase := strings.TrimSpace(string(raw))
		g.Expect(ports).NotTo(HaveKey(portBase), "each demo's replicas on ports of their own")
		ports[portBase] = true
		var n int
		_, err = fmt.Sscan(portBase, &n)
		g.Expect(err).NotTo(HaveOccurred())
		metrics := fmt.Sprintf("127.0.0.1:%d", n+80)
		g.Expect(d.out).To(ContainSubstring("curl -s "+metrics+"/metrics"), "the demo prints its replica's port")
		resp, err := http.Get("http://" + metrics + "/metrics")
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))

		// The dashboard it prints, with a token of the demo's user: the fourteen instances.
		dashboard := fmt.Sprintf("http://127.0.0.1:%d/", n+90)
		g.Expect(d.out).To(ContainSubstring(dashboard), "the demo prints its dashboard's address")
		g.Expect(fleetRows(t, d.dir, dashboard)).To(Equal(14))
	}
}

// fleetRows counts the instances on the dashboard's fleet page, logged in with a
// token of the demo's user.
func fleetRows(t *testing.T, dir, dashboard string) int {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("cairn-system").CreateToken(context.Background(), "dashboard-demo",
		&authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, dashboard, nil)
	req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the dashboard answered %s", resp.Status)
	}
	return strings.Count(string(body), "data-instance=")
}

// notReady lists the instances of the demo in dir that cairn status does not show
// Ready, or says why it cannot tell.
func notReady(t *testing.T, root, dir string) string {
	out, err := exec.Command(filepath.Join(root, "bin", "cairn"), "status", "--kubeconfig", filepath.Join(dir, "kubeconfig")).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("cairn status: %v: %s", err, out)
	}
	rows := statusRow.FindAllStringSubmatch(string(out), -1)
	if len(rows) != 14 {
		return fmt.Sprintf("%d instances, not 14:\n%s", len(rows), out)
	}
	var not []string
	for _, r := range rows {
		if r[3] != "True" {
			not = append(not, r[1]+"/"+r[2])
		}
	}
	return strings.Join(not, " ")
}

// makeTarget runs make TARGET VARS... in root and returns its output.
func makeTarget(t *testing.T, root, target string, vars ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", append([]string{"--no-print-directory", "-C", root, target}, vars...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s %v: %v\n%s", target, vars, err, tail(string(out)))
	}
	return string(out)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(s string) string {
	if len(s) > 6000 {
		return "..." + s[len(s)-6000:]
	}
	return s
}
