package globs

import (
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// token is one element of a pattern: a character set read once, a star, or a
// separator.
type token struct {
	kind tokenKind
	p    pred
}

type tokenKind int

const (
	tokOne tokenKind = iota
	tokStar
	tokSlash
)

// tokenize splits a pattern without braces into tokens. Bracket expressions become
// classes decided by match; escapes become the character they escape.
func tokenize(pattern string, bangNegates bool, match func(string, string) bool) []token {
	var out []token
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '\\' && i+1 < len(rs):
			i++
			out = append(out, token{tokOne, lit(rs[i])})
		case r == '*':
			out = append(out, token{kind: tokStar})
		case r == '?':
			out = append(out, token{tokOne, notSlash{}})
		case r == '/':
			out = append(out, token{kind: tokSlash})
		case r == '[':
			end := classEnd(rs, i, bangNegates)
			out = append(out, token{tokOne, class{text: string(rs[i : end+1]), match: match}})
			i = end
		default:
			out = append(out, token{tokOne, lit(r)})
		}
	}
	return out
}

// classEnd returns the index of the ']' closing the bracket expression that opens at
// i (the last rune when it is not closed: validation refuses such patterns).
func classEnd(rs []rune, i int, bangNegates bool) int {
	j := i + 1
	if j < len(rs) && (rs[j] == '^' || (bangNegates && rs[j] == '!')) {
		j++
	}
	for ; j < len(rs); j++ {
		switch rs[j] {
		case '\\':
			j++
		case ']':
			return j
		}
	}
	return len(rs) - 1
}

func pathMatch(pattern, s string) bool {
	ok, err := path.Match(pattern, s)
	return err == nil && ok
}

func doublestarMatch(pattern, s string) bool {
	ok, err := doublestar.Match(pattern, s)
	return err == nil && ok
}

// compileNamespace compiles a path.Match pattern.
func compileNamespace(pattern string) *nfa {
	b := newBuilder()
	for _, t := range tokenize(pattern, false, pathMatch) {
		switch t.kind {
		case tokStar:
			b.many(notSlash{})
		case tokSlash:
			b.one(lit('/'))
		default:
			b.one(t.p)
		}
	}
	return b.done()
}

// compilePath compiles a doublestar pattern without braces. A segment that is
// exactly `**` matches zero or more whole segments: `**/x` is x anywhere, `x/**` is x
// and everything under it, `x/**/y` is y anywhere under x, including x/y.
func compilePath(pattern string) *nfa {
	segs := segments(tokenize(pattern, true, doublestarMatch))
	b := newBuilder()
	n := len(segs)
	for i, seg := range segs {
		last := i == n-1
		if isGlobstar(seg) {
			switch {
			case n == 1, i > 0 && isGlobstar(segs[i-1]) && last:
				b.many(anyRune{}) // its slash was read by the globstar before it
			case !last:
				b.optional(func() { b.many(anyRune{}); b.one(lit('/')) }) // and the slash after it
			}
			continue
		}
		if i+1 == n-1 && isGlobstar(segs[i+1]) {
			beforeTrailingGlobstar(b, seg)
			return b.done()
		}
		readSegment(b, seg)
		if !last {
			b.one(lit('/'))
		}
	}
	return b.done()
}

func readSegment(b *builder, seg []token) {
	for _, t := range seg {
		if t.kind == tokStar {
			b.many(notSlash{})
		} else {
			b.one(t.p)
		}
	}
}

// beforeTrailingGlobstar reads seg and the `/**` that ends the pattern: seg, then
// nothing (the directory itself) or '/' and anything. As in doublestar, the directory
// itself is matched only when the name ends where `/**` begins: stars that end seg
// then read at least one character.
func beforeTrailingGlobstar(b *builder, seg []token) {
	k := len(seg)
	for k > 0 && seg[k-1].kind == tokStar {
		k--
	}
	readSegment(b, seg[:k])
	stars := k < len(seg)
	b.either(func() {
		if stars {
			b.many(notSlash{})
		}
		b.one(lit('/'))
		b.many(anyRune{})
	}, func() {
		if stars {
			b.one(notSlash{})
			b.many(notSlash{})
		}
	})
}

