package globs

import (
	"errors"
	"path"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"k8s.io/apimachinery/pkg/api/validate/content"
)

// FuzzOverlap checks the automata against the dialects' own matchers on a string s,
// and Overlap against both: an example matches both patterns, and when s matches
// both, Overlap finds an example.
func FuzzOverlap(f *testing.F) {
	for _, seed := range [][3]string{
		{"team-a-*", "team-a-pay", "team-a-pay"}, {"team-[^a]*", "*-x", "team-b-x"},
		{"tenants/team-a/**", "tenants/*/app.yaml", "tenants/team-a/app.yaml"},
		{"a/**/b", "**/b", "a/b"}, {"a/**/**", "a/**/", "a"}, {"{a,b/c}/d", "b/**", "b/c/d"},
		{"a/[!b]/c", "a/?/c", "a/x/c"}, {"**/", "**", "x"}, {`a\/b`, "a/*", "a/b"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, a, b, s string) {
		if len(a) > 64 || len(b) > 64 || len(s) > 64 || !utf8.ValidString(a+b+s) {
			return
		}
		checkNamespace(t, a, b, s)
		checkPath(t, a, b, s)
	})
}

func checkNamespace(t *testing.T, a, b, s string) {
	if !validNamespacePattern(a) || !validNamespacePattern(b) {
		return
	}
	if len(content.IsDNS1123Label(s)) == 0 && accepts(compileNamespace(a), s) != pathMatch(a, s) {
		t.Fatalf("namespace pattern %q on %q: automaton %v, path.Match %v", a, s, !pathMatch(a, s), pathMatch(a, s))
	}
	example, ok, decided := timedOverlap(t, Namespace, a, b)
	if !decided {
		return
	}
	if ok && (!pathMatch(a, example) || !pathMatch(b, example) || len(content.IsDNS1123Label(example)) > 0) {
		t.Fatalf("%q and %q: example %q is not a namespace both match", a, b, example)
	}
	if !ok && len(content.IsDNS1123Label(s)) == 0 && pathMatch(a, s) && pathMatch(b, s) {
		t.Fatalf("%q and %q: no overlap found, yet both match %q", a, b, s)
	}
}

func checkPath(t *testing.T, a, b, s string) {
	if !validPathPattern(a) || !validPathPattern(b) {
		return
	}
	if clean(s) {
		as, err := expandBraces(a, MaxAlternatives)
		// Exact without braces; with them, doublestar's end-of-name shortcuts can miss
		// a match the automata see (the witness is then refused by verify), never the
		// other way round.
		model, real := modelMatches(as, s), doublestarMatch(a, s)
		if err == nil && (model != real) && (real || !strings.ContainsAny(a, "{}")) {
			t.Fatalf("path glob %q on %q: automaton %v, doublestar %v", a, s, !doublestarMatch(a, s), doublestarMatch(a, s))
		}
	}
	example, ok, decided := timedOverlap(t, Path, a, b)
	if !decided {
		return
	}
	if ok && (!doublestarMatch(a, example) || !doublestarMatch(b, example) || !clean(example)) {
		t.Fatalf("%q and %q: example %q is not a clean path both match", a, b, example)
	}
	// Exact without braces. With braces, doublestar can refuse the shortest example
	// the automata find while matching a longer one: the Platform-level check may then
	// miss an overlap, which the file-by-file refusal still catches.
	if !ok && !strings.ContainsAny(a+b, "{}") && clean(s) && doublestarMatch(a, s) && doublestarMatch(b, s) {
		t.Fatalf("%q and %q: no overlap found, yet both match %q", a, b, s)
	}
}

// timedOverlap is Overlap's answer, and whether it decided (a glob too complex to
// decide is refused at the Platform: nothing more to check).
func timedOverlap(t *testing.T, d Dialect, a, b string) (example string, ok, decided bool) {
	start := time.Now()
	example, ok, err := Overlap(d, a, b)
	if time.Since(start) > 5*time.Second {
		t.Fatalf("%q and %q took %v", a, b, time.Since(start))
	}
	if err != nil {
		// Only a glob too complex to decide has no answer: the Platform is refused, saying so.
		if !errors.Is(err, ErrTooComplex) {
			t.Fatalf("%q and %q: %v", a, b, err)
		}
		return "", false, false
	}
	return example, ok, true
}

func modelMatches(patterns []string, s string) bool {
	for _, p := range patterns {
		if accepts(compilePath(p), s) {
			return true
		}
	}
	return false
}

func validNamespacePattern(p string) bool {
	_, err := path.Match(p, "")
	return p != "" && err == nil
}

func validPathPattern(p string) bool {
	return p != "" && !strings.HasPrefix(p, "/") && doublestar.ValidatePattern(p) && Unsupported(p) == ""
}

// clean reports whether s is a clean relative path.
func clean(s string) bool {
	if s == "" {
		return false
	}
	for _, seg := range strings.Split(s, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}
