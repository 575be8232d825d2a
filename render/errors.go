package render

import (
	"errors"
	"fmt"
	"strings"

	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
)

// Reasons carried by an *Error. They are CamelCase so that the reconciler can
// use them as condition reasons unchanged.
const (
	// ReasonRenderFailed: CUE syntax or evaluation error, or values rejected by
	// the module's #config.
	ReasonRenderFailed = "RenderFailed"
	// ReasonNotConcrete: an object is not concrete (or not final) after evaluation.
	ReasonNotConcrete = "NotConcrete"
	// ReasonLimitExceeded: the output exceeds Limits.MaxObjects or
	// Limits.MaxBytes, or the module source exceeds the module size caps.
	ReasonLimitExceeded = "LimitExceeded"
	// ReasonRenderTimeout: the render did not finish before its deadline.
	ReasonRenderTimeout = "RenderTimeout"
	// ReasonModuleNotFound: the local module directory, the registry module, one
	// of its dependencies or an imported package does not exist.
	ReasonModuleNotFound = "ModuleNotFound"
	// ReasonFetchFailed: the module registry could not be reached or answered
	// with an error other than "not found". Transient: worth a retry.
	ReasonFetchFailed = "FetchFailed"
	// ReasonCatalogSkew: the module requires a newer catalog than the pinned one
	// under SkewPolicy Refuse.
	ReasonCatalogSkew = "CatalogSkew"
	// ReasonInvalidObject: an object lacks apiVersion, kind or metadata.name,
	// is not a struct, or appears twice.
	ReasonInvalidObject = "InvalidObject"
	// ReasonUnsafeModule: the module reaches outside itself (@embed of a parent
	// or absolute path, symlinks, dependency replacements) or its path escapes
	// the repository.
	ReasonUnsafeModule = "UnsafeModule"
	// ReasonVerifyFailed: the verifier refused a module (unsigned, wrongly
	// signed, or its signature could not be checked).
	ReasonVerifyFailed = "VerifyFailed"
)

// Error is the error type returned by Render and PushModule. File is relative
// to the repository root for local modules and of the form
// "<module>@<version>/<file>" for files of registry modules; it is never an
// absolute path on the host.
type Error struct {
	Reason string
	File   string
	Line   int
	Column int
	Err    error
}

// Error formats the error as "file:line:col: message", leaving out the parts
// that are unknown.
func (e *Error) Error() string {
	msg := "<nil>"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	switch {
	case e.File != "" && e.Line > 0 && e.Column > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, msg)
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, msg)
	case e.File != "":
		return fmt.Sprintf("%s: %s", e.File, msg)
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Reason returns the reason of the first *Error in err's chain, or "" when
// there is none.
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// newError returns an *Error without a position.
func newError(reason string, format string, args ...any) *Error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// fromCUE converts a CUE error into an *Error with the position of its first
// error, preferring positions in module files over the values document.
func fromCUE(reason string, err error) *Error {
	if err == nil {
		return nil
	}
	e := &Error{Reason: reason, Err: err}
	var cueErr cueerrors.Error
	if !errors.As(err, &cueErr) {
		return e
	}
	all := cueerrors.Errors(err)
	if len(all) == 0 {
		return e
	}
	group := firstGroup(all)
	e.Err = cueMessage(group, len(all)-len(group))
	e.File, e.Line, e.Column = cuePosition(group)
	if imported := importChain(group[0]); len(imported) > 0 {
		// An import failed: the position is the cause's, in the package
		// imported last, and the message names the imports that led to it.
		last := imported[len(imported)-1]
		e.File, e.Line, e.Column = last.Filename(), last.Line(), last.Column()
		e.Err = fmt.Errorf("%w (imported from %s)", e.Err, positionList(imported[:len(imported)-1]))
	}
	return e
}

// importChain returns the positions of a loader's "import failed" error, from
// the first import to the cause (nil for any other error or a chain of one).
func importChain(e cueerrors.Error) []token.Pos {
	if format, _ := e.Msg(); format != "import failed" {
		return nil
	}
	var out []token.Pos
	for _, p := range cueerrors.Positions(e) {
		if p.IsValid() && p.Filename() != "" && (len(out) == 0 || out[len(out)-1] != p) {
			out = append(out, p)
		}
	}
	if len(out) < 2 {
		return nil
	}
	return out
}

func positionList(ps []token.Pos) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprintf("%s:%d:%d", p.Filename(), p.Line(), p.Column())
	}
	return strings.Join(s, ", ")
}

// firstGroup returns the first error and, when it only announces the errors
// of an empty disjunction ("2 errors in empty disjunction:"), the errors that
// follow it at the same path.
func firstGroup(errs []cueerrors.Error) []cueerrors.Error {
	if !strings.HasSuffix(msgOf(errs[0]), ":") {
		return errs[:1]
	}
	path := pathOf(errs[0])
	n := 1
	for n < len(errs) && pathOf(errs[n]) == path {
		n++
	}
	return errs[:n]
}

// cueMessage is "<path>: <message>" for the group, counting the other errors:
// a full list of CUE errors can be very long.
func cueMessage(group []cueerrors.Error, others int) error {
	msgs := make([]string, len(group))
	for i, e := range group {
		msgs[i] = msgOf(e)
	}
	msg := strings.Join(msgs, " ")
	if len(group) > 2 {
		msg = msgs[0] + " " + strings.Join(msgs[1:], "; ")
	}
	if path := pathOf(group[0]); path != "" {
		msg = path + ": " + msg
	}
	if others > 0 {
		msg = fmt.Sprintf("%s (and %d more errors)", msg, others)
	}
	return errors.New(msg)
}

// msgOf is the message of e without its position, followed by the message of
// the error it wraps, CUE's or not (the loader wraps the cause of "import
// failed", down to a plain error of the file system or the registry). Empty
// messages along the chain are left out, so a cause is never lost behind them.
func msgOf(e cueerrors.Error) string {
	format, args := e.Msg()
	msg := fmt.Sprintf(format, args...)
	u := errors.Unwrap(e)
	if u == nil {
		return msg
	}
	var cause string
	if inner, ok := u.(cueerrors.Error); ok {
		cause = msgOf(inner)
	} else {
		cause = u.Error()
	}
	switch {
	case cause == "":
		return msg
	case msg == "":
		return cause
	}
	return msg + ": " + cause
}

func pathOf(e cueerrors.Error) string { return strings.Join(e.Path(), ".") }

// cuePosition returns the first position of the group outside the values
// document, or else the first one.
func cuePosition(group []cueerrors.Error) (string, int, int) {
	var fallback token.Pos
	for _, e := range group {
		for _, p := range cueerrors.Positions(e) {
			switch {
			case p.Filename() == "":
			case p.Filename() != valuesFile:
				return p.Filename(), p.Line(), p.Column()
			case !fallback.IsValid():
				fallback = p
			}
		}
	}
	if fallback.IsValid() {
		return fallback.Filename(), fallback.Line(), fallback.Column()
	}
	return "", 0, 0
}
