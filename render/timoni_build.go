package render

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/load"
)

// The fields of the Timoni module contract.
var (
	timoniPath           = cue.ParsePath("timoni")
	timoniAPIVersionPath = cue.ParsePath("timoni.apiVersion")
	timoniApplyPath      = cue.ParsePath("timoni.apply")
)

// timoniAPIVersion is the only version of Timoni's module API.
const timoniAPIVersion = "v1alpha1"

// timoniPackage is the package at the root of every Timoni module.
const timoniPackage = "main"

// prepareTimoni loads a Timoni module as `timoni build` loads it: package
// main (with DataFiles, as Timoni sets it), the tags name and namespace and the tag variables
// moduleVersion and kubeVersion, after the user's values were merged into
// values.cue (see mergeTimoniValues).
//
// CUE's loader reads packages vendored under cue.mod/gen, cue.mod/pkg and
// cue.mod/usr only from an operating system path, not from an fs.FS: the
// files are given to it as an overlay on a fresh empty directory of this
// process, which holds nothing else and is removed once the package is loaded,
// so that nothing but the module's own files can be read.
func prepareTimoni(src *moduleSource) (*preparedModule, error) {
	files, err := mergeTimoniValues(src)
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "cairn-timoni-")
	if err != nil {
		return nil, newError(ReasonRenderFailed, "failed to create the directory of the loader: %w", err)
	}
	defer os.RemoveAll(root)
	inst := load.Instances(nil, timoniLoadConfig(root, files, src.timoni))[0]
	if inst.Err != nil {
		return nil, hostPaths(loadError(inst.Err), root, src.display)
	}
	p := newPreparedModule(inst, src.digest, nil, files)
	p.timoni, p.root, p.display = true, root, src.display
	return p, nil
}

// timoniLoadConfig is the loader configuration of `timoni build`, on files
// overlaid at root.
func timoniLoadConfig(root string, files map[string][]byte, b *timoniBuild) *load.Config {
	overlay := make(map[string]load.Source, len(files))
	for name, data := range files {
		overlay[filepath.Join(root, filepath.FromSlash(name))] = load.FromBytes(data)
	}
	tagVar := func(s string) load.TagVar {
		return load.TagVar{Func: func() (ast.Expr, error) { return ast.NewString(s), nil }}
	}
	return &load.Config{
		Dir:        root,
		ModuleRoot: root,
		Overlay:    overlay,
		Package:    timoniPackage,
		DataFiles:  true,
		Env:        []string{},
		Registry:   &loadRegistry{deps: newDepSet(), fsys: newMemFS(map[string][]byte{})},
		Tags:       []string{"name=" + b.Name, "namespace=" + b.Namespace},
		TagVars: map[string]load.TagVar{
			"moduleVersion": tagVar(b.ModuleVersion),
			"kubeVersion":   tagVar(b.KubeVersion),
		},
	}
}

// evaluateTimoni builds a prepared Timoni module and exports the objects of
// its apply sets, set after set in the order the module declares them.
func evaluateTimoni(p *preparedModule, ctx *cue.Context, limits Limits) ([]rawObject, error) {
	v := ctx.BuildInstance(cloneInstances(p.inst, map[*build.Instance]*build.Instance{}))
	if err := v.Err(); err != nil {
		return nil, p.hostPaths(fromCUE(ReasonRenderFailed, err))
	}
	if err := checkTimoniContract(v); err != nil {
		return nil, p.hostPaths(err)
	}
	entries, err := timoniEntries(v)
	if err != nil {
		return nil, p.hostPaths(err)
	}
	objs, err := exportEntries(entries, limits)
	for i := range objs {
		objs[i].pos.file = p.displayName(objs[i].pos.file)
	}
	return objs, p.hostPaths(err)
}

// checkTimoniContract checks the `timoni` field: present, of apiVersion
// v1alpha1, with an `apply` struct.
func checkTimoniContract(v cue.Value) error {
	if !v.LookupPath(timoniPath).Exists() {
		return newError(ReasonRenderFailed, "module has no timoni field: a Timoni module declares timoni: {apiVersion, instance, apply} in its timoni.cue")
	}
	api, err := v.LookupPath(timoniAPIVersionPath).String()
	if err != nil {
		return fromCUE(ReasonRenderFailed, fmt.Errorf("timoni.apiVersion: %w", err))
	}
	if api != timoniAPIVersion {
		return atPosition(newError(ReasonRenderFailed, "timoni.apiVersion %q is not supported, must be %q", api, timoniAPIVersion),
			positionOf(v.LookupPath(timoniAPIVersionPath)))
	}
	apply := v.LookupPath(timoniApplyPath)
	if !apply.Exists() {
		return newError(ReasonRenderFailed, "module has no timoni.apply field: a Timoni module lists its objects in timoni: apply: <set>: [...]")
	}
	if err := apply.Err(); err != nil {
		return fromCUE(ReasonRenderFailed, err)
	}
	return nil
}

// timoniEntries lists the objects of every apply set: "timoni.apply.app[0]".
func timoniEntries(v cue.Value) ([]entry, error) {
	sets, err := v.LookupPath(timoniApplyPath).Fields()
	if err != nil {
		return nil, fromCUE(ReasonRenderFailed, err)
	}
	var out []entry
	for sets.Next() {
		name := "timoni.apply." + sets.Selector().String()
		items, err := sets.Value().List()
		if err != nil {
			return nil, atPosition(newError(ReasonRenderFailed, "%s must be a list of objects: %v", name, err), positionOf(sets.Value()))
		}
		for i := 0; items.Next(); i++ {
			out = append(out, entry{key: fmt.Sprintf("%s[%d]", name, i), value: items.Value()})
		}
	}
	return out, nil
}

// displayName maps a file of the loader's directory to its name in errors.
func (p *preparedModule) displayName(file string) string {
	if rest, ok := strings.CutPrefix(file, p.root+string(filepath.Separator)); ok {
		return p.display + filepath.ToSlash(rest)
	}
	return file
}

// hostPaths replaces the loader's directory by the module's name in an error,
// so that no path of the host appears in it.
func (p *preparedModule) hostPaths(err error) error {
	return hostPaths(err, p.root, p.display)
}

func hostPaths(err error, root, display string) error {
	var e *Error
	if err == nil || !errors.As(err, &e) {
		return err
	}
	out := *e
	if rest, ok := strings.CutPrefix(out.File, root+string(filepath.Separator)); ok {
		out.File = display + filepath.ToSlash(rest)
	}
	msg := strings.ReplaceAll(e.Err.Error(), root+string(filepath.Separator), display)
	out.Err = errors.New(strings.ReplaceAll(msg, root, strings.TrimSuffix(display, "/")))
	return &out
}
