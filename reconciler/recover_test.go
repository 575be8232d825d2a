package reconciler

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// TestRecoveredPanicFailsOnlyTheInstance: a panic in an instance's phase becomes
// its failure, InternalError and Stalled, naming the phase, the instance and the
// panic value (bounded) but not the stack, which is logged with the instance and
// revision keys.
func TestRecoveredPanicFailsOnlyTheInstance(t *testing.T) {
	g := NewWithT(t)
	var logs strings.Builder
	e := &Engine{opts: Options{Log: funcr.New(func(_, args string) { logs.WriteString(args + "\n") }, funcr.Options{})}}
	in := &revisionInput{e: e, rev: Revision{SHA: "abc123"}}
	r := &instanceState{instancePlan: instancePlan{mi: &cairnv1.ModuleInstance{}}}
	r.mi.Namespace, r.mi.Name = "team-a", "app"

	func() {
		defer in.recoverInto(context.Background(), r, PhaseRender)
		var objects []string
		_ = objects[len(logs.String())+3] // a runtime error: its message is quoted
	}()
	g.Expect(r.failure).NotTo(BeNil())
	g.Expect(r.failure.Kind).To(Equal(outcome.Stalled))
	g.Expect(r.failure.Reason).To(Equal(cairnv1.ReasonInternalError))
	g.Expect(r.failure.Error()).To(HavePrefix("internal error during the render of team-a/app: runtime error: index out of range [3] with length 0"))

	// Any other value is named by its type only: it could hold rendered data.
	r.failure = nil
	func() {
		defer in.recoverInto(context.Background(), r, PhaseApply)
		panic("password=" + strings.Repeat("x", 1000))
	}()
	g.Expect(r.failure.Error()).To(HavePrefix("internal error during the apply of team-a/app: a panic with a value of type string"))
	g.Expect(r.failure.Error()).NotTo(ContainSubstring("password"))
	g.Expect(logs.String()).NotTo(ContainSubstring("password"))
	g.Expect(r.failure.Error()).NotTo(ContainSubstring("goroutine"))
	g.Expect(r.failure.Error()).NotTo(ContainSubstring(".go:"))
	g.Expect(logs.String()).To(ContainSubstring(`"instance"="team-a/app"`))
	g.Expect(logs.String()).To(ContainSubstring(`"revision"="abc123"`))
	g.Expect(logs.String()).To(ContainSubstring("recover_test.go"), "the stack is logged")
}

// TestInstanceTestHook: the hook is called until it is reset, and a reset of an
// older hook leaves a newer one.
func TestInstanceTestHook(t *testing.T) {
	g := NewWithT(t)
	var calls []string
	reset := SetInstanceTestHook(func(phase, key string) { calls = append(calls, phase+" "+key) })
	testHook(PhaseApply, "team-a/app")
	reset()
	testHook(PhaseApply, "team-a/other")
	g.Expect(calls).To(Equal([]string{"apply team-a/app"}))

	resetOld := SetInstanceTestHook(func(string, string) {})
	resetNew := SetInstanceTestHook(func(phase, key string) { calls = append(calls, phase+" "+key) })
	resetOld()
	testHook(PhaseRender, "team-a/app")
	resetNew()
	g.Expect(calls).To(Equal([]string{"apply team-a/app", "render team-a/app"}))
}
