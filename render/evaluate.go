package render

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/load"
	cuejson "cuelang.org/go/encoding/json"
)

const (
	moduleRoot = "/module"
	depsRoot   = "/deps/"
	// valuesFile names the instance's values in error positions.
	valuesFile = "values.json"
	// maxValuesBytes caps the JSON values of one instance.
	maxValuesBytes = 4 << 20
)

// The fields of the module contract.
var (
	instancePath = cue.ParsePath("instance")
	valuesPath   = cue.ParsePath("values")
	objectsPath  = cue.ParsePath("objects")
)

// renderInput is what one render adds to a prepared module; it holds no
// reference to the network or the host file system.
type renderInput struct {
	name      string
	namespace string
	values    []byte
	limits    Limits
}

func newRenderInput(req Request, limits Limits) renderInput {
	return renderInput{name: req.Name, namespace: req.Namespace, values: req.Values, limits: limits}
}

// rawObject is one exported object with the position of its definition.
type rawObject struct {
	key  string
	data []byte
	pos  position
}

type position struct {
	file      string
	line, col int
}

// moduleFS is the loader's file system: the module's files under
// moduleRoot and those of its dependencies under depsRoot.
func moduleFS(src *moduleSource, deps *depSet) *memFS {
	files := make(map[string][]byte, len(src.files)+len(deps.files))
	for name, data := range src.files {
		files[strings.TrimPrefix(moduleRoot, "/")+"/"+name] = data
	}
	for name, data := range deps.files {
		files[name] = data
	}
	return newMemFS(files)
}

// displayFunc maps loader paths to the names used in errors: files of the
// module get the module's prefix, files of dependencies "<module>@<version>/".
func displayFunc(prefix string) func(string) string {
	return func(p string) string {
		if rest, ok := strings.CutPrefix(p, moduleRoot+"/"); ok {
			return prefix + rest
		}
		if p == moduleRoot {
			return strings.TrimSuffix(prefix, "/")
		}
		if rest, ok := strings.CutPrefix(p, depsRoot); ok {
			return rest
		}
		return strings.TrimPrefix(p, "/")
	}
}

// evaluate adds instance and values to the prepared module, builds it in ctx
// and exports objects.
func evaluate(p *preparedModule, ctx *cue.Context, in renderInput) ([]rawObject, error) {
	if p.timoni {
		return evaluateTimoni(p, ctx, in.limits)
	}
	v, err := p.build(ctx, in)
	if err != nil {
		return nil, err
	}
	if !v.LookupPath(instancePath).Exists() {
		return nil, rootError(v) // cairn adds instance: only a broken package lacks it
	}
	for _, p := range []cue.Path{instancePath, valuesPath} {
		if err := v.LookupPath(p).Validate(); err != nil {
			return nil, fromCUE(ReasonRenderFailed, err)
		}
	}
	return export(v, in.limits)
}

// prepare loads the module's package from the in-memory file system only
// (tool and test files are not loaded). `instance` and `values` are added
// later, by preparedModule.build, as a syntax tree built from data: the
// values are parsed as JSON and the names are string literals, never CUE
// source text. Adding them before the first evaluation (rather than with
// FillPath afterwards) spares an evaluation of the whole package with its
// default values.
func prepare(src *moduleSource, deps *depSet, pins *pinner) (*preparedModule, error) {
	if src.timoni != nil {
		return prepareTimoni(src)
	}
	fsys := moduleFS(src, deps)
	cfg := &load.Config{
		FS:         fsys,
		Dir:        moduleRoot,
		ModuleRoot: moduleRoot,
		FromFSPath: displayFunc(src.display),
		Registry:   &loadRegistry{deps: deps, fsys: fsys},
		Env:        []string{},
	}
	inst := load.Instances([]string{"."}, cfg)[0]
	if inst.Err != nil {
		return nil, loadError(inst.Err)
	}
	return newPreparedModule(inst, src.digest, pins.warnings(), fsys.files), nil
}

// loadError classifies a loader error: imports that resolve nowhere are
// ModuleNotFound, the rest (syntax errors, mostly) RenderFailed.
func loadError(err error) *Error {
	msg := err.Error()
	if strings.Contains(msg, "cannot get absolute path for FS") {
		e := fromCUE(ReasonRenderFailed, err)
		e.Err = fmt.Errorf("%w: a package vendored under cue.mod/gen, cue.mod/pkg or cue.mod/usr is imported, which cue and local modules cannot do (list the module in cue.mod/module.cue deps instead)", e.Err)
		return e
	}
	for _, s := range []string{"cannot find package", "no dependency found", "not listed in the deps", "cannot find module"} {
		if strings.Contains(msg, s) {
			return fromCUE(ReasonModuleNotFound, err)
		}
	}
	return fromCUE(ReasonRenderFailed, err)
}

