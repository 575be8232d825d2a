package render

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// kustomizeInputs finds what a build of the kustomize directory dir (inside the
// repository fsys) reads, before kustomize runs: the directories of every
// kustomization it reaches (dir and the local directories its resources and
// components name, transitively), each of which kustomize may read anywhere below
// (it loads with LoadRestrictionsRootOnly). It refuses what would reach outside the
// repository or run a program: remote bases and URLs (kustomize would run git or
// fetch over HTTP), paths that climb out of the repository, and Helm charts
// (kustomize would run the helm binary).
type kustomizeInputs struct {
	fsys fs.FS
	// roots are the kustomization directories reached, repository-relative, sorted.
	roots []string
	// synthesized holds a kustomization.yaml for each root that has none (a plain
	// directory of YAML), listing its manifests as Flux's kustomize-controller does.
	synthesized map[string][]byte
	seen        map[string]bool
}

// findKustomizeInputs walks the kustomizations reachable from dir.
func findKustomizeInputs(fsys fs.FS, dir string) (*kustomizeInputs, error) {
	in := &kustomizeInputs{fsys: fsys, synthesized: map[string][]byte{}, seen: map[string]bool{}}
	if err := in.visit(dir, "module.kustomize.path"); err != nil {
		return nil, err
	}
	slices.Sort(in.roots)
	return in, nil
}

// KustomizeRoots returns the kustomization directories a build of dir reads (dir
// first reached, then the local bases and components, transitively), sorted, or the
// error that build would be refused with. A change below any of them changes the
// build's input.
func KustomizeRoots(fsys fs.FS, dir string) ([]string, error) {
	dir, err := cleanLocalPath(dir)
	if err != nil {
		return nil, err
	}
	in, err := findKustomizeInputs(fsys, dir)
	if err != nil {
		return nil, err
	}
	return in.roots, nil
}

func (in *kustomizeInputs) visit(dir, via string) error {
	if in.seen[dir] {
		return nil
	}
	in.seen[dir] = true
	if st, err := fs.Stat(in.fsys, dir); err != nil || !st.IsDir() {
		return newError(ReasonModuleNotFound, "kustomize directory %s (named by %s) is not a directory in the repository", dir, via)
	}
	in.roots = append(in.roots, dir)
	file, data, err := kustomizationFile(in.fsys, dir)
	if err != nil {
		return err
	}
	if file == "" {
		return in.synthesize(dir)
	}
	var k types.Kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		return &Error{Reason: ReasonRenderFailed, File: file, Err: fmt.Errorf("not a valid kustomization: %w", err)}
	}
	k.FixKustomization()
	if err := refuseUnavailable(file, &k); err != nil {
		return err
	}
	for _, ref := range slices.Concat(k.Resources, k.Components) {
		if err := in.follow(file, dir, ref); err != nil {
			return err
		}
	}
	return nil
}

// follow visits ref, an entry of resources or components of file (in dir), when it
// names a directory; a file entry is read by kustomize inside dir's subtree.
func (in *kustomizeInputs) follow(file, dir, ref string) error {
	target, err := inRepository(file, dir, ref)
	if err != nil {
		return err
	}
	if st, err := fs.Stat(in.fsys, target); err == nil && st.IsDir() {
		return in.visit(target, file)
	}
	return nil
}

// inRepository resolves ref relative to dir, refusing paths that leave the
// repository (refuseUnavailable has refused remote references already).
func inRepository(file, dir, ref string) (string, error) {
	if path.IsAbs(ref) {
		return "", newError(ReasonUnsafeModule, "%s: %q is an absolute path: only paths inside the repository are available", file, ref)
	}
	target := path.Join(dir, ref)
	if target == ".." || strings.HasPrefix(target, "../") {
		return "", newError(ReasonUnsafeModule, "%s: %q is outside the repository", file, ref)
	}
	return target, nil
}

// refuseUnavailable refuses the fields of a kustomization that would reach
// outside the repository or run a program.
func refuseUnavailable(file string, k *types.Kustomization) error {
	if len(k.HelmCharts) > 0 || len(k.HelmChartInflationGenerator) > 0 || k.HelmGlobals != nil {
		return newError(ReasonUnsafeModule,
			"%s: helmCharts is not available: kustomize would run the helm program; declare the chart as an instance with module.chart", file)
	}
	for _, ref := range kustomizationPaths(k) {
		if remoteReference(ref) {
			return remoteRefused(file, ref)
		}
	}
	return nil
}

