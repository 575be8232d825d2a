// Package render owns turning a CUE module and an instance's values into an
// ordered list of Kubernetes objects, hermetically and within bounds.
//
// # The module contract
//
// A module is a CUE package. cairn fills two fields and reads one:
//
//	package podinfo
//
//	#config: {                      // the schema of the values, with defaults
//		replicas: *1 | int & >=0
//		image:    *"ghcr.io/stefanprodan/podinfo:6.7.0" | string
//	}
//	instance: {name: string, namespace: string} // filled by cairn
//	values:   #config                           // unified with the instance's values
//	objects: {                                  // a struct keyed by any id, or a list
//		deployment: {apiVersion: "apps/v1", kind: "Deployment", metadata: name: instance.name}
//	}
//
// `instance` and `values` are added to the package as a syntax tree built from
// data (the values parsed as JSON, the names as string literals), never by
// splicing text into CUE source, before the first evaluation. Values the closed
// #config rejects fail with RenderFailed naming the field. Each object is then
// validated as concrete and final and exported; only `values`, `instance` and
// `objects` are evaluated. An object needs apiVersion, kind and metadata.name.
// Namespaced objects without a namespace get the instance's namespace
// (built-in cluster-scoped kinds and kinds of cluster-scoped CRDs in the same
// render have none: a namespace they carry is dropped, as kubectl drops it). Objects are ordered by stage (CustomResourceDefinition,
// Namespace, ServiceAccount and RBAC, the rest), then kind, namespace, name
// and apiVersion; Result.Digest is the sha256 of their canonical JSON.
// CONTRACT.md beside this file is the user-facing version of this section.
//
// # Local and registry modules
//
// A local module (Request.LocalPath) is a directory of the repository and is
// its own module root: its cue.mod/module.cue is used, and when it has none
// cairn supplies `module: "cairn.local/<dir>@v0"` at LanguageVersion with
// every pinned catalog as a dependency. Directories above it are never read.
// A registry module (Request.CUEModule) is fetched through CUE's module
// registry client and cache (cuelang.org/go/mod/modregistry, modcache),
// configured only from Request.Registry (never CUE_REGISTRY, CUE logins or
// docker config), with the Registry's credentials in memory for its own host
// only, into Request.CacheDir. With a ModuleVerifier, every module tag is
// resolved and verified through it and pulled by the verified digest; the
// cache is kept apart per verification policy (VerifyID).
//
// # Helm charts
//
// RenderChart renders an OCI Helm chart archive (pulled by digest and
// verified by the caller) with the Helm SDK, hermetic and bounded; its doc
// comment is the chart contract. Its output is ordered, namespaced and
// digested exactly like a CUE module's. Renderer.RenderChart renders the same
// in one of the Renderer's worker processes, within the memory budget and
// killed at the deadline.
//
// # Timoni modules
//
// Request.Timoni renders a module written for Timoni unchanged, as `timoni
// build` does (TimoniModule; render/CONTRACT.md has the contract): package
// main loaded with the name, namespace, moduleVersion and kubeVersion tags,
// the instance's values merged over values.cue's defaults as Timoni merges
// them, the objects of timoni.apply. It is read, checked, capped and evaluated
// in a worker like a local module; as CUE's loader reads the packages
// vendored under cue.mod/gen and cue.mod/pkg only from an operating-system
// path, the worker loads the module's files from an overlay on a fresh empty
// directory of its own (nothing else is there to read).
//
// # Catalogs
//
// Every dependency of the module on a catalog module (Request.Catalogs) is
// rewritten to the pinned version, in the main module's cue.mod/module.cue and
// in the module file of every dependency. A module requiring a newer catalog
// than the pinned one fails with CatalogSkew under SkewPolicy Refuse, and is
// rendered with the pinned version and a warning under Warn.
//
// # Hermetic
//
// The CUE loader reads only an in-memory file system (cue/load Config.FS)
// holding the module's regular files and the files of its dependencies, which
// are all fetched before evaluation: evaluation touches neither the disk nor
// the network. Symbolic links and irregular files are refused (UnsafeModule),
// @embed attributes are checked before evaluation and may only name files
// inside the module (UnsafeModule otherwise), dependency replacements and
// cue.mod/local-module.cue are not used, and _tool.cue files (the only place
// `cue cmd` tasks and tool/exec can live) are never loaded.
//
// # Bounded
//
// Each render has a deadline (Limits.Timeout) covering fetch and evaluation,
// and a memory budget (Limits.Memory). CUE evaluation can be neither
// interrupted nor bounded in memory in-process, so renders are evaluated in
// worker processes: re-executions of the running binary (cairn itself; see
// ServeWorkerIfRequested), at most RendererOptions.MaxEvaluations, started on
// demand and reused. The worker watches its own memory every few
// milliseconds and exits past the budget: the render fails with
// LimitExceeded. At the deadline the parent kills the worker: the render
// fails with RenderTimeout and nothing runs on. A dead worker is replaced and
// fails only its own render. Fetching, signature verification and registry
// credentials stay in the calling process, which sends a worker the files of
// the module and its dependencies when it does not have them prepared yet,
// over a small newline-delimited JSON protocol on its stdin and stdout.
// Kustomize builds (Request.KustomizePath) run in the workers too: the
// calling process reads and checks the files the build may read and sends
// them; the worker runs krusty on them in memory. The workers are shared
// between tenants (Request.Tenant, see RendererOptions) so that one tenant's
// renders cannot keep another's waiting past its deadline.
// RendererOptions.InProcess evaluates in the calling process instead (for
// tests of evaluation), as RenderKustomize and RenderChart do: there an evaluation past its deadline runs on in its
// goroutine, within MaxEvaluations + MaxAbandoned, and no budget applies.
// Limits.MaxObjects and Limits.MaxBytes cap the number of objects and the
// size of their exported JSON; the export stops at the first object over a
// cap. Limits.MaxModuleBytes caps the bytes of a local module's files that a
// render reads (its CUE files and the files they @embed; other files are
// never read and do not count).
//
// # Prepared modules
//
// Each worker (or an InProcess Renderer) keeps the modules it has prepared:
// pinned, with their dependencies fetched, and loaded (parsed and resolved) from the in-memory
// file system, without instance and values. A later render of the same module
// copies the loaded instances, adds its own instance and values and
// evaluates, and gives the same objects, digest, errors and warnings as a
// first render. A local module is still read on every render and is known by
// the digest of its files (and its directory, which names its files in
// errors); a registry module by path@version, which CUE's cache never fetches
// twice; both also by the pinned catalogs, the skew policy, the registry and
// the cache directory. Only modules that loaded are kept, most recently used
// first, within RendererOptions.MaxPreparedModules and MaxPreparedBytes (in
// a worker also within a quarter of the render's memory budget).
// A prepared module is never modified after it is made, so renders share it
// from any goroutine. CUE contexts are not shared: each serves one render at
// a time, and a few quick renders in turn so that the builtin packages they
// import are compiled once for them (see contextPool).
//
// Errors are *Error values carrying a Reason (ReasonRenderFailed and the
// others) and, where CUE gives one, the file and line, relative to the
// repository for local modules and as "<module>@<version>/<file>" for
// registry modules.
package render
