package reconciler

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/reconciler/rendercache"
	"cairn.dev/cairn/reconciler/rendertask"
	"cairn.dev/cairn/reconciler/report"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/sign"
)

// Renderer renders one instance; render.Renderer is the implementation.
type Renderer interface {
	Render(ctx context.Context, req render.Request) (*render.Result, error)
}

// Options configure an Engine.
type Options struct {
	// Path is the directory of the repository that holds the declarations.
	Path string
	// Repository is the source URL without credentials, recorded in the Platform status.
	Repository string
	// Concurrency bounds the instances rendered at once (and checked for drift).
	Concurrency int
	// ApplyConcurrency bounds the instances applied at once and the inputs the
	// revision step writes at once. It is apart from Concurrency because an apply
	// mostly waits on the API server and holds little: bounded by the renders'
	// memory estimate, a controller under its memory limit applied half as many
	// instances at once as the CLI, and took a quarter longer over a cold fleet.
	ApplyConcurrency int
	// DefaultTimeout bounds an instance that sets no timeout.
	DefaultTimeout time.Duration
	// HealthWait bounds how long a sync waits for one instance's objects to become
	// Current before it records the instance as Progressing and moves on; a later
	// sync (its retry is due within seconds) checks them again, until the instance's
	// timeout, counted from the apply, has passed. Zero waits the whole timeout in line
	// (a one-off sync that reports final health).
	HealthWait time.Duration
	// RenderJob is how render Jobs run (Platform.spec.render.mode: Job): the image,
	// the command of `cairn render-task` in it, pull Secrets, backoff (see
	// docs/render-jobs.md).
	RenderJob rendertask.JobOptions
	// RenderCacheDir caches CUE modules fetched from registries.
	RenderCacheDir string
	// RenderLimits bound each render.
	RenderLimits render.Limits
	// Progress receives one line per step of a long sync (nil: none).
	Progress io.Writer
	// Log receives structured logs when the context carries no logger
	// (logr.NewContext): status writes that failed, with instance and revision keys.
	Log logr.Logger
	// Reporter is told about each sync as it happens (nil: nobody).
	Reporter report.Reporter
	// Events records a Kubernetes event (events.k8s.io/v1) on each transition of the
	// Ready condition of a ModuleInstance, the Platform or a Registry, and on each
	// removal of an instance (nil: none). See report.RecordTransition.
	Events events.EventRecorder
	// Metrics keeps cairn's Prometheus metrics (nil: none); it is also told what the
	// Reporter is.
	Metrics *report.MetricsReporter
	// Namespace is cairn's own namespace, where the Secrets and ConfigMaps that
	// Registries name live ("" means DefaultNamespace).
	Namespace string
	// Secrets, when set, is read instead of cairn's namespace (offline renders).
	Secrets SecretSource
	// RegistryConfig is a docker config the user passed explicitly; it gives
	// credentials to Registries that name no Secret. Never read implicitly.
	RegistryConfig []byte
	// Sharded: the instance reconciles run on the controller's queue, in the replicas
	// that hold their shards (PrepareInstances). Sync then runs the revision step,
	// waits until every instance it affects has attempted its input (read from the
	// CRs) and finishes the revision; it reconciles no instance itself.
	Sharded bool
	// Instances, when set, is where a sharded sync and the replicas read the CRs of
	// the instances they wait for (the controller's informer cache); nil: the API
	// server.
	Instances client.Reader
	// Revisions reads a revision of the repository by its SHA (the loop's source):
	// a rollback without render.publish renders the instance at that revision again
	// (nil: such a rollback is not available).
	Revisions func(ctx context.Context, sha string) (Revision, error)
	// Capabilities are what charts see in renders without a cluster (RenderOffline,
	// `cairn render --kube-version --api-versions`); nil is `helm template`'s
	// defaults. Syncs, plans and drift checks give charts the cluster's own.
	Capabilities *render.Capabilities
}

// DefaultOptions returns options that suit a small cluster.
func DefaultOptions() Options {
	return Options{
		Path:             ".",
		Concurrency:      defaultConcurrency(),
		ApplyConcurrency: defaultApplyConcurrency(),
		DefaultTimeout:   5 * time.Minute,
		RenderLimits:     render.DefaultLimits(),
		Log:              logr.Discard(),
	}
}