func remoteRefused(file, ref string) error {
	return newError(ReasonUnsafeModule,
		"%s: %q is a remote reference: remote bases, files and URLs are not available (cairn builds kustomize directories from the repository only, without git or HTTP); vendor it into the repository", file, ref)
}

// kustomizationPaths returns the file paths a kustomization names besides its
// resources and components (whose directories are followed): patches, generator
// sources, transformer configurations, the OpenAPI schema.
func kustomizationPaths(k *types.Kustomization) []string {
	paths := slices.Concat(k.Resources, k.Components, k.Crds, k.Configurations,
		notInline(k.Generators), notInline(k.Transformers), notInline(k.Validators))
	for _, p := range slices.Concat(k.Patches, k.PatchesJson6902) {
		paths = append(paths, p.Path)
	}
	for _, p := range k.PatchesStrategicMerge {
		paths = append(paths, notInline([]string{string(p)})...)
	}
	for _, r := range k.Replacements {
		paths = append(paths, r.Path)
	}
	paths = append(paths, k.OpenAPI["path"])
	for _, g := range k.ConfigMapGenerator {
		paths = append(paths, generatorPaths(g.GeneratorArgs)...)
	}
	for _, g := range k.SecretGenerator {
		paths = append(paths, generatorPaths(g.GeneratorArgs)...)
	}
	return slices.DeleteFunc(paths, func(p string) bool { return p == "" })
}

// generatorPaths returns the files of a generator's files and envs ("key=path" or "path").
func generatorPaths(g types.GeneratorArgs) []string {
	var paths []string
	for _, f := range g.FileSources {
		if _, p, ok := strings.Cut(f, "="); ok {
			f = p
		}
		paths = append(paths, f)
	}
	return append(append(paths, g.EnvSources...), g.EnvSource)
}

// notInline drops the entries that are inline YAML rather than paths.
func notInline(entries []string) []string {
	return slices.DeleteFunc(slices.Clone(entries), func(e string) bool { return strings.Contains(e, "\n") })
}

// remoteReference reports whether kustomize would treat ref as remote: a URL
// (ssh, https, http, file; optionally after "git::"), a scp-like user@host:path, or
// the github.com shorthand (kustomize's own rules, in its internal git package).
func remoteReference(ref string) bool {
	r := strings.ToLower(strings.TrimSpace(ref))
	r = strings.TrimPrefix(r, "git::")
	for _, scheme := range []string{"ssh://", "https://", "http://", "file://"} {
		if strings.HasPrefix(r, scheme) {
			return true
		}
	}
	if strings.HasPrefix(r, "github.com/") || strings.HasPrefix(r, "github.com:") {
		return true
	}
	user, _, found := strings.Cut(r, "@")
	return found && !strings.Contains(user, "/")
}

// kustomizationFile returns the kustomization file of dir and its contents, or
// "" when dir has none; two of them is an error, as in kustomize.
func kustomizationFile(fsys fs.FS, dir string) (string, []byte, error) {
	var found []string
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if st, err := fs.Stat(fsys, path.Join(dir, name)); err == nil && !st.IsDir() {
			found = append(found, path.Join(dir, name))
		}
	}
	switch len(found) {
	case 0:
		return "", nil, nil
	case 1:
		data, err := fs.ReadFile(fsys, found[0])
		if err != nil {
			return "", nil, fmt.Errorf("failed to read %s: %w", found[0], err)
		}
		return found[0], data, nil
	}
	return "", nil, newError(ReasonRenderFailed, "%s has more than one kustomization file: %s", dir, strings.Join(found, ", "))
}

// synthesize writes a kustomization for a plain directory of YAML: its .yaml and
// .yml files, and the subdirectories that have a kustomization of their own (not
// walked into), as Flux does for a path without one.
func (in *kustomizeInputs) synthesize(dir string) error {
	var resources []string
	err := fs.WalkDir(in.fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		if d.IsDir() && p != dir {
			file, _, err := kustomizationFile(in.fsys, p)
			if err != nil || file == "" {
				return err
			}
			resources = append(resources, rel)
			if err := in.visit(p, dir); err != nil {
				return err
			}
			return fs.SkipDir // its own kustomization says what it holds
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			resources = append(resources, rel)
		}
		return nil
	})
	if err != nil {
		return err
	}
	data, err := yaml.Marshal(types.Kustomization{
		TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		Resources: resources,
	})
	if err != nil {
		return err
	}
	in.synthesized[dir] = data
	return nil
}
