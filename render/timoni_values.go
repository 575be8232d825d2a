package render

import (
	"bytes"
	"encoding/json"
	"errors"
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
// merged into values.cue as Timoni merges a values file: the module's default
// `values` (values.cue alone, which must be concrete) and the instance's
// values are decoded and merged, the instance's winning at every leaf (maps
// merge key by key, lists and scalars are replaced whole), and the merged
// values replace values.cue. Without values (none, null or {}) the files are
// used unchanged, as `timoni build` without a values file uses them.
func mergeTimoniValues(src *moduleSource) (map[string][]byte, error) {
	user, err := decodeTimoniValues(src.timoni.Values)
	if err != nil || len(user) == 0 {
		return src.files, err
	}
	base, err := timoniDefaults(src.files[timoniValuesFile], src.display+timoniValuesFile)
	if err != nil {
		return nil, err
	}
	data, err := timoniValuesSource(mergeValues(base, user))
	if err != nil {
		return nil, err
	}
	files := maps.Clone(src.files)
	files[timoniValuesFile] = data
	return files, nil
}

// decodeTimoniValues decodes the instance's values, a JSON object (numbers
// kept as written, so an int stays an int and a float a float).
func decodeTimoniValues(data []byte) (map[string]any, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return nil, nil
	}
	if len(data) > maxValuesBytes {
		return nil, &Error{Reason: ReasonLimitExceeded, File: valuesFile, Err: fmt.Errorf("values are larger than %d bytes", maxValuesBytes)}
	}
	var out map[string]any
	if err := decodeJSON(data, &out); err != nil {
		return nil, &Error{Reason: ReasonRenderFailed, File: valuesFile, Err: fmt.Errorf("values must be a JSON object: %w", err)}
	}
	return out, nil
}

func decodeJSON(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	return d.Decode(v)
}

// timoniDefaults decodes the `values` of values.cue, compiled on its own as
// Timoni reads it; a module without values.cue has no defaults.
func timoniDefaults(data []byte, display string) (map[string]any, error) {
	if data == nil {
		return map[string]any{}, nil
	}
	v := cuecontext.New().CompileBytes(data, cue.Filename(display))
	if err := v.Err(); err != nil {
		return nil, fromCUE(ReasonRenderFailed, err)
	}
	values := v.LookupPath(valuesPath)
	if !values.Exists() {
		return map[string]any{}, nil
	}
	raw, err := values.MarshalJSON()
	if err != nil {
		e := fromCUE(ReasonNotConcrete, err)
		e.Err = fmt.Errorf("%w (the default values must be concrete for the instance's values to be merged over them, as Timoni merges them)", e.Err)
		return nil, e
	}
	var out map[string]any
	if err := decodeJSON(raw, &out); err != nil {
		return nil, &Error{Reason: ReasonRenderFailed, File: display, Err: errors.New("values must be a struct")}
	}
	return out, nil
}

// mergeValues merges overlay over base as Timoni does: a key in both whose
// values are both maps is merged, anything else of overlay replaces base's.
// Neither argument is modified.
func mergeValues(base, overlay map[string]any) map[string]any {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range overlay {
		bm, baseIsMap := out[k].(map[string]any)
		om, overlayIsMap := v.(map[string]any)
		if baseIsMap && overlayIsMap {
			out[k] = mergeValues(bm, om)
			continue
		}
		out[k] = v
	}
	return out
}

// timoniValuesSource writes merged values as the CUE file that replaces
// values.cue: `package main` and `values: {...}`, built from data.
func timoniValuesSource(values map[string]any) ([]byte, error) {
	data, err := json.Marshal(values)
	if err != nil {
		return nil, newError(ReasonRenderFailed, "failed to encode the merged values: %w", err)
	}
	expr, err := cuejson.Extract(timoniValuesFile, data)
	if err != nil {
		return nil, newError(ReasonRenderFailed, "failed to encode the merged values: %w", err)
	}
	f := &ast.File{Filename: timoniValuesFile, Decls: []ast.Decl{
		&ast.Package{Name: ast.NewIdent(timoniPackage)},
		&ast.Field{Label: ast.NewIdent("values"), Value: expr},
	}}
	src, err := format.Node(f)
	if err != nil {
		return nil, newError(ReasonRenderFailed, "failed to write the merged values: %w", err)
	}
	return src, nil
}