func segments(tokens []token) [][]token {
	segs := [][]token{nil}
	for _, t := range tokens {
		if t.kind == tokSlash {
			segs = append(segs, nil)
			continue
		}
		segs[len(segs)-1] = append(segs[len(segs)-1], t)
	}
	return segs
}

func isGlobstar(seg []token) bool {
	return len(seg) == 2 && seg[0].kind == tokStar && seg[1].kind == tokStar
}

// expandBraces returns the patterns without braces that pattern is the union of:
// {a,b}c is ac and bc. It fails with ErrTooComplex beyond limit patterns.
func expandBraces(pattern string, limit int) ([]string, error) {
	open, closing := braceGroup(pattern)
	if open < 0 {
		return []string{pattern}, nil
	}
	rest, err := expandBraces(pattern[closing+1:], limit)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, alt := range splitAlternatives(pattern[open+1 : closing]) {
		alts, err := expandBraces(alt, limit)
		if err != nil {
			return nil, err
		}
		for _, a := range alts {
			for _, r := range rest {
				if len(out) == limit {
					return nil, ErrTooComplex
				}
				out = append(out, pattern[:open]+a+r)
			}
		}
	}
	return out, nil
}

// braceGroup returns the indexes of the first '{' outside escapes and bracket
// expressions and of the '}' that closes it, or -1, -1.
func braceGroup(pattern string) (int, int) {
	depth, open := 0, -1
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '[':
			i = skipClass(pattern, i)
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth > 0 {
				depth--
				if depth == 0 {
					return open, i
				}
			}
		}
	}
	return -1, -1
}

// skipClass returns the index of the ']' closing the bracket expression at i.
func skipClass(pattern string, i int) int {
	j := i + 1
	if j < len(pattern) && (pattern[j] == '^' || pattern[j] == '!') {
		j++
	}
	for ; j < len(pattern); j++ {
		switch pattern[j] {
		case '\\':
			j++
		case ']':
			return j
		}
	}
	return len(pattern)
}

// splitAlternatives splits the inside of a brace group at its own commas.
func splitAlternatives(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '[':
			i = skipClass(s, i)
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// Unsupported says why a valid doublestar glob is refused as a tenant path glob, or
// is "". Three stars in a row and a trailing '/' have quirks in doublestar's matching
// (a `**/` at the end matches the directory itself, `***` not the empty string) that
// no tenant needs: "*" and "**" say it, and a glob matches files, not directories.
func Unsupported(pattern string) string {
	switch {
	case strings.Contains(pattern, "***"):
		return "three or more stars in a row mean nothing more than * or **"
	case strings.Contains(pattern, "{}"):
		return "an empty {} matches nothing"
	case strings.HasSuffix(pattern, "/"):
		return "a glob matches files: it may not end in /"
	case nestedBraces(pattern):
		return "braces inside braces: write the alternatives out ({a,b,c})"
	case strings.Contains(pattern, `\/`):
		// doublestar reads an escaped / as a separator in some places and as a
		// character in others (`**\/**` matches 0/0/0): there is one / in a path.
		return `an escaped / (\/) is a separator all the same: write /`
	}
	return ""
}

// nestedBraces reports whether a brace group holds another one (escapes and bracket
// expressions skipped, as braceGroup does): doublestar and the automata read some
// such globs differently ({0*{*}} matches 00 but not 0 in doublestar).
func nestedBraces(pattern string) bool {
	open, closing := braceGroup(pattern)
	if open < 0 {
		return false
	}
	if inner, _ := braceGroup(pattern[open+1 : closing]); inner >= 0 {
		return true
	}
	return nestedBraces(pattern[closing+1:])
}
