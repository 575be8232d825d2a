package e2e

import (
	"net/http"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/test/harness"
)

// orderModule renders one object of each deletion stage: a Deployment and a custom
// resource (workloads), a Service and a ConfigMap (services and config), a
// ServiceAccount and a Role (RBAC), a Namespace, and the CustomResourceDefinition.
const orderModule = `package order

instance: {name: string, namespace: string}
values: group: string
objects: {
` + widgetCRD + `	widget: {apiVersion: "\(values.group)/v1", kind: "Widget", metadata: name: instance.name}
	namespace: {apiVersion: "v1", kind: "Namespace", metadata: name: "\(instance.namespace)-extra"}
	deployment: {
		apiVersion: "apps/v1"
		kind:       "Deployment"
		metadata: name: instance.name
		spec: {
			replicas: 0
			selector: matchLabels: app: instance.name
			template: {
				metadata: labels: app: instance.name
				spec: containers: [{name: "app", image: "ghcr.io/stefanprodan/podinfo:6.7.0"}]
			}
		}
	}
	service: {apiVersion: "v1", kind: "Service", metadata: name: instance.name,
		spec: {selector: app: instance.name, ports: [{port: 80}]}}
	config: {apiVersion: "v1", kind: "ConfigMap", metadata: name: instance.name, data: value: "x"}
	account: {apiVersion: "v1", kind: "ServiceAccount", metadata: name: instance.name}
	role: {apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: name: instance.name,
		rules: [{apiGroups: [""], resources: ["configmaps"], verbs: ["get"]}]}
}
`

// requestLog records the requests of a client, in the order they were sent.
type requestLog struct {
	mu   sync.Mutex
	reqs []loggedRequest
}

type loggedRequest struct {
	method, path string
	dryRun       bool
	apply        bool
	at           time.Time
}

// wrap is a rest.Config WrapTransport.
func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.reqs = append(l.reqs, loggedRequest{method: req.Method, path: req.URL.Path, at: time.Now(),
			dryRun: req.URL.Query().Get("dryRun") != "",
			apply:  strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch")})
		l.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// since returns the requests matching keep recorded after mark.
func (l *requestLog) since(mark time.Time, keep func(loggedRequest) bool) []loggedRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []loggedRequest
	for _, r := range l.reqs {
		if !r.at.Before(mark) && keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// newLoggedEnv is an env whose engine's requests are recorded.
func newLoggedEnv(t *testing.T) (*env, *requestLog) {
	hc := harness.ForTest(t)
	log := &requestLog{}
	cfg := rest.CopyConfig(hc.RESTConfig)
	cfg.WrapTransport = log.wrap
	return newEnvWithConfig(t, hc, cfg), log
}

// resource names a request's object: "<resource>/<name>".
func resourceOf(p string) string {
	return path.Base(path.Dir(p)) + "/" + path.Base(p)
}

// TestRemovalDeletesInReverseApplyOrderEachStageGone: the Deployment holds a
// finalizer, so it lingers after its DELETE; nothing of the next stage is deleted
// until it is gone, and the stages come in order: workloads and custom resources,
// services and config, RBAC, the Namespace, the CRD.
func TestRemovalDeletesInReverseApplyOrderEachStageGone(t *testing.T) {
	e, log := newLoggedEnv(t)
	group := e.ns + ".test.example.com"
	e.deleteNamespacesAtEnd(e.ns + "-extra")
	files := appRepo("  limits: {allowPruneProtected: true}\n", inst{name: "keep", ns: e.ns, replicas: 0})
	files["modules/order/order.cue"] = orderModule
	files["instances/order.yaml"] = localInstanceYAML("order", e.ns, "./modules/order", "{group: "+group+"}") +
		"  pruneProtected: true\n"
	repo := newGitRepo(t, files)
	e.syncClean(repo)

	d := e.get("apps/v1", "Deployment", e.ns, "order")
	d.SetFinalizers([]string{"test.cairn.dev/hold"})
	e.g.Expect(e.c.Update(e.ctx, d)).To(Succeed())

	repo.commit("remove order", map[string]string{"instances/order.yaml": ""})
	mark := time.Now()
	done := make(chan outcome.Action, 1)
	go func() { done <- result(e.sync(repo), e.ns, "order").Action }()
	e.g.Eventually(func() bool { return e.get("apps/v1", "Deployment", e.ns, "order").GetDeletionTimestamp() != nil },
		30*time.Second, 100*time.Millisecond).Should(BeTrue())
	deletes := func(r loggedRequest) bool {
		return r.method == http.MethodDelete && !strings.Contains(r.path, "cairn-inventory") && !strings.Contains(r.path, "/cairn.dev/")
	}
	e.g.Consistently(func() []loggedRequest { return log.since(mark, deletes) }, 2*time.Second, 200*time.Millisecond).
		Should(HaveLen(2), "only the first stage (Deployment, Widget) is deleted while the Deployment lingers")
	e.g.Expect(e.configMap(e.ns, "order")).NotTo(BeNil())

	released := time.Now()
	d = e.get("apps/v1", "Deployment", e.ns, "order")
	d.SetFinalizers(nil)
	e.g.Expect(e.c.Update(e.ctx, d)).To(Succeed())
	e.g.Eventually(done, time.Minute).Should(Receive(Equal(outcome.ActionDeleted)))

	var order []string
	var afterRelease []bool
	for _, r := range log.since(mark, deletes) {
		order = append(order, resourceOf(r.path))
		afterRelease = append(afterRelease, r.at.After(released))
	}
	e.g.Expect(order).To(HaveLen(8), "%v", order)
	e.g.Expect(order[:2]).To(ConsistOf("deployments/order", "widgets/order"))
	e.g.Expect(order[2:4]).To(ConsistOf("services/order", "configmaps/order"))
	e.g.Expect(order[4:6]).To(ConsistOf("serviceaccounts/order", "roles/order"))
	e.g.Expect(order[6:]).To(Equal([]string{"namespaces/" + e.ns + "-extra", "customresourcedefinitions/widgets." + group}))
	e.g.Expect(afterRelease[2:]).NotTo(ContainElement(false), "the next stages wait until the Deployment is gone")
	e.g.Expect(e.gone("v1", "Namespace", "", e.ns+"-extra")).To(BeTrue())
}
