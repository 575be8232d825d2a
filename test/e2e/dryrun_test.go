package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// objectRequests keeps the requests to one object of the test's namespace.
func objectRequests(ns, resource, name string) func(loggedRequest) bool {
	p := "/namespaces/" + ns + "/" + resource + "/" + name
	return func(r loggedRequest) bool { return strings.HasSuffix(r.path, p) }
}

// applies keeps the server-side applies (or their dry-runs) of rendered objects.
func applies(dryRun bool) func(loggedRequest) bool {
	return func(r loggedRequest) bool {
		return r.method == http.MethodPatch && r.apply && r.dryRun == dryRun && !strings.Contains(r.path, "/cairn.dev/")
	}
}

func both(a, b func(loggedRequest) bool) func(loggedRequest) bool {
	return func(r loggedRequest) bool { return a(r) && b(r) }
}

// TestDryRunBeforeWritesLeavesNothingHalfApplied: three changed objects, one of them
// invalid: all are dry-run first, none is written, and the failure names the invalid
// one with the API server's message. A one-object change still costs one request.
func TestDryRunBeforeWritesLeavesNothingHalfApplied(t *testing.T) {
	e, log := newLoggedEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")}
	repo := newGitRepo(t, appRepo("", a))
	mark := time.Now()
	good := e.syncClean(repo)
	e.g.Expect(log.since(mark, both(objectRequests(e.ns, "configmaps", "a-x"), applies(true)))).To(HaveLen(1),
		"two changed objects (a cold apply) are dry-run first")

	a.configs = map[string]string{"x": "changed", "new": "v"}
	bad := replaceOnce(a.yaml(), "    configs:\n", "    badService: true\n    configs:\n")
	repo.commit("change a-x, add a-new and an invalid Service", map[string]string{"instances/a.yaml": bad})
	mark = time.Now()
	res := e.sync(repo)
	e.expectFailure(res, wantFailure{name: "a", reason: cairnv1.ReasonApplyFailed, contains: []string{
		"Service/{ns}/a-bad dry-run failed", "spec.ports[0].port", "99999", "nothing of it was written"}})
	e.g.Expect(e.configMap(e.ns, "a-new")).To(BeNil(), "no object is written when one fails its dry-run")
	e.g.Expect(e.configMap(e.ns, "a-x").Data).To(HaveKeyWithValue("value", "v-x"))
	e.g.Expect(e.get("v1", "Service", e.ns, "a-bad")).To(BeNil())
	e.g.Expect(log.since(mark, applies(false))).To(BeEmpty(), "no apply request was sent")
	e.expectLastGood("a", good, "x")
	e.g.Expect(isTrue(e.instance(e.ns, "a"), "Stalled")).To(BeTrue())

	a.configs = map[string]string{"x": "changed"}
	repo.commit("change a-x only", map[string]string{"instances/a.yaml": a.yaml()})
	mark = time.Now()
	r := result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Ready).To(BeTrue(), r.Message)
	e.g.Expect(r.Applied).To(Equal(1))
	var sent []string
	for _, req := range log.since(mark, objectRequests(e.ns, "configmaps", "a-x")) {
		sent = append(sent, fmt.Sprintf("%s apply=%t dryRun=%t", req.method, req.apply, req.dryRun))
	}
	e.g.Expect(sent).To(Equal([]string{"PATCH apply=true dryRun=false"}), "one changed object costs exactly one request, its apply")
	e.g.Expect(e.configMap(e.ns, "a-x").Data).To(HaveKeyWithValue("value", "changed"))
}
