package render

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Limits bound one render. A zero field means its default.
type Limits struct {
	// Timeout is the deadline of the whole render: fetch, load, evaluation
	// and export.
	Timeout time.Duration
	// MaxObjects caps the number of objects a module may render.
	MaxObjects int
	// MaxBytes caps the total size of the exported JSON of the objects.
	MaxBytes int64
	// MaxModuleBytes caps the bytes of a local module's files that a render
	// reads: its CUE files (cue.mod included) and the files they @embed.
	// Other files in the module's directory are not read and do not count.
	MaxModuleBytes int64
	// Memory is the memory budget of the render: the Go heap, stacks and
	// runtime of the worker process that evaluates it (see RendererOptions).
	// A render over it fails with LimitExceeded.
	Memory int64
}

// DefaultLimits returns the limits used for zero fields: 30s, 5000 objects,
// 32 MiB of objects, 16 MiB of module files read, a memory budget of 512 MiB.
func DefaultLimits() Limits {
	return Limits{Timeout: 30 * time.Second, MaxObjects: 5000, MaxBytes: 32 << 20, MaxModuleBytes: 16 << 20, Memory: 512 << 20}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	if l.MaxObjects <= 0 {
		l.MaxObjects = d.MaxObjects
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxModuleBytes <= 0 {
		l.MaxModuleBytes = d.MaxModuleBytes
	}
	if l.Memory <= 0 {
		l.Memory = d.Memory
	}
	return l
}

// Catalog pins the version of a CUE module that every instance renders
// against, e.g. {"example.com/catalog@v0", "v0.3.1"}.
type Catalog struct {
	Module  string
	Version string
}

// ModuleRegistry locates a CUE module registry (an OCI registry speaking the
// CUE module layout). Host "127.0.0.1:5000" with Prefix "cairn-modules" is
// what CUE_REGISTRY calls "127.0.0.1:5000/cairn-modules". Access is anonymous
// unless Username and Password are set; they are given to Host only, in
// memory (never CUE's login file or a docker config).
type ModuleRegistry struct {
	Host      string
	PlainHTTP bool
	Prefix    string
	// Username and Password authenticate to Host (basic auth, or the token
	// exchange of the docker registry protocol).
	Username, Password string
	// CAPEM is a PEM bundle of CAs trusted for Host besides the system roots.
	CAPEM string
	// Timeout bounds each request to Host (0: 30s).
	Timeout time.Duration
	// Verifier, when set, resolves every module tag to a digest and checks
	// its signature before anything of the module is read; the module is
	// then pulled by that digest.
	Verifier ModuleVerifier
	// VerifyID identifies the verification policy (mode and trusted keys):
	// modules cached on disk are kept apart per VerifyID, so that a module
	// fetched under one policy is never used under another unchecked.
	VerifyID string
}

// ModuleVerifier resolves and verifies registry artifacts for the renderer.
type ModuleVerifier interface {
	// ResolveVerified resolves repo:tag on host to the manifest digest to
	// pull, having checked its signature; an error refuses the module.
	ResolveVerified(ctx context.Context, host, repo, tag string) (string, error)
}

// String describes the registry without its credentials.
func (m ModuleRegistry) String() string {
	s := m.Host
	if m.Prefix != "" {
		s += "/" + strings.Trim(m.Prefix, "/")
	}
	return s
}

// GoString describes the registry without its credentials.
func (m ModuleRegistry) GoString() string { return "render.ModuleRegistry{" + m.String() + "}" }

// ModuleRepository returns the OCI repository that holds module path mpath
// (with or without its major version suffix) in reg.
func ModuleRepository(reg ModuleRegistry, mpath string) string {
	base, _, _ := strings.Cut(mpath, "@")
	if prefix := strings.Trim(reg.Prefix, "/"); prefix != "" {
		return prefix + "/" + base
	}
	return base
}

// CUEModuleRef names a module version in the registry, e.g.
// {"example.com/modules/podinfo@v0", "v0.4.0"}.
type CUEModuleRef struct {
	Path    string
	Version string
}

// SkewPolicy values of Request.SkewPolicy.
const (
	SkewWarn   = "Warn"
	SkewRefuse = "Refuse"
)

// Request is one instance to render. Exactly one of LocalPath, CUEModule,
// KustomizePath and Timoni is set.
type Request struct {
	// Name and Namespace identify the instance; they fill the module's
	// `instance` field and Namespace is given to namespaced objects that
	// have none.
	Name, Namespace string
	// Source is the repository tree, read for local modules. A symbolic link in
	// a module is followed when Source can read it (fs.ReadLinkFS) and it stays
	// inside Source and, with Owner, inside the paths of the link's owner.
	Source fs.FS
	// Tenants own the paths of Source their globs match (the others are the
	// platform team's); a symbolic link in a module may only lead to files of
	// the link's owner.
	Tenants []TenantPaths `json:",omitempty"`
	// LocalPath is the module directory inside Source, relative to the
	// repository root ("./modules/x" or "modules/x").
	LocalPath string
	// CUEModule is a module fetched from Registry.
	CUEModule *CUEModuleRef
	// KustomizePath is a kustomize directory inside Source, relative to the
	// repository root ("." for the root), built by RenderKustomize (Values must
	// be empty). Source is then the whole repository, so that the build may read
	// any directory of it, as Flux's spec.path does.
	KustomizePath string
	// Timoni is a Timoni module, from the repository or pulled from a
	// registry; Values are merged over its defaults as Timoni merges them.
	Timoni *TimoniModule
	// Values is the JSON object unified with the module's `values`; nil
	// means none.
	Values []byte
	// Catalogs pins the versions of catalog modules.
	Catalogs []Catalog
	// SkewPolicy is SkewWarn or SkewRefuse ("" means SkewWarn).
	SkewPolicy string
	// Registry serves CUE modules and catalogs; nil means no registry access
	// at all.
	Registry *ModuleRegistry
	// CacheDir holds fetched modules; "" means a directory owned by the
	// Renderer (removed by Close).
	CacheDir string
	// Limits bound the render; zero fields mean DefaultLimits.
	Limits Limits
	// Tenant owns the instance ("" for the platform team's): renders take the
	// Renderer's worker processes in turn by tenant (see RendererOptions). It
	// decides when a render runs, never what it renders.
	Tenant string `json:",omitempty"`
	// Capabilities are what a chart instance's chart sees of the cluster (see
	// ChartRequest); CUE modules do not see them, and their requests leave them
	// nil, so that a render cache keyed by the whole request keeps their renders
	// when the cluster's API versions change.
	Capabilities *Capabilities
}

// TenantPaths are the path globs (doublestar, relative to Request.Source) of
// one tenant.
type TenantPaths struct {
	Name  string
	Paths []string
}

// ownerOf names the tenant whose globs match a path of Source ("" for the
// platform team's), or is nil without tenants.
func ownerOf(tenants []TenantPaths) func(string) string {
	if len(tenants) == 0 {
		return nil
	}
	return func(p string) string {
		for _, t := range tenants {
			for _, glob := range t.Paths {
				if ok, err := doublestar.Match(glob, p); err == nil && ok {
					return t.Name
				}
			}
		}
		return ""
	}
}

// Result is the outcome of a successful render.
type Result struct {
	// Objects are ordered by stage (CRDs, Namespaces, RBAC, the rest), then
	// kind, namespace, name and apiVersion.
	Objects []*unstructured.Unstructured
	// Hooks are a chart's Helm hooks, in the order Helm runs them (see
	// HooksFor); they are not among Objects. CUE modules and kustomize
	// directories have none.
	Hooks []Hook `json:",omitempty"`
	// Digest is "sha256:<hex>" over the canonical JSON of Objects, and of the
	// Hooks when there are any.
	Digest string
	// ModuleDigest is "sha256:<hex>": over the module's files for a local
	// module, the module zip's digest for a registry module.
	ModuleDigest string
	// Warnings are non-fatal findings such as catalog skew under SkewWarn.
	Warnings []string
	// Lookups counts the reads of the live cluster that a chart's `lookup` made
	// (ChartRequest.Lookup): a render that made any depends on the cluster's state,
	// not only on its request, and is not to be cached.
	Lookups int64 `json:",omitempty"`
}

// RendererOptions configures a Renderer.
//
// Renders of every kind (CUE and Timoni modules, kustomize builds, and charts
// through RenderChart) run in worker processes (see ServeWorkerIfRequested):
// at most MaxEvaluations at once, each kept alive and reused by one render
// after another. Renders take the workers in turn by Request.Tenant: a tenant
// that holds a worker never takes the last free one (it stays for another
// tenant; the platform team's renders, Tenant "", may), and a freed worker goes
// to the waiting render of the tenant holding the fewest, then served least
// recently, so that one tenant's renders cannot starve another's. A worker whose memory passes its render's budget
// (Limits.Memory) exits and that render fails with LimitExceeded; a render
// that passes its deadline returns RenderTimeout and its worker is killed;
// either way the worker is replaced, and no other render is affected.
// Fetching, verification and registry credentials stay in the calling
// process, which sends each worker the module's files and the render's input.
//
// With InProcess, evaluations run in the calling process: CUE evaluation
// cannot be interrupted there, so a render that passes its deadline returns
// RenderTimeout but its evaluation runs on until it ends. Such an abandoned
// evaluation moves from the running pool to the abandoned pool, so that it no
// longer delays other renders; when the abandoned pool is full it keeps its
// running slot. Renders wait for a running slot within their own deadline.
// At most MaxEvaluations + MaxAbandoned evaluations exist at once, and no
// memory budget applies.
//
// A Renderer (in InProcess mode) and each worker keep the modules they
// prepared (pinned, fetched and parsed, without instance and values), most
// recently used first, so that the next render of the same module only adds
// its instance and values and evaluates. A local module is known by the
// digest of the files a render reads, so that any change to them prepares it
// again; a registry module by path@version. Both also by the pinned catalogs,
// the skew policy, the registry and the cache directory.
type RendererOptions struct {
	// MaxEvaluations bounds the renders evaluating at once: the worker
	// processes, or with InProcess the evaluations within their deadline.
	MaxEvaluations int
	// MaxAbandoned bounds, with InProcess, the evaluations still running
	// past their deadline that no longer hold a running slot.
	MaxAbandoned int
	// MaxPreparedModules bounds the prepared modules kept; negative keeps
	// none.
	MaxPreparedModules int
	// MaxPreparedBytes bounds their estimated size in memory (source and
	// syntax trees); a larger module is not kept. A worker keeps at most a
	// quarter of its render's memory budget.
	MaxPreparedBytes int64
	// WorkerIdleTimeout ends a worker process that served no render for that
	// long (default 2 minutes; negative: never), so that a long-running sync
	// gives the memory back between commits.
	WorkerIdleTimeout time.Duration
	// InProcess evaluates in the calling process, without memory budgets and
	// without stopping evaluations at their deadline: for tests of the
	// evaluation itself. It must be chosen explicitly.
	InProcess bool
	// MaxWorkerMemory caps the memory budget of a render in a worker process:
	// a render whose Limits.Memory is higher is run with this budget, so the
	// workers never hold more than MaxEvaluations × MaxWorkerMemory together
	// (0: no cap).
	MaxWorkerMemory int64
}

// DefaultRendererOptions returns MaxEvaluations = max(4, GOMAXPROCS),
// MaxAbandoned = MaxEvaluations, MaxPreparedModules = 64,
// MaxPreparedBytes = 256 MiB and WorkerIdleTimeout = 2 minutes, with worker
// processes.
func DefaultRendererOptions() RendererOptions {
	n := max(4, runtime.GOMAXPROCS(0))
	return RendererOptions{MaxEvaluations: n, MaxAbandoned: n, MaxPreparedModules: 64, MaxPreparedBytes: 256 << 20,
		WorkerIdleTimeout: 2 * time.Minute}
}

// Renderer renders CUE modules. It is safe for concurrent use and keeps the
// module registry clients and caches between renders.
type Renderer struct {
	pool *workerPool // worker processes; nil with InProcess
	opts RendererOptions

	slots     chan struct{} // InProcess: evaluations running within their deadline
	abandoned chan struct{} // InProcess: evaluations running past their deadline

	prepared *preparedCache // InProcess: modules ready for evaluation
	contexts *contextPool   // InProcess: CUE contexts for reuse

	mu      sync.Mutex
	caches  map[cacheKey]*moduleCache
	tempDir string
}

// NewRenderer returns a Renderer with DefaultRendererOptions.
func NewRenderer() *Renderer {
	return NewRendererWithOptions(DefaultRendererOptions())
}

// NewRendererWithOptions returns a Renderer with the given options; zero
// fields mean their defaults.
func NewRendererWithOptions(o RendererOptions) *Renderer {
	d := DefaultRendererOptions()
	if o.MaxEvaluations <= 0 {
		o.MaxEvaluations = d.MaxEvaluations
	}
	if o.MaxAbandoned <= 0 {
		o.MaxAbandoned = o.MaxEvaluations
	}
	if o.MaxPreparedModules == 0 {
		o.MaxPreparedModules = d.MaxPreparedModules
	}
	if o.MaxPreparedBytes <= 0 {
		o.MaxPreparedBytes = d.MaxPreparedBytes
	}
	if o.WorkerIdleTimeout == 0 {
		o.WorkerIdleTimeout = d.WorkerIdleTimeout
	}
	r := &Renderer{opts: o, caches: map[cacheKey]*moduleCache{}}
	if !o.InProcess {
		r.pool = newWorkerPool(o.MaxEvaluations, o.WorkerIdleTimeout)
		// Workers end with the Renderer, also when it is dropped unclosed.
		runtime.AddCleanup(r, (*workerPool).close, r.pool)
		return r
	}
	r.slots = make(chan struct{}, o.MaxEvaluations)
	r.abandoned = make(chan struct{}, o.MaxAbandoned)
	r.prepared = newPreparedCache(o.MaxPreparedModules, o.MaxPreparedBytes)
	r.contexts = newContextPool(o.MaxEvaluations)
	return r
}

// Close stops the Renderer's worker processes and removes the cache
// directory it created for requests without a CacheDir.
func (r *Renderer) Close() error {
	if r.pool != nil {
		r.pool.close()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tempDir == "" {
		return nil
	}
	err := os.RemoveAll(r.tempDir)
	r.tempDir = ""
	return err
}

// Render renders one instance: it loads the module (from Source or the
// registry), pins the catalogs, unifies instance and values, evaluates and
// exports the objects within the limits, and orders them. The module's
// pinned, fetched and loaded form is kept (see RendererOptions) and used
// again by renders of the same module version with the same catalogs.
func (r *Renderer) Render(ctx context.Context, req Request) (*Result, error) {
	if req.KustomizePath != "" && r.pool == nil {
		return RenderKustomize(ctx, req)
	}
	if req.KustomizePath != "" {
		return r.renderKustomizeInWorker(ctx, req)
	}
	limits := req.Limits.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, limits.Timeout)
	defer cancel()
	if req.Registry != nil && req.Registry.Verifier != nil {
		// The verifier travels with the render, not with the cached registry
		// clients and prepared modules, which outlive it.
		ctx = context.WithValue(ctx, verifierKey{}, req.Registry.Verifier)
	}

	// Module: read a local one (its files are its identity) or name a
	// registry one, and look for it among the prepared modules.
	pins := newPinner(req.Catalogs, req.SkewPolicy)
	key, local, err := locate(req, pins)
	if err != nil {
		return nil, deadlineOr(ctx, limits, err)
	}
	var out evaluated
	if r.pool != nil {
		out, err = r.renderInWorker(ctx, req, r.capWorkerMemory(limits), key, local, pins)
	} else {
		out, err = r.renderInProcess(ctx, req, limits, key, local, pins)
	}
	if err != nil {
		return nil, timoniHint(err, local)
	}
	return assemble(out.objects, req.Namespace, out.digest, slices.Clone(out.warnings))
}

// loader does what comes before loading a module that is not prepared yet:
// it completes the source, pins the catalogs and fetches the dependencies
// (evaluation has no network). The returned function loads the package.
func (r *Renderer) loader(ctx context.Context, req Request, limits Limits, local *moduleSource, pins *pinner) (func() (*preparedModule, error), error) {
	src, deps, err := r.fetchModule(ctx, req, limits, local, pins)
	if err != nil {
		return nil, err
	}
	return func() (*preparedModule, error) { return prepare(src, deps, pins) }, nil
}

// fetchModule completes the module's source and fetches its dependencies.
func (r *Renderer) fetchModule(ctx context.Context, req Request, limits Limits, local *moduleSource, pins *pinner) (*moduleSource, *depSet, error) {
	if local != nil && local.timoni != nil {
		return local, newDepSet(), nil // read and checked by locateTimoni; no dependencies
	}
	// Source: the module's files, from the repository or the registry.
	src, err := r.source(ctx, req, local)
	if err != nil {
		return nil, nil, deadlineOr(ctx, limits, err)
	}
	// Catalogs: pin the module's catalog dependencies.
	if err := src.pin(pins); err != nil {
		return nil, nil, err
	}
	// Dependencies: fetch them all before evaluation, which has no network.
	deps, err := r.fetchDeps(ctx, req, src.modFile, pins)
	if err != nil {
		return nil, nil, deadlineOr(ctx, limits, err)
	}
	return src, deps, nil
}

// evaluated is the outcome of an evaluation: the exported objects and the
// digest and warnings of the module they came from.
type evaluated struct {
	objects  []rawObject
	digest   string
	warnings []string
}

// ErrWorkersBusy is in the chain of the RenderTimeout of a render whose
// deadline passed while it waited for a worker process: other renders held
// them all, and nothing of its own input was at fault.
var ErrWorkersBusy = errors.New("every render worker was busy with other renders")

// busyError is the RenderTimeout of a render that waited for a worker until
// its deadline.
func busyError(ctx context.Context, limits Limits) *Error {
	if ctx.Err() == context.Canceled {
		return &Error{Reason: ReasonRenderTimeout, Err: context.Canceled}
	}
	return &Error{Reason: ReasonRenderTimeout, Err: fmt.Errorf("render exceeded its deadline (timeout %s) while waiting for a render worker: %w (%w)",
		limits.Timeout, ErrWorkersBusy, ctx.Err())}
}

func timeoutError(ctx context.Context, limits Limits, when string) *Error {
	if ctx.Err() == context.Canceled {
		return &Error{Reason: ReasonRenderTimeout, Err: context.Canceled}
	}
	return newError(ReasonRenderTimeout, "render exceeded its deadline (timeout %s) %s: %w", limits.Timeout, when, ctx.Err())
}

// deadlineOr turns a fetch error caused by the render deadline into
// RenderTimeout.
func deadlineOr(ctx context.Context, limits Limits, err error) error {
	if ctx.Err() != nil && (Reason(err) == ReasonFetchFailed || Reason(err) == "") {
		return timeoutError(ctx, limits, "while fetching modules")
	}
	return err
}
