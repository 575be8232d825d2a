package render

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomizeSlots bounds the kustomize builds running at once in this process
// (RenderKustomize), those past their deadline included (a build cannot be
// interrupted in-process; Renderer.Render builds in a worker process, killed at
// the deadline).
var kustomizeSlots = make(chan struct{}, boundedSlots())

// RenderKustomize builds the kustomize directory req.KustomizePath of req.Source
// (relative to the repository root; "." is the root itself) in this process with
// kustomize's own library (sigs.k8s.io/kustomize/api, as Flux's
// kustomize-controller does), hermetically: only the files of the repository, read
// into memory first (the kustomization directories it reaches, within
// Limits.MaxModuleBytes); no remote bases or URLs, no Helm charts, no exec or
// container functions (builtin plugins only), loads restricted to each
// kustomization's directory. A directory without a kustomization file builds as
// one that lists its YAML files. The result is bounded as a CUE render is (the
// deadline Limits.Timeout, MaxObjects, MaxBytes); namespaced objects without a
// namespace get req.Namespace. Values are not part of a kustomize build.
//
// A build cannot be interrupted in-process: at the deadline RenderKustomize
// returns RenderTimeout and the build runs on, holding one of max(4,
// GOMAXPROCS) slots, without a memory budget. Renderer.Render builds the same
// files with the same restrictions in a worker process, which is killed at the
// deadline and bounded by Limits.Memory.
func RenderKustomize(ctx context.Context, req Request) (*Result, error) {
	limits := req.Limits.withDefaults()
	res, err := runBounded(ctx, limits, kustomizeSlots, "kustomize build", func() (*Result, error) {
		return buildKustomize(req, limits)
	})
	if err != nil {
		return nil, fmt.Errorf("kustomize directory %s: %w", req.KustomizePath, err)
	}
	return res, nil
}

func buildKustomize(req Request, limits Limits) (*Result, error) {
	in, err := stageKustomize(req, limits)
	if err != nil {
		return nil, err
	}
	raw, err := runKrusty(in.dir, in.files, limits)
	if err != nil {
		return nil, err
	}
	return assemble(raw, req.Namespace, in.digest, nil)
}

// stagedKustomize is what a kustomize build reads: the files below the
// kustomization directories it reaches (repository-relative paths), with the
// synthesized kustomizations, and their digest.
type stagedKustomize struct {
	dir    string // the directory built, cleaned
	files  map[string][]byte
	digest string
}

// stageKustomize reads what the build of req.KustomizePath reads, refusing
// what would leave the repository or run a program (see kustomizeInputs).
func stageKustomize(req Request, limits Limits) (*stagedKustomize, error) {
	if len(req.Values) > 0 && string(req.Values) != "{}" && string(req.Values) != "null" {
		return nil, newError(ReasonRenderFailed, "values are not available for kustomize directories: a kustomize build takes no values (put the change in an overlay: a patch, images, replicas or a configMapGenerator)")
	}
	dir, err := cleanLocalPath(req.KustomizePath)
	if err != nil {
		return nil, err
	}
	in, err := findKustomizeInputs(req.Source, dir)
	if err != nil {
		return nil, err
	}
	files, err := in.load(limits.MaxModuleBytes)
	if err != nil {
		return nil, err
	}
	return &stagedKustomize{dir: dir, files: files, digest: kustomizeDigest(files)}, nil
}

// runKrusty builds dir from files (repository-relative paths) in memory with
// kustomize's own library: builtin plugins only, loads restricted to each
// kustomization's directory (krusty's defaults); it runs in this process or in
// a render worker, and reads nothing else.
func runKrusty(dir string, files map[string][]byte, limits Limits) ([]rawObject, error) {
	mem := filesys.MakeFsInMemory()
	for p, data := range files {
		if err := mem.WriteFile("/"+p, data); err != nil {
			return nil, fmt.Errorf("failed to stage %s for kustomize: %w", p, err)
		}
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, path.Join("/", dir))
	if err != nil {
		if strings.Contains(err.Error(), "external plugins disabled") {
			return nil, newError(ReasonRenderFailed, "%v (only kustomize's builtin generators and transformers are available: no exec or container functions)", err)
		}
		return nil, newError(ReasonRenderFailed, "%v", err)
	}
	return kustomizeObjects(m, dir, limits)
}

// load reads the files below every root, with the synthesized kustomizations,
// within maxBytes, by repository-relative path.
func (in *kustomizeInputs) load(maxBytes int64) (map[string][]byte, error) {
	files := map[string][]byte{}
	var total int64
	for _, root := range in.roots {
		err := fs.WalkDir(in.fsys, root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || files[p] != nil {
				return err
			}
			if err := irregular(d, p); err != nil {
				return err
			}
			data, err := readCapped(in.fsys, p, p, maxFileBytes)
			if err != nil {
				return err
			}
			if total += int64(len(data)); total > maxBytes {
				return newError(ReasonLimitExceeded, "kustomize directory %s is too large: the files below its kustomizations exceed maxModuleBytes (%d bytes)", in.roots[0], maxBytes)
			}
			files[p] = data
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	maps.Copy(files, prefixed(in.synthesized, "kustomization.yaml"))
	return files, nil
}

// prefixed maps each directory of byDir to dir/name.
func prefixed(byDir map[string][]byte, name string) map[string][]byte {
	out := make(map[string][]byte, len(byDir))
	for dir, data := range byDir {
		out[path.Join(dir, name)] = data
	}
	return out
}

// kustomizeDigest is "sha256:<hex>" over the staged files, by path.
func kustomizeDigest(files map[string][]byte) string {
	h := sha256.New()
	for _, p := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(files[p]))
		h.Write(files[p])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// kustomizeObjects turns the build's resources into raw objects within the limits.
func kustomizeObjects(m resmap.ResMap, dir string, limits Limits) ([]rawObject, error) {
	col := &collector{limits: limits}
	for _, r := range m.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, newError(ReasonInvalidObject, "%s: %s %s: %v", dir, r.GetKind(), r.GetName(), err)
		}
		key := fmt.Sprintf("%s: %s %s", dir, r.GetKind(), strings.TrimPrefix(r.GetNamespace()+"/"+r.GetName(), "/"))
		if err := col.append(rawObject{key: key, data: data}); err != nil {
			return nil, err
		}
	}
	return col.objects, nil
}
