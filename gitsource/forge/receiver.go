package forge

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// ReceiverOptions configure a Receiver.
type ReceiverOptions struct {
	// Hooks are the forges served, each at /hooks/<its provider's name>. A
	// hook whose secret is empty is not served (404); at least one with a
	// secret is required.
	Hooks []Hook
	// Branch is the tracked branch: pushes to other branches are ignored.
	// Empty accepts pushes to any branch.
	Branch string
	// Repos lists the accepted repositories ("owner/name", compared without
	// case); events for others are ignored. Empty accepts any.
	Repos []string
	// MaxBodyBytes caps a delivery's body before it is read (413 beyond).
	MaxBodyBytes int64
	// RatePerSecond and RateBurst are the token buckets each source address
	// gets (429 when empty): one for authenticated deliveries and one of their
	// own for deliveries that fail the signature check, so that unsigned junk
	// never spends a signed delivery's budget.
	RatePerSecond float64
	RateBurst     int
	// MaxSources bounds the addresses tracked by the rate limiter.
	MaxSources int
	// DedupeWindow is how long a delivery id is remembered; a second delivery
	// with the same id within it is acknowledged and ignored.
	DedupeWindow time.Duration
	// Logger receives one line per rejected or failed delivery (at Info; for
	// rate-limited ones, the 1st, 2nd, 4th... with their count); never a
	// secret, a signature or a body.
	Logger logr.Logger
}

// DefaultReceiverOptions returns the limits: 1 MiB bodies, 5 deliveries per
// second per address with bursts of 20, 4096 tracked addresses, delivery ids
// remembered for 10 minutes.
func DefaultReceiverOptions() ReceiverOptions {
	return ReceiverOptions{
		MaxBodyBytes:  1 << 20,
		RatePerSecond: 5,
		RateBurst:     20,
		MaxSources:    4096,
		DedupeWindow:  10 * time.Minute,
		Logger:        logr.Discard(),
	}
}

// Hook is one forge a Receiver serves: its provider and its webhook secret
// (an HMAC key or a shared token, as the provider uses it).
type Hook struct {
	Provider Provider
	Secret   string
}

// Receiver is the http.Handler for POST /hooks/<name>, one path per Hook,
// named after its provider. For each delivery it checks, in order: the path (404), the
// method (405), the body size (413), the signature (401; 429 once the source
// has spent its budget of rejected deliveries), the source's rate of
// authenticated deliveries (429), a repeated delivery id (202, ignored), the
// event and its JSON (400 when malformed; 202 and ignored for other events,
// other branches and other repositories); then it calls emit and answers 202.
// A delivery without a signature header is refused before its body is read.
// A panic in a handler is recovered and answered 500.
type Receiver struct {
	opts    ReceiverOptions
	emit    func(Event)
	limiter *limiter // authenticated deliveries
	rejects *limiter // deliveries that failed the signature check
	seen    *dedupe
	hooks   map[string]Hook // by provider name
	repos   map[string]bool
	limited atomic.Int64 // deliveries refused by the rate limiter
}

// NewReceiver returns a Receiver that passes accepted events to emit. emit
// runs on the request's goroutine and must not block: fire a Trigger or queue
// the event.
func NewReceiver(opts ReceiverOptions, emit func(Event)) (*Receiver, error) {
	hooks, err := hooksByName(opts.Hooks)
	if err != nil {
		return nil, err
	}
	if emit == nil {
		return nil, fmt.Errorf("%w: a webhook receiver needs an event handler", ErrInvalid)
	}
	opts = opts.withDefaults()
	r := &Receiver{
		opts: opts, emit: emit,
		limiter: newLimiter(opts.RatePerSecond, opts.RateBurst, opts.MaxSources),
		rejects: newLimiter(opts.RatePerSecond, opts.RateBurst, opts.MaxSources),
		seen:    newDedupe(opts.DedupeWindow, 1024),
		hooks:   hooks,
		repos:   map[string]bool{},
	}
	for _, repo := range opts.Repos {
		r.repos[strings.ToLower(repo)] = true
	}
	return r, nil
}

// hooksByName indexes the hooks that have a secret by their provider's name.
func hooksByName(list []Hook) (map[string]Hook, error) {
	hooks, seen := map[string]Hook{}, map[string]bool{}
	for _, h := range list {
		if h.Provider == nil {
			return nil, fmt.Errorf("%w: a webhook hook without a provider", ErrInvalid)
		}
		if seen[h.Provider.Name()] {
			return nil, fmt.Errorf("%w: webhook hook %q given twice", ErrInvalid, h.Provider.Name())
		}
		seen[h.Provider.Name()] = true
		if h.Secret != "" {
			hooks[h.Provider.Name()] = h
		}
	}
	if len(hooks) == 0 {
		return nil, fmt.Errorf("%w: a webhook receiver needs at least one secret", ErrInvalid)
	}
	return hooks, nil
}

