package reconciler

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/supply"
	"cairn.dev/cairn/render"
)

// moduleKind is what the engine needs to know of one kind of module (a CUE module
// from a registry, a local CUE module, an OCI Helm chart, a Timoni module, a
// kustomize directory), so that the rest of the engine asks the kind instead of
// checking which field of spec.module is set. moduleKindOf picks the kind of an instance.
type moduleKind interface {
	// label names the kind in metrics: cue, local, helm, timoni, kustomize.
	label() string
	// source is the digest of what the module reads from the repository and the
	// directories that holds ("" and none when it reads none of it).
	source(s *RevisionState) (string, []string)
	// sourceChange says what a change of that source is called in a plan.
	sourceChange() string
	// oci is the OCI artifact the module is pulled from (ok false when none): a
	// chart, or a Timoni module of a URL.
	oci() (ref supply.OCIRef, timoni, ok bool, err error)
	// usesModuleRegistry says whether the render reads the Platform's module
	// registry (a CUE module, or anything but Timoni rendered against catalogs).
	usesModuleRegistry(p cairnv1.PlatformSpec) bool
	// rendersWithRegistry says whether the renderer is given the module registry
	// (CUE modules, local or not: their imports and catalogs come from it).
	rendersWithRegistry() bool
	// request sets the kind's part of a render request; repo is the whole
	// repository, reg the module registry (nil unless rendersWithRegistry).
	request(req *render.Request, repo fs.FS, reg *render.ModuleRegistry)
	// seesCluster says whether the render sees the cluster's capabilities (see
	// clusterCapabilities), and capabilities is the digest of what it sees of c
	// ("" when it sees nothing, or c could not be discovered).
	seesCluster() bool
	capabilities(c *clusterCapabilities) string
	// hooks says whether the module has Helm hooks (a chart).
	hooks() bool
	// registryModule is the module pulled from the module registry by path and
	// version (a CUE module), nil for the others.
	registryModule() *render.CUEModuleRef
}

// moduleType is the label of an instance's kind of module in metrics ("other" when
// spec.module names none).
func moduleType(mi *cairnv1.ModuleInstance) string {
	if k := moduleKindOf(mi); k != nil {
		return k.label()
	}
	return "other"
}

// moduleKindOf is the kind of mi's module; nil when spec.module names none (declarations
// refuse that, so only a CR written by hand gets there).
func moduleKindOf(mi *cairnv1.ModuleInstance) moduleKind {
	switch m := mi.Spec.Module; {
	case m.Chart != nil:
		return chartKind{m: m.Chart}
	case m.Timoni != nil:
		return timoniKind{m: m.Timoni}
	case m.Kustomize != nil:
		return kustomizeKind{m: m.Kustomize}
	case m.Local != nil:
		return localKind{m: m.Local}
	case m.CUE != nil:
		return cueKind{m: m.CUE}
	}
	return nil
}

// noSource, noOCI, noCapabilities and noHooks are the answers of a kind that reads
// nothing of the repository, is not pulled as an OCI artifact, sees nothing of the
// cluster or has no hooks.
type (
	notPulled      struct{}
	noSource       struct{}
	noOCI          struct{}
	noCapabilities struct{}
	noHooks        struct{}
)

func (noSource) source(*RevisionState) (string, []string)       { return "", nil }
func (noSource) sourceChange() string                           { return "" }
func (noOCI) oci() (supply.OCIRef, bool, bool, error)           { return supply.OCIRef{}, false, false, nil }
func (noCapabilities) capabilities(*clusterCapabilities) string { return "" }
func (noCapabilities) seesCluster() bool                        { return false }
func (noHooks) hooks() bool                                     { return false }
func (notPulled) registryModule() *render.CUEModuleRef          { return nil }

// cueKind is a CUE module pulled from the Platform's module registry.
type cueKind struct {
	m *cairnv1.CUEModule
	noSource
	noOCI
	noCapabilities
	noHooks
}

func (k cueKind) registryModule() *render.CUEModuleRef {
	return &render.CUEModuleRef{Path: k.m.Path, Version: k.m.Version}
}

func (cueKind) label() string                                { return "cue" }
func (cueKind) rendersWithRegistry() bool                    { return true }
func (cueKind) usesModuleRegistry(cairnv1.PlatformSpec) bool { return true }
func (k cueKind) request(req *render.Request, _ fs.FS, reg *render.ModuleRegistry) {
	req.Registry = reg
	req.CUEModule = k.registryModule()
}

// localKind is a CUE module in the repository.
type localKind struct {
	m *cairnv1.LocalModule
	noOCI
	noCapabilities
	noHooks
	notPulled
}

