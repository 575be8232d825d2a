package lease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Name is the name of the Lease, and the controller's leader-election ID.
const Name = "cairn-sync"

// Options configure how the Lease is taken and kept.
type Options struct {
	// Namespace is cairn's namespace, where the Lease lives.
	Namespace string
	// Identity is the holder recorded in the Lease ("" means NewIdentity()).
	Identity string
	// Wait bounds how long Hold waits for another holder to release or lose the Lease.
	Wait time.Duration
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader-election
	// timings: how long a Lease is valid without renewal, how long the holder keeps
	// retrying a renewal before it gives up, and how often it tries.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Log receives the leader election's own messages (default: none).
	Log logr.Logger
}

// DefaultOptions returns controller-runtime's leader-election timings (15s/10s/2s)
// and a wait of one minute.
func DefaultOptions(namespace string) Options {
	return Options{Namespace: namespace, Wait: time.Minute,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
}

// NewIdentity is "<host>_<uuid>", where host is $POD_NAME when set (as the downward
// API gives it), else the hostname.
func NewIdentity() string {
	host := os.Getenv("POD_NAME")
	if host == "" {
		host, _ = os.Hostname()
	}
	return host + "_" + string(uuid.NewUUID())
}

// HeldError says the Lease stayed with another holder for the whole wait.
type HeldError struct {
	Namespace, Holder string
	// RenewTime is when the holder last renewed the Lease (zero: unknown).
	RenewTime time.Time
	Waited    time.Duration
}

func (e *HeldError) Error() string {
	renewed := "never renewed"
	if !e.RenewTime.IsZero() {
		renewed = fmt.Sprintf("last renewed %s (%s ago)", e.RenewTime.UTC().Format(time.RFC3339),
			time.Since(e.RenewTime).Round(time.Second))
	}
	return fmt.Sprintf("another sync holds Lease %s/%s: holder %s, %s; gave up after waiting %s (see --lock-timeout)",
		e.Namespace, Name, e.Holder, renewed, e.Waited)
}

// ErrLost says the Lease was lost while fn ran (renewals failed for RenewDeadline):
// fn's context was cancelled so that nothing went on unguarded.
var ErrLost = errors.New("lost the sync Lease: the sync stopped")

// Hold takes the Lease, runs fn with a context that ends when ctx does or when the
// Lease is lost, and releases the Lease as soon as fn returns. It waits at most
// opts.Wait for another holder; a holder that stopped renewing loses the Lease after
// its LeaseDuration.
func Hold(ctx context.Context, cfg *rest.Config, opts Options, fn func(context.Context) error) error {
	if err := checkNamespace(ctx, cfg, opts.Namespace); err != nil {
		return err
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	c, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("failed to create Lease client: %w", err)
	}
	return hold(ctx, c, opts, fn)
}

// hold is Hold with the Lease client given.
func hold(ctx context.Context, c coordinationv1client.LeasesGetter, opts Options, fn func(context.Context) error) error {
	h := &holder{opts: opts, lock: &takenLock{LeaseLock: newLock(c, opts)}, fn: fn,
		acquired: make(chan struct{}), done: make(chan struct{})}
	return h.run(ctx)
}

// Lock returns the Lease lock of opts (the Lease Name in opts.Namespace, held as
// opts.Identity or NewIdentity()), for a leader elector of its own, such as the
// controller's manager: a controller and `cairn sync` exclude each other.
func Lock(cfg *rest.Config, opts Options) (resourcelock.Interface, error) {
	c, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create Lease client: %w", err)
	}
	return newLock(c, opts), nil
}

func newLock(c coordinationv1client.LeasesGetter, opts Options) *resourcelock.LeaseLock {
	id := opts.Identity
	if id == "" {
		id = NewIdentity()
	}
	lock := &resourcelock.LeaseLock{Client: c, LockConfig: resourcelock.ResourceLockConfig{Identity: id}}
	lock.LeaseMeta.Namespace, lock.LeaseMeta.Name = opts.Namespace, Name
	return lock
}

// checkNamespace says clearly when cairn's namespace is missing; a client that may
// not read Namespaces finds out from the Lease itself.
func checkNamespace(ctx context.Context, cfg *rest.Config, namespace string) error {
	c, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("failed to create Namespace client: %w", err)
	}
	_, err = c.Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	switch {
	case err == nil, apierrors.IsForbidden(err):
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("cairn's namespace %s does not exist: run `cairn install` (it creates it) or pass --namespace", namespace)
	}
	return fmt.Errorf("failed to read cairn's namespace %s: %w", namespace, err)
}

// electorLogger is what client-go's leader election logs to: opts.Log at debug level.
func electorLogger(ctx context.Context, opts Options) context.Context {
	return klog.NewContext(ctx, opts.Log.V(1))
}
