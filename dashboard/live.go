package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/plans"
)

// Hub passes the cache's changes (the namespace of each changed instance, "" for
// the Platform) to the open pages' event streams.
type Hub struct {
	mu     sync.Mutex
	subs   map[chan string]struct{}
	closed bool
}

// NewHub returns an empty Hub.
func NewHub() *Hub { return &Hub{subs: map[chan string]struct{}{}} }

// Changed tells every stream that something in namespace changed; a stream that
// is behind misses it (it refreshes for the next one anyway).
func (h *Hub) Changed(namespace string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- namespace:
		default:
		}
	}
}

func (h *Hub) subscribe() chan string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	ch := make(chan string, 64)
	h.subs[ch] = struct{}{}
	return ch
}

func (h *Hub) unsubscribe(ch chan string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[ch]; ok {
		delete(h.subs, ch)
		close(ch)
	}
}

// Close ends every stream.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}

// Watch feeds h the changes of the ModuleInstances and the Platform in informers.
func Watch(ctx context.Context, informers cache.Informers, h *Hub) error {
	for _, obj := range []client.Object{&cairnv1.ModuleInstance{}, &cairnv1.Platform{}} {
		inf, err := informers.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("dashboard: failed to watch %T: %w", obj, err)
		}
		tell := func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if m, ok := o.(client.Object); ok {
				h.Changed(m.GetNamespace())
			}
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: tell, DeleteFunc: tell,
			UpdateFunc: func(_, n any) { tell(n) }}); err != nil {
			return fmt.Errorf("dashboard: failed to watch %T: %w", obj, err)
		}
	}
	return nil
}

// Bounds of the event streams: at most maxStreams open at once, maxUserStreams of
// one user (anonymous readers count as one), each write done within writeWait.
const (
	maxStreams     = 512
	maxUserStreams = 16
	writeWait      = 10 * time.Second
)

// streamCounts counts the open streams, in all and per user.
type streamCounts struct {
	mu     sync.Mutex
	total  int
	byUser map[string]int
}

func (c *streamCounts) take(user string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byUser == nil {
		c.byUser = map[string]int{}
	}
	if c.total >= maxStreams || c.byUser[user] >= maxUserStreams {
		return false
	}
	c.total++
	c.byUser[user]++
	return true
}

func (c *streamCounts) give(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if c.byUser[user]--; c.byUser[user] <= 0 {
		delete(c.byUser, user)
	}
}

// plansChanged is what the Hub is told when a pull request's plan changes: no
// namespace (it is never one), for the pages of every namespace.
const plansChanged = "\x00plans"

// WatchPlans feeds h the changes of the pull requests' plans, the Secrets of
// namespace that plans.Store keeps (informers must hold Secrets of that namespace;
// their data is not needed).
func WatchPlans(ctx context.Context, informers cache.Informers, namespace string, h *Hub) error {
	inf, err := informers.GetInformer(ctx, &corev1.Secret{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("dashboard: failed to watch the plans: %w", err)
	}
	tell := func(o any) {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if m, ok := o.(client.Object); ok && m.GetNamespace() == namespace && m.GetLabels()[plans.Label] == "true" {
			h.Changed(plansChanged)
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: tell, DeleteFunc: tell, UpdateFunc: func(_, n any) { tell(n) }})
	return err
}

// settle is how long a stream gathers changes before it tells the page: a sync
// changes many instances within it, and the page fetches itself once.
const settle = 150 * time.Millisecond

// events streams a "change" event whenever something id may see changes in the
// page's scope (?scope=namespace, all when empty), as server-sent events.
func (s *Server) events(w http.ResponseWriter, r *http.Request, id *Identity) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	scope := r.URL.Query().Get("scope")
	if !s.streams.take(id.User) {
		http.Error(w, "too many open pages: close some", http.StatusTooManyRequests)
		return
	}
	defer s.streams.give(id.User)
	rc := http.NewResponseController(w)
	ch := s.hub.subscribe()
	if ch == nil {
		http.Error(w, "the dashboard is stopping", http.StatusServiceUnavailable)
		return
	}
	defer s.hub.unsubscribe(ch)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 1000\n\n")
	flusher.Flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	var due <-chan time.Time
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			_ = rc.SetWriteDeadline(time.Now().Add(writeWait)) // a reader that stopped reading ends its stream
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case ns, open := <-ch:
			if !open {
				return
			}
			if due == nil && s.concerns(r.Context(), id, scope, ns) {
				due = time.After(settle)
			}
		case <-due:
			due = nil
			_ = rc.SetWriteDeadline(time.Now().Add(writeWait))
			if _, err := fmt.Fprint(w, "event: change\ndata: {}\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

// concerns tells whether a change in ns is one for a page of scope that id may see.
func (s *Server) concerns(ctx context.Context, id *Identity, scope, ns string) bool {
	if ns == plansChanged { // the pages of every namespace (the fleet, the plans); it tells nothing of a plan
		return scope == ""
	}
	if scope != "" && ns != scope && ns != "" {
		return false
	}
	if ns == "" {
		ok, _ := s.opts.Authz.Allowed(ctx, id, Access{Verb: "get", Resource: "platforms"})
		return ok
	}
	ok, _ := s.opts.Authz.Allowed(ctx, id, Access{Verb: "get", Resource: "moduleinstances", Namespace: ns})
	return ok
}