func (localKind) label() string                                  { return "local" }
func (localKind) rendersWithRegistry() bool                      { return true }
func (k localKind) source(s *RevisionState) (string, []string)   { return s.linkedModuleDigest(k.m.Path) }
func (localKind) sourceChange() string                           { return "local module changed" }
func (localKind) usesModuleRegistry(p cairnv1.PlatformSpec) bool { return len(p.Catalogs) > 0 }
func (k localKind) request(req *render.Request, _ fs.FS, reg *render.ModuleRegistry) {
	req.Registry = reg
	req.LocalPath = cleanLocal(k.m.Path)
}

// chartKind is an OCI Helm chart: it sees all of the cluster's capabilities and may
// have hooks.
type chartKind struct {
	m *cairnv1.ChartSource
	noSource
	notPulled
}

func (chartKind) label() string             { return "helm" }
func (chartKind) rendersWithRegistry() bool { return false }
func (k chartKind) oci() (supply.OCIRef, bool, bool, error) {
	ref, err := supply.ParseChart(k.m)
	return ref, false, true, err
}
func (chartKind) usesModuleRegistry(cairnv1.PlatformSpec) bool           { return false }
func (chartKind) request(*render.Request, fs.FS, *render.ModuleRegistry) {}
func (chartKind) capabilities(c *clusterCapabilities) string {
	if c == nil || c.err != nil {
		return ""
	}
	return c.digest
}
func (chartKind) hooks() bool       { return true }
func (chartKind) seesCluster() bool { return true }

// timoniKind is a Timoni module, from the repository (path) or pulled from a
// registry (url): it sees the cluster's Kubernetes version and knows no catalogs.
type timoniKind struct {
	m *cairnv1.TimoniModule
	notPulled
}

func (timoniKind) label() string             { return "timoni" }
func (timoniKind) rendersWithRegistry() bool { return false }
func (k timoniKind) source(s *RevisionState) (string, []string) {
	if k.m.Path == "" {
		return "", nil
	}
	return s.linkedModuleDigest(k.m.Path)
}
func (timoniKind) sourceChange() string { return "Timoni module directory changed" }
func (k timoniKind) oci() (supply.OCIRef, bool, bool, error) {
	if k.m.URL == "" {
		return supply.OCIRef{}, false, false, nil
	}
	ref, err := supply.ParseTimoni(k.m)
	return ref, true, true, err
}
func (timoniKind) usesModuleRegistry(cairnv1.PlatformSpec) bool { return false }
func (k timoniKind) request(req *render.Request, _ fs.FS, _ *render.ModuleRegistry) {
	timoniRequest(req, k.m)
}
func (timoniKind) capabilities(c *clusterCapabilities) string {
	if c == nil || c.err != nil {
		return ""
	}
	return digestJSON(map[string]string{"kubeVersion": c.caps.KubeVersion})
}
func (timoniKind) hooks() bool       { return false }
func (timoniKind) seesCluster() bool { return true }

// kustomizeKind is a kustomize directory of the repository, built with what its
// bases and components read anywhere in the repository (as Flux's spec.path).
type kustomizeKind struct {
	m *cairnv1.KustomizeModule
	noOCI
	noCapabilities
	noHooks
	notPulled
}

func (kustomizeKind) label() string             { return "kustomize" }
func (kustomizeKind) rendersWithRegistry() bool { return false }

// source is the digest of the kustomization directories (its bases and components
// too, relative to the repository root, as its path is). A kustomize directory that
// would be refused has no digest: its render says why.
func (k kustomizeKind) source(s *RevisionState) (string, []string) {
	roots, err := render.KustomizeRoots(s.rev.Tree, cleanKustomize(k.m.Path))
	if err != nil {
		return "", nil
	}
	h := sha256.New()
	for _, dir := range roots {
		fmt.Fprintf(h, "%s\x00%s\x00", dir, s.rev.Tree.DigestDir(dir))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), roots
}
func (kustomizeKind) sourceChange() string                           { return "kustomize directory or one of its bases changed" }
func (kustomizeKind) usesModuleRegistry(p cairnv1.PlatformSpec) bool { return len(p.Catalogs) > 0 }
func (k kustomizeKind) request(req *render.Request, repo fs.FS, _ *render.ModuleRegistry) {
	req.Source, req.KustomizePath = repo, cleanKustomize(k.m.Path)
}

var _ = []moduleKind{cueKind{}, localKind{}, chartKind{}, timoniKind{}, kustomizeKind{}}
