package render

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"
)

// timoniHint adds to the error of a local CUE module that looks like a Timoni
// module (a timoni.cue at its root declaring `timoni:`) which field cairn
// reads and how to declare it instead: such a module has no `objects`, and
// often imports packages vendored under cue.mod/gen or cue.mod/pkg.
func timoniHint(err error, src *moduleSource) error {
	var e *Error
	if src == nil || src.timoni != nil || !looksLikeTimoni(src.files) || !errors.As(err, &e) {
		return err
	}
	hint := fmt.Sprintf("it looks like a Timoni module (its timoni.cue declares timoni: {apiVersion, instance, apply}), and a local module must have an objects: field: "+
		"declare it as module: {timoni: {path: %s}}", strings.TrimSuffix(src.display, "/"))
	return &Error{Reason: e.Reason, File: e.File, Line: e.Line, Column: e.Column, Err: fmt.Errorf("%w (%s)", e.Err, hint)}
}

// looksLikeTimoni reports whether a module's root has a timoni.cue that
// declares the `timoni` field.
func looksLikeTimoni(files map[string][]byte) bool {
	for name, data := range files {
		if path.Dir(name) == "." && path.Base(name) == "timoni.cue" && bytes.Contains(data, []byte("timoni:")) {
			return true
		}
	}
	return false
}
