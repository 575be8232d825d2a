package reconciler

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/render/declarations"
)

// TestRendersKnowTheirTenant: an instance declared under a tenant's paths renders
// as that tenant (its renders take the worker slots in turn with the other
// tenants'), one of the platform team's as "".
func TestRendersKnowTheirTenant(t *testing.T) {
	g := NewWithT(t)
	set, err := declarations.Load(limitsRepo, declarations.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tenantOf(set, set.Instance("team-a", "web"))).To(Equal("team-a"))
	g.Expect(tenantOf(set, set.Instance("ops", "tool"))).To(BeEmpty())

	s := &syncRun{revisionInput: revisionInput{set: set}}
	for _, mi := range set.Instances {
		s.runs = append(s.runs, &instanceRun{mi: mi, affected: true})
	}
	byTenant := s.affectedByTenant()
	g.Expect(byTenant).To(HaveLen(2))
	g.Expect(byTenant["team-a"]).To(HaveLen(1))
	g.Expect(byTenant["team-a"][0].mi.Name).To(Equal("web"))
	g.Expect(byTenant[""][0].mi.Name).To(Equal("tool"))
}

// TestARenderThatWaitedForBusyWorkersIsRetried: a render whose deadline passed
// while every worker was busy with other renders fails as transient (retried with
// backoff, whatever the next commit); one whose own build ran out of time, or
// broke a limit, stalls until its input changes.
func TestARenderThatWaitedForBusyWorkersIsRetried(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	busy := &render.Error{Reason: render.ReasonRenderTimeout,
		Err: fmt.Errorf("render exceeded its deadline while waiting for a render worker: %w (%w)", render.ErrWorkersBusy, ctx.Err())}
	f := renderFailure("team-b/web", fmt.Errorf("kustomize directory apps/web: %w", busy))
	g.Expect(f.Kind).To(Equal(outcome.Transient))
	g.Expect(f.Reason).To(Equal(render.ReasonRenderTimeout))
	g.Expect(f.Err.Error()).To(HavePrefix("failed to render team-b/web: kustomize directory apps/web: "))

	own := &render.Error{Reason: render.ReasonRenderTimeout, Err: errors.New("render exceeded its deadline during the kustomize build")}
	g.Expect(renderFailure("team-a/slow", own).Kind).To(Equal(outcome.Stalled))
	limit := &render.Error{Reason: render.ReasonLimitExceeded, Err: errors.New("memory budget")}
	g.Expect(renderFailure("team-a/big", limit).Kind).To(Equal(outcome.Stalled))
}