// inputFile is the file cairn adds to the module's package:
//
//	instance: {name: "<name>", namespace: "<namespace>"}
//	values: <the values JSON>
func (in renderInput) inputFile(pkg string) (*ast.File, error) {
	decls := []ast.Decl{
		&ast.Package{Name: ast.NewIdent(pkg)},
		&ast.Field{Label: ast.NewIdent("instance"), Value: ast.NewStruct(
			"name", ast.NewString(in.name),
			"namespace", ast.NewString(in.namespace),
		)},
	}
	values, err := valuesExpr(in.values)
	if err != nil {
		return nil, err
	}
	if values != nil {
		decls = append(decls, &ast.Field{Label: ast.NewIdent("values"), Value: values})
	}
	return &ast.File{Filename: valuesFile, Decls: decls}, nil
}

// valuesExpr parses the instance's values, which must be a JSON object (or
// empty or null for none).
func valuesExpr(data []byte) (ast.Expr, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return nil, nil
	}
	if len(data) > maxValuesBytes {
		return nil, &Error{Reason: ReasonLimitExceeded, File: valuesFile, Err: fmt.Errorf("values are larger than %d bytes", maxValuesBytes)}
	}
	expr, err := cuejson.Extract(valuesFile, data)
	if err != nil {
		return nil, fromCUE(ReasonRenderFailed, fmt.Errorf("values are not valid JSON: %w", err))
	}
	if _, ok := expr.(*ast.StructLit); !ok {
		return nil, &Error{Reason: ReasonRenderFailed, File: valuesFile, Err: errors.New("values must be a JSON object")}
	}
	return expr, nil
}

// export validates and marshals each object, enforcing the caps as it goes
// so that an oversized render stops at the cap.
func export(root cue.Value, limits Limits) ([]rawObject, error) {
	entries, err := objectEntries(root)
	if err != nil {
		return nil, err
	}
	return exportEntries(entries, limits)
}

// exportEntries exports the objects within the caps.
func exportEntries(entries []entry, limits Limits) ([]rawObject, error) {
	if len(entries) > limits.MaxObjects {
		return nil, newError(ReasonLimitExceeded, "module renders %d objects, more than MaxObjects (%d)", len(entries), limits.MaxObjects)
	}
	out := make([]rawObject, 0, len(entries))
	var total int64
	for i, e := range entries {
		data, err := exportOne(e)
		if err != nil {
			return nil, err
		}
		if total += int64(len(data)); total > limits.MaxBytes {
			return nil, newError(ReasonLimitExceeded, "rendered objects exceed MaxBytes (%d bytes): %d bytes after %d of %d objects", limits.MaxBytes, total, i+1, len(entries))
		}
		out = append(out, rawObject{key: e.key, data: data, pos: positionOf(e.value)})
	}
	return out, nil
}

// rootError explains why a field of the contract is missing.
func rootError(root cue.Value) *Error {
	if err := root.Err(); err != nil {
		return fromCUE(ReasonRenderFailed, err)
	}
	return newError(ReasonRenderFailed, "module has no objects field")
}

type entry struct {
	key   string
	value cue.Value
}

// objectEntries lists the objects: the fields of a struct (keyed by label) or
// the elements of a list (keyed by index).
func objectEntries(root cue.Value) ([]entry, error) {
	objs := root.LookupPath(objectsPath)
	if !objs.Exists() {
		return nil, rootError(root)
	}
	if err := objs.Err(); err != nil {
		return nil, fromCUE(ReasonRenderFailed, err)
	}
	var out []entry
	switch objs.IncompleteKind() {
	case cue.StructKind:
		it, err := objs.Fields()
		if err != nil {
			return nil, fromCUE(ReasonRenderFailed, err)
		}
		for it.Next() {
			out = append(out, entry{key: "objects." + it.Selector().String(), value: it.Value()})
		}
	case cue.ListKind:
		it, err := objs.List()
		if err != nil {
			return nil, fromCUE(ReasonRenderFailed, err)
		}
		for i := 0; it.Next(); i++ {
			out = append(out, entry{key: fmt.Sprintf("objects[%d]", i), value: it.Value()})
		}
	default:
		return nil, fromCUE(ReasonRenderFailed, fmt.Errorf("objects must be a struct or a list, not %v", objs.IncompleteKind()))
	}
	return out, nil
}

// exportOne validates one object (errors first, then concreteness) and
// marshals it to JSON.
func exportOne(e entry) ([]byte, error) {
	if err := e.value.Validate(); err != nil {
		return nil, fromCUE(ReasonRenderFailed, err)
	}
	if err := e.value.Validate(cue.Concrete(true), cue.Final()); err != nil {
		return nil, fromCUE(ReasonNotConcrete, err)
	}
	if k := e.value.Kind(); k != cue.StructKind {
		return nil, atPosition(newError(ReasonInvalidObject, "object %s is a %v, not a struct", e.key, k), positionOf(e.value))
	}
	data, err := e.value.MarshalJSON()
	if err != nil {
		return nil, fromCUE(ReasonNotConcrete, err)
	}
	return data, nil
}

func positionOf(v cue.Value) position {
	p := v.Pos()
	if !p.IsValid() {
		return position{}
	}
	return position{file: p.Filename(), line: p.Line(), col: p.Column()}
}

func atPosition(e *Error, p position) *Error {
	e.File, e.Line, e.Column = p.file, p.line, p.col
	return e
}