// Engine runs syncs and plans against one cluster. The CLI and the controller share it,
// so a plan and the sync that follows it can never disagree.
type Engine struct {
	cluster  *Cluster
	renderer Renderer
	cache    *rendercache.Cache
	verifier *sign.Verifier // signature checks, cached by digest across syncs
	opts     Options
	// outside is Options.Reporter without the metrics: where a sharded sync reports
	// the outcomes it reads from the CRs, which the replicas that reconciled them
	// have counted in the metrics already (see ForInstances).
	outside report.Reporter

	// deletedCRs: a sync deleted a ModuleInstance since the last revision step
	// listed them, so the informer cache may still hold it (see revisionStepLive).
	deletedCRs atomic.Bool
	// lastSweep is when the config Secrets of failed render tasks were last swept
	// (Unix nanoseconds; see sweepConfigs).
	lastSweep atomic.Int64

	// refusedDeletes holds the publish Registries that refused a delete: their
	// published renders are no longer collected (see collectPublished).
	refusedDeletes sync.Map

	keyMu    sync.Mutex
	key      []byte // the cluster's digest key (see DigestKeySecret), once read
	localKey []byte // this process's key while the cluster has none (plans)
}

// New returns an engine for cluster.
func New(cluster *Cluster, renderer Renderer, opts Options) *Engine {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultOptions().Concurrency
	}
	if opts.ApplyConcurrency <= 0 {
		opts.ApplyConcurrency = DefaultOptions().ApplyConcurrency
	}
	if opts.DefaultTimeout <= 0 {
		opts.DefaultTimeout = DefaultOptions().DefaultTimeout
	}
	if opts.Path == "" {
		opts.Path = "."
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if opts.Reporter == nil {
		opts.Reporter = report.Nop{}
	}
	outside := opts.Reporter
	if opts.Metrics != nil {
		opts.Reporter = report.Reporters(opts.Reporter, opts.Metrics)
	}
	cacheDir := ""
	if opts.RenderCacheDir != "" {
		cacheDir = filepath.Join(opts.RenderCacheDir, "renders")
	}
	return &Engine{cluster: cluster, renderer: renderer, cache: rendercache.New(cacheDir), verifier: &sign.Verifier{}, opts: opts, outside: outside}
}

// WatchHealth makes this engine's health waits read workloads from watches that run
// until ctx ends (see Cluster.WatchHealth). The controller and a polling `cairn sync`
// call it; `cairn sync --once` does not (its one wait would pay for a LIST of every
// workload cairn labels), and plans wait for nothing.
func (e *Engine) WatchHealth(ctx context.Context) error { return e.cluster.WatchHealth(ctx) }

// outsideReporter is where a sharded sync reports the outcomes it reads from the
// CRs (see outside).
func (e *Engine) outsideReporter() report.Reporter {
	if e.outside == nil {
		return report.Nop{}
	}
	return e.outside
}

// logger is the logger of ctx (set with logr.NewContext), else Options.Log.
func (e *Engine) logger(ctx context.Context) logr.Logger {
	if l, err := logr.FromContext(ctx); err == nil {
		return l
	}
	return e.opts.Log
}

// progress writes one line of progress for long syncs.
func (e *Engine) progress(format string, args ...any) {
	if e.opts.Progress != nil {
		fmt.Fprintf(e.opts.Progress, format+"\n", args...)
	}
}

// defaultConcurrency bounds the renders in flight by memory: a render's objects (and
// Helm's and kustomize's work, which runs in-process; CPU-bound CUE evaluation is
// bounded separately by the renderer's workers) at about 16 MiB a render, between 4
// and 64. The budget is memoryBudget's.
func defaultConcurrency() int {
	return int(min(64, max(4, memoryBudget()/(16<<20))))
}

// defaultApplyConcurrency bounds the applies in flight by memory too, at about
// 4 MiB an instance: an apply holds the placed objects and the API server's answers
// without managedFields (a cold fleet of 1000 four-object apps, 64 applying at once,
// peaked at 215 MiB for the whole process, about 2 MiB an instance above its base),
// between 4 and 64; the 512 MiB of the controller's Deployment gives 64, as 1 GiB
// does.
func defaultApplyConcurrency() int {
	return int(min(64, max(4, memoryBudget()/(4<<20))))
}

// memoryBudget is GOMEMLIMIT when set, else 1 GiB.
func memoryBudget() int64 {
	budget := debug.SetMemoryLimit(-1)
	if budget <= 0 || budget == math.MaxInt64 {
		budget = 1 << 30
	}
	return budget
}
