package globs

import (
	"unicode/utf8"
)

// pred is a set of characters: what one transition of an automaton reads.
type pred interface {
	has(r rune) bool
	// bounds are runes at which membership may change: every maximal run of runes
	// in the set starts at one of them, or at 0.
	bounds() []rune
}

// lit is one character.
type lit rune

func (l lit) has(r rune) bool { return r == rune(l) }
func (l lit) bounds() []rune  { return []rune{rune(l), rune(l) + 1} }

// notSlash is any character but '/': what `?` and `*` read.
type notSlash struct{}

func (notSlash) has(r rune) bool { return r != '/' }
func (notSlash) bounds() []rune  { return []rune{'/', '/' + 1} }

// anyRune is any character: what `**` reads.
type anyRune struct{}

func (anyRune) has(rune) bool  { return true }
func (anyRune) bounds() []rune { return nil }

// class is a bracket expression such as [a-z] or [^0-9], decided by the dialect's own
// matcher, so that its ranges, negation and escapes mean exactly what they mean there.
type class struct {
	text  string
	match func(pattern, s string) bool
}

func (c class) has(r rune) bool { return c.match(c.text, string(r)) }

func (c class) bounds() []rune {
	var out []rune
	for _, r := range c.text {
		out = append(out, r, r+1)
	}
	return out
}

// set is a set of characters given by a function, for the automata of what can occur.
type set struct {
	in    func(rune) bool
	marks []rune
}

func (s set) has(r rune) bool { return s.in(r) }
func (s set) bounds() []rune  { return s.marks }

// preferred are tried first as a witness character, so that examples read well.
var preferred = []rune("abcdefghijklmnopqrstuvwxyz0123456789-._ABCDEFGHIJKLMNOPQRSTUVWXYZ")

// witness returns a character in every one of ps, and whether there is one. The
// candidates beyond the preferred ones are the bounds of every set and 0: each set is
// a union of runs of runes starting at its bounds, so an intersection that is not
// empty holds one of them.
func witness(ps []pred) (rune, bool) {
	try := func(r rune) bool {
		if r < 0 || r > utf8.MaxRune || (r >= 0xD800 && r <= 0xDFFF) {
			return false
		}
		for _, p := range ps {
			if !p.has(r) {
				return false
			}
		}
		return true
	}
	for _, r := range preferred {
		if try(r) {
			return r, true
		}
	}
	for _, p := range ps {
		for _, r := range p.bounds() {
			if try(r) {
				return r, true
			}
		}
	}
	return 0, try(0)
}
