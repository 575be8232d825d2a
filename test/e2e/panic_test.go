package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/report"
)

// TestPanicFailsOnlyItsInstance: a panic in one instance's render and one in
// another's apply (a test hook of the engine) are recovered: each of those instances
// fails with InternalError (Ready False), its status and event name the phase and
// the panic but hold no stack, which is in the log; the other instances of the same
// sync are applied and Ready. Once the bug is gone, the next commit syncs them.
func TestPanicFailsOnlyItsInstance(t *testing.T) {
	e := newEnv(t)
	logs := &lockedBuffer{}
	rec, err := report.NewEventRecorder(e.cluster.RESTConfig, reconciler.Scheme)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.withOptions(func(o *reconciler.Options) {
		o.Log = funcr.New(func(prefix, args string) { fmt.Fprintln(logs, prefix, args) }, funcr.Options{})
		o.Events = rec
	})
	bombs := map[string]string{e.ns + "/render-bomb": reconciler.PhaseRender, e.ns + "/apply-bomb": reconciler.PhaseApply}
	reset := reconciler.SetInstanceTestHook(func(phase, key string) {
		if bombs[key] == phase {
			var m map[string]string
			m[phase] = key // a runtime error: its message is quoted in the status

		}
	})
	t.Cleanup(reset)
	a, b := inst{name: "a", ns: e.ns, configs: configs("x")}, inst{name: "b", ns: e.ns, configs: configs("y")}
	rb, ab := inst{name: "render-bomb", ns: e.ns, configs: configs("r")}, inst{name: "apply-bomb", ns: e.ns, configs: configs("p")}
	repo := newGitRepo(t, appRepo("", a, rb, ab, b))

	res := e.sync(repo)
	rec.Flush(10 * time.Second)
	for _, w := range []struct{ name, phase string }{{"render-bomb", "render"}, {"apply-bomb", "apply"}} {
		want := fmt.Sprintf("internal error during the %s of %s/%s: assignment to entry in nil map", w.phase, e.ns, w.name)
		e.expectFailure(res, wantFailure{name: w.name, reason: cairnv1.ReasonInternalError, contains: []string{want}})
		mi := e.instance(e.ns, w.name)
		ready := conditions.Get(mi, "Ready")
		e.g.Expect(ready).NotTo(BeNil())
		e.g.Expect(ready.Status).To(BeEquivalentTo("False"))
		e.g.Expect(ready.Reason).To(Equal(cairnv1.ReasonInternalError))
		e.g.Expect(ready.Message).To(ContainSubstring(want))
		e.g.Expect(ready.Message).NotTo(ContainSubstring("goroutine"), "no stack in the status")
		e.g.Expect(ready.Message).NotTo(ContainSubstring(".go:"), "no stack in the status")
		ev := eventWith(e.eventsAbout(e.ns, mi.UID), cairnv1.ReasonInternalError)
		e.g.Expect(ev).NotTo(BeNil(), "%v", e.eventsAbout(e.ns, mi.UID))
		e.g.Expect(ev.Note).To(ContainSubstring(want))
		e.g.Expect(ev.Note).NotTo(ContainSubstring(".go:"), "no stack in the event")
		e.g.Expect(logs.String()).To(ContainSubstring(`"instance"="` + e.ns + "/" + w.name + `"`))
	}
	e.g.Expect(e.configMap(e.ns, "render-bomb-r")).To(BeNil(), "nothing of the render that panicked is applied")
	e.g.Expect(logs.String()).To(ContainSubstring("recovered a panic"))
	e.g.Expect(logs.String()).To(ContainSubstring("reconciler.testHook"), "the stack is in the log")
	for _, ok := range []struct{ name, key string }{{"a", "x"}, {"b", "y"}} {
		e.g.Expect(result(res, e.ns, ok.name).Ready).To(BeTrue(), "%+v", res)
		e.expectLastGood(ok.name, res.Revision, ok.key)
	}

	reset()
	repo.commit("the bug is fixed", map[string]string{"README.md": "fixed\n"})
	res = e.sync(repo)
	for _, name := range []string{"render-bomb", "apply-bomb"} {
		e.g.Expect(result(res, e.ns, name).Ready).To(BeTrue(), "%+v", res)
		e.g.Expect(isTrue(e.instance(e.ns, name), "Ready")).To(BeTrue())
	}
}