func (o ReceiverOptions) withDefaults() ReceiverOptions {
	d := DefaultReceiverOptions()
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = d.MaxBodyBytes
	}
	if o.RatePerSecond <= 0 {
		o.RatePerSecond = d.RatePerSecond
	}
	if o.RateBurst <= 0 {
		o.RateBurst = d.RateBurst
	}
	if o.MaxSources <= 0 {
		o.MaxSources = d.MaxSources
	}
	if o.DedupeWindow <= 0 {
		o.DedupeWindow = d.DedupeWindow
	}
	if o.Logger.GetSink() == nil {
		o.Logger = d.Logger
	}
	return o
}

// hook returns the hook served at path, or nil.
func (r *Receiver) hook(path string) *Hook {
	name, ok := strings.CutPrefix(strings.TrimSuffix(path, "/"), "/hooks/")
	if !ok {
		return nil
	}
	if h, ok := r.hooks[name]; ok {
		return &h
	}
	return nil
}

// ServeHTTP implements http.Handler.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			r.opts.Logger.Error(fmt.Errorf("panic: %v", p), "webhook handler panicked", "path", req.URL.Path)
			reply(w, http.StatusInternalServerError, "internal error")
		}
	}()
	status, msg := r.serve(w, req)
	if status >= 400 {
		r.logRejected(req, status, msg)
	}
	reply(w, status, msg)
}

// logRejected logs a rejected delivery with what identifies it (never a secret, a
// signature or the body). Rate-limited deliveries are logged at the 1st, 2nd, 4th,
// 8th... one with their count, so that a flood cannot flood the log.
func (r *Receiver) logRejected(req *http.Request, status int, msg string) {
	keys := []any{"path", req.URL.Path, "remote", remoteHost(req), "status", status, "reason", msg}
	if h := r.hook(req.URL.Path); h != nil {
		keys = append(keys, "event", h.Provider.EventType(req.Header), "delivery", h.Provider.DeliveryID(req.Header))
	}
	if status == http.StatusTooManyRequests {
		n := r.limited.Add(1)
		if n&(n-1) != 0 {
			return
		}
		keys = append(keys, "rateLimited", n)
	}
	r.opts.Logger.Info("rejected a webhook delivery", keys...)
}

// serve runs the checks in order and returns the answer.
func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) (int, string) {
	hook := r.hook(req.URL.Path)
	switch {
	case hook == nil:
		return http.StatusNotFound, "no such hook"
	case req.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		return http.StatusMethodNotAllowed, "POST only"
	case req.ContentLength > r.opts.MaxBodyBytes:
		return http.StatusRequestEntityTooLarge, "body too large"
	case !hook.Provider.Signed(req.Header):
		return r.unauthorized(w, req, ErrNoSignature)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.opts.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, "body too large"
	case err != nil:
		return http.StatusBadRequest, "failed to read the body"
	}
	if err := hook.Provider.Verify(hook.Secret, req.Header, body); err != nil {
		return r.unauthorized(w, req, err)
	}
	if !r.limiter.allow(remoteHost(req), time.Now()) {
		return rateLimited(w)
	}
	return r.handle(hook.Provider, req, body)
}

// unauthorized answers a delivery that failed the signature check: 401 while its
// source has budget for rejected deliveries left, 429 beyond.
func (r *Receiver) unauthorized(w http.ResponseWriter, req *http.Request, err error) (int, string) {
	if !r.rejects.allow(remoteHost(req), time.Now()) {
		return rateLimited(w)
	}
	return http.StatusUnauthorized, err.Error()
}

func rateLimited(w http.ResponseWriter) (int, string) {
	w.Header().Set("Retry-After", "1")
	return http.StatusTooManyRequests, "rate limited"
}

// handle parses an authenticated delivery and emits its event.
func (r *Receiver) handle(p Provider, req *http.Request, body []byte) (int, string) {
	id := p.DeliveryID(req.Header)
	if id != "" && !r.seen.first(p.Name()+"\x00"+id, time.Now()) {
		return http.StatusAccepted, "ignored: delivery already received"
	}
	payload, err := formPayload(req.Header, body)
	if err != nil {
		return http.StatusBadRequest, err.Error()
	}
	ev, err := p.Parse(p.EventType(req.Header), payload)
	var ignored *IgnoredError
	switch {
	case errors.As(err, &ignored):
		return http.StatusAccepted, "ignored: " + ignored.Why
	case err != nil:
		return http.StatusBadRequest, "malformed payload: " + err.Error()
	}
	if why := r.filter(ev); why != "" {
		return http.StatusAccepted, "ignored: " + why
	}
	r.emit(withDelivery(ev, id))
	return http.StatusAccepted, "accepted"
}

// filter says why an event is not for this cairn, or "".
func (r *Receiver) filter(ev Event) string {
	if len(r.repos) > 0 && !r.repos[strings.ToLower(ev.Repository().String())] {
		return "repository not tracked"
	}
	if p, ok := ev.(Push); ok && r.opts.Branch != "" && p.Branch != r.opts.Branch {
		return "branch not tracked"
	}
	return ""
}

func withDelivery(ev Event, id string) Event {
	switch e := ev.(type) {
	case Push:
		e.Delivery = id
		return e
	case PullRequest:
		e.Delivery = id
		return e
	}
	return ev
}

func reply(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}
