package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/reconciler/loop"
)

// controllerHooks is the webhook receiver of `cairn controller --webhook-bind-address`.
// It runs on every replica, since the Service sends a delivery to any of them: on
// the leader a verified push wakes the sync loop at once; on another replica it
// asks the leader through the Platform's reconcile request annotation (as `cairn
// reconcile source` does), which the leader watches. Signatures are verified as
// `cairn sync --listen` verifies them, by the forge's provider.
type controllerHooks struct {
	fw      *forgeWiring
	addr    string
	loop    *loop.Loop
	client  client.Client // writes the annotation (no cache)
	log     logr.Logger
	leading atomic.Bool // this replica runs the sync loop
	// requests coalesce the pushes a replica that does not lead passes on.
	requests *forge.Trigger
}

var _ manager.LeaderElectionRunnable = (*controllerHooks)(nil)

func newControllerHooks(fw *forgeWiring, addr string, l *loop.Loop, c client.Client, log logr.Logger) *controllerHooks {
	return &controllerHooks{fw: fw, addr: addr, loop: l, client: c, log: log.WithName("webhooks"), requests: forge.NewTrigger()}
}

// NeedLeaderElection is false: every replica receives webhooks.
func (h *controllerHooks) NeedLeaderElection() bool { return false }

// Start serves the webhooks until ctx ends (forgeWiring.close stops the server).
func (h *controllerHooks) Start(ctx context.Context) error {
	if err := h.fw.serve(h.addr, h.onPush, h.onPullRequest); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-h.requests.C():
			h.request(ctx)
		}
	}
}

// lead marks this replica as the one running the sync loop while fn runs.
func (h *controllerHooks) lead(ctx context.Context, fn func(context.Context) error) error {
	h.leading.Store(true)
	defer h.leading.Store(false)
	return fn(ctx)
}

func (h *controllerHooks) onPush(p forge.Push) {
	if h.leading.Load() {
		h.loop.Push(p.SHAHint)
		return
	}
	h.requests.Fire()
}

// onPullRequest queues a plan on the leader. Another replica does not plan (only
// the leader does) and cannot pass the request on yet: it says so, and the PR's next
// event that reaches the leader plans its newest head.
func (h *controllerHooks) onPullRequest(pr forge.PullRequest) {
	if h.leading.Load() {
		h.fw.onPullRequest(pr)
		return
	}
	h.log.Info("a pull request event reached a replica that does not lead: not planned here", "pr", pr.Number)
}

// request asks the leader to sync the branch head at once.
func (h *controllerHooks) request(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	at, err := loop.RequestSourceReconcile(ctx, h.client, time.Now())
	if err != nil {
		h.log.Error(err, "failed to pass a push on to the leader")
		return
	}
	h.log.Info("passed a push on to the leader (Platform reconcile request)", "requestedAt", at)
}
