package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/format"
	cuejson "cuelang.org/go/encoding/json"
)

// timoniValuesFile holds a Timoni module's default values.
const timoniValuesFile = "values.cue"

// mergeTimoniValues returns the module's files with the instance's values
// merged into values.cue as `timoni build --values` merges a values file (see
// mergeTimoni): the module's default `values` (values.cue compiled alone) and
// the instance's values, in the order the instance declares them, are merged
// as CUE values and the result, printed as Timoni prints it, replaces
// values.cue. The order of the fields is CUE's for that merge, so a module that
// hashes its config (a checksum annotation) gets the hash `timoni build` gives.
// Without values (none, null or {}) the files are used unchanged, as `timoni
// build` without a values file uses them.
func mergeTimoniValues(src *moduleSource) (map[string][]byte, error) {
	ctx := cuecontext.New()
	user, err := timoniOverlay(ctx, src.timoni.Values)
	if err != nil || !user.Exists() {
		return src.files, err
	}
	base, err := timoniDefaults(ctx, src.files[timoniValuesFile], src.display+timoniValuesFile)
	if err != nil {
		return nil, err
	}
	merged := mergeTimoni(user, base)
	if err := merged.Err(); err != nil {
		e := fromCUE(ReasonRenderFailed, err)
		e.Err = fmt.Errorf("failed to merge the values over the module's defaults as Timoni merges them: %w (a list merges element by element with the default list, so it may not be longer than the default)", e.Err)
		return nil, e
	}
	files := maps.Clone(src.files)
	files[timoniValuesFile] = fmt.Appendf(nil, "package %s\nvalues: %v", timoniPackage, merged)
	return files, nil
}

// timoniOverlay compiles the instance's values, a JSON object, as Timoni
// compiles a values file: `values: {...}` with its fields in the order they are
// written (numbers as written, so an int stays an int and a float a float). It
// returns a value that does not exist for no values (none, null or {}).
func timoniOverlay(ctx *cue.Context, data []byte) (cue.Value, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return cue.Value{}, nil
	}
	if len(data) > maxValuesBytes {
		return cue.Value{}, &Error{Reason: ReasonLimitExceeded, File: valuesFile, Err: fmt.Errorf("values are larger than %d bytes", maxValuesBytes)}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return cue.Value{}, &Error{Reason: ReasonRenderFailed, File: valuesFile, Err: fmt.Errorf("values must be a JSON object: %v", err)}
	}
	if len(obj) == 0 {
		return cue.Value{}, nil
	}
	src, err := timoniValuesSource(data)
	if err != nil {
		return cue.Value{}, err
	}
	v := ctx.CompileBytes(src).LookupPath(valuesPath) // no file name, as for values.cue

	if err := v.Err(); err != nil {
		return cue.Value{}, fromCUE(ReasonRenderFailed, err)
	}
	return v, nil
}

// timoniValuesSource writes JSON values as the CUE values file Timoni makes of a
// JSON values file: `values: {...}`, fields in the order of data.
func timoniValuesSource(data []byte) ([]byte, error) {
	expr, err := cuejson.Extract(valuesFile, data)
	if err != nil {
		return nil, &Error{Reason: ReasonRenderFailed, File: valuesFile, Err: fmt.Errorf("failed to read the values: %w", err)}
	}
	f := &ast.File{Filename: valuesFile, Decls: []ast.Decl{&ast.Field{Label: ast.NewIdent("values"), Value: expr}}}
	src, err := format.Node(f)
	if err != nil {
		return nil, newError(ReasonRenderFailed, "failed to write the values: %w", err)
	}
	return src, nil
}

// timoniDefaults is the `values` of values.cue, compiled on its own as Timoni
// reads it; a module without values.cue, or without values in it, has none.
func timoniDefaults(ctx *cue.Context, data []byte, display string) (cue.Value, error) {
	if data == nil {
		return ctx.CompileString("{}"), nil
	}
	// Compiled without a file name, as Timoni compiles it: CUE orders the fields
	// of a merged struct by their source positions, file names included.
	v := ctx.CompileBytes(data)
	if err := v.Err(); err != nil {
		return cue.Value{}, inFile(fromCUE(ReasonRenderFailed, err), display)
	}
	values := v.LookupPath(valuesPath)
	if !values.Exists() {
		return ctx.CompileString("{}"), nil
	}
	if err := values.Err(); err != nil {
		return cue.Value{}, inFile(fromCUE(ReasonRenderFailed, err), display)
	}
	return values, nil
}

// inFile names file in an error of a source compiled without a file name.
func inFile(e *Error, file string) *Error {
	if e.File == "" {
		e.File = file
	}
	return e
}
