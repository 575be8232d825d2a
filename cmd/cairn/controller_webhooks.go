package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/reconciler/loop"
)

// controllerHooks is the webhook receiver of `cairn controller --webhook-bind-address`.
// It runs on every replica, since the Service sends a delivery to any of them: on
// the leader a verified push wakes the sync loop at once; on another replica it
// asks the leader through the Platform's reconcile request annotation (as `cairn
// reconcile source` does), which the leader watches, and a pull request through a
// plan request annotation. Signatures are verified as
// `cairn sync --listen` verifies them, by the forge's provider.
type controllerHooks struct {
	fw      *forgeWiring
	addr    string
	loop    *loop.Loop
	client  client.Client // writes the annotation (no cache)
	log     logr.Logger
	leading atomic.Bool // this replica runs the sync loop
	// requests wakes the goroutine that passes on, coalesced, the pushes and pull
	// requests that reach a replica that does not lead.
	requests *forge.Trigger
	mu       sync.Mutex
	pushed   bool
	prs      map[int]bool
}

var _ manager.LeaderElectionRunnable = (*controllerHooks)(nil)

func newControllerHooks(fw *forgeWiring, addr string, l *loop.Loop, c client.Client, log logr.Logger) *controllerHooks {
	return &controllerHooks{fw: fw, addr: addr, loop: l, client: c, log: log.WithName("webhooks"), requests: forge.NewTrigger(),
		prs: map[int]bool{}}
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
	h.mu.Lock()
	h.pushed = true
	h.mu.Unlock()
	h.requests.Fire()
}

// onPullRequest queues a plan on the leader; another replica (which plans nothing)
// passes the request on through the Platform's plan.cairn.dev/pr-<n> annotation.
func (h *controllerHooks) onPullRequest(pr forge.PullRequest) {
	switch {
	case h.fw.plans == nil:
		return // no forge: nothing plans pull requests
	case h.leading.Load():
		h.fw.onPullRequest(pr)
		return
	}
	h.mu.Lock()
	h.prs[pr.Number] = true
	h.mu.Unlock()
	h.requests.Fire()
}

// request passes on to the leader what reached this replica since the last call.
func (h *controllerHooks) request(ctx context.Context) {
	h.mu.Lock()
	pushed, prs := h.pushed, slices.Sorted(maps.Keys(h.prs))
	h.pushed, h.prs = false, map[int]bool{}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if pushed {
		at, err := loop.RequestSourceReconcile(ctx, h.client, time.Now())
		if err != nil {
			h.log.Error(err, "failed to pass a push on to the leader")
		} else {
			h.log.Info("passed a push on to the leader (Platform reconcile request)", "requestedAt", at)
		}
	}
	if len(prs) > 0 {
		if err := loop.RequestPlans(ctx, h.client, prs, time.Now()); err != nil {
			h.log.Error(err, "failed to pass pull requests on to the leader", "prs", prs)
		} else {
			h.log.Info("passed pull requests on to the leader (Platform plan requests)", "prs", prs)
		}
	}
}

// watchPlanRequests makes the leader queue the plans that other replicas pass on
// (plan.cairn.dev/pr-<n> annotations on the Platform CR), then remove the
// annotations. Nothing without a forge.
func watchPlanRequests(mgr manager.Manager, fw *forgeWiring, log logr.Logger) error {
	if fw.plans == nil {
		return nil
	}
	queue := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		p := &cairnv1.Platform{}
		if err := mgr.GetClient().Get(ctx, req.NamespacedName, p); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		numbers := loop.PlanRequests(p)
		if len(numbers) == 0 {
			return reconcile.Result{}, nil
		}
		for _, n := range numbers {
			fw.plans.Enqueue(n)
		}
		log.Info("planning pull requests passed on by another replica", "prs", numbers)
		return reconcile.Result{}, loop.ForgetPlanRequests(ctx, mgr.GetClient(), numbers)
	})
	hasRequests := predicate.NewPredicateFuncs(func(o client.Object) bool {
		p, ok := o.(*cairnv1.Platform)
		return ok && len(loop.PlanRequests(p)) > 0
	})
	err := ctrl.NewControllerManagedBy(mgr).Named("plan-requests").
		For(&cairnv1.Platform{}, builder.WithPredicates(hasRequests)).Complete(queue)
	if err != nil {
		return fmt.Errorf("failed to watch plan requests: %w", err)
	}
	return nil
}

// syncAnnotationsChanged is predicate.AnnotationChangedPredicate blind to the plan
// requests: they ask for a plan, not a sync.
var syncAnnotationsChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return !maps.Equal(syncAnnotations(e.ObjectOld), syncAnnotations(e.ObjectNew))
}}

func syncAnnotations(o client.Object) map[string]string {
	out := map[string]string{}
	for k, v := range o.GetAnnotations() {
		if !strings.HasPrefix(k, cairnv1.PlanRequestAnnotationPrefix) {
			out[k] = v
		}
	}
	return out
}
