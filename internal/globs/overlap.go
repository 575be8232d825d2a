package globs

import (
	"errors"
	"fmt"
)

// Dialect is a kind of pattern and the strings it is matched against.
type Dialect int

const (
	// Namespace patterns are path.Match globs matched against namespace names
	// (DNS-1123 labels: at most 63 lower-case letters, digits and '-', starting and
	// ending with a letter or digit).
	Namespace Dialect = iota
	// Path patterns are doublestar globs (`**`, braces) matched against clean
	// relative file paths (no leading or trailing '/', no empty, "." or ".." segment).
	Path
)

// Limits of one Overlap.
const (
	// MaxAlternatives is the most patterns a path glob's braces may expand to.
	MaxAlternatives = 64
	// maxStates bounds the search of one pair of patterns.
	maxStates = 1 << 20
	// maxNamespaceLength is the longest namespace name.
	maxNamespaceLength = 63
)

// ErrTooComplex is a pattern whose overlap is not decided within the limits.
var ErrTooComplex = errors.New("pattern too complex to check for overlap")

// Overlap returns a string that both patterns match, and whether there is one. The
// patterns must be valid in the dialect. The example is one of the shortest.
func Overlap(d Dialect, a, b string) (string, bool, error) {
	if d == Namespace {
		return overlapOnce(compileNamespace(a), compileNamespace(b), dnsLabel(), maxNamespaceLength,
			func(s string) bool { return pathMatch(a, s) && pathMatch(b, s) })
	}
	as, err := expandBraces(a, MaxAlternatives)
	if err != nil {
		return "", false, fmt.Errorf("%q: %w", a, err)
	}
	bs, err := expandBraces(b, MaxAlternatives)
	if err != nil {
		return "", false, fmt.Errorf("%q: %w", b, err)
	}
	verify := func(s string) bool { return doublestarMatch(a, s) && doublestarMatch(b, s) }
	for _, x := range as {
		for _, y := range bs {
			s, ok, err := overlapOnce(compilePath(x), compilePath(y), cleanPath(), 0, verify)
			if err != nil || ok {
				return s, ok, err
			}
		}
	}
	return "", false, nil
}

// overlapOnce searches the product of x, y and what can occur for the shortest
// string all three accept, at most maxLen long (0: any). The dialect's own matcher
// has the last word (verify), so no refusal ever rests on this package alone.
func overlapOnce(x, y, occurs *nfa, maxLen int, verify func(string) bool) (string, bool, error) {
	s, ok, err := shortest([]*nfa{x, y, occurs}, maxLen)
	if err != nil || !ok || !verify(s) {
		return "", false, err
	}
	return s, true, nil
}

// dnsLabel accepts the namespace names (the length is bounded by the search).
func dnsLabel() *nfa {
	alnum := set{in: func(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' }, marks: []rune{'0', '9' + 1, 'a', 'z' + 1}}
	a := &nfa{}
	start, word, dash := a.add(), a.add(), a.add()
	a.start, a.accept[word] = start, true
	a.edge(start, alnum, word)
	a.edge(word, alnum, word)
	a.edge(word, lit('-'), dash)
	a.edge(dash, lit('-'), dash)
	a.edge(dash, alnum, word)
	return a
}

// cleanPath accepts the clean relative paths: segments of at least one character
// other than '/', none of them "." or "..", joined by single slashes.
func cleanPath() *nfa {
	plain := set{in: func(r rune) bool { return r != '/' && r != '.' }, marks: []rune{'.', '.' + 1, '/', '/' + 1}}
	a := &nfa{}
	segStart, dot, dots, word := a.add(), a.add(), a.add(), a.add()
	a.start, a.accept[word] = segStart, true
	a.edge(segStart, lit('.'), dot)
	a.edge(segStart, plain, word)
	a.edge(dot, lit('.'), dots)
	a.edge(dot, plain, word)
	a.edge(dots, notSlash{}, word)
	a.edge(word, notSlash{}, word)
	a.edge(word, lit('/'), segStart)
	return a
}

// node is one state of the product: a state of each automaton, and how it was reached.
type node struct {
	q      [3]int
	dist   int
	parent int
	r      rune
	read   bool // r was read to reach it (else an ε-move)
}

// shortest is a 0-1 breadth-first search of the product of the automata (ε-moves
// cost nothing, reading a character costs one): the first accepting state taken
// from the queue ends the shortest string they all accept.
func shortest(as []*nfa, maxLen int) (string, bool, error) {
	var start [3]int
	for i, a := range as {
		start[i] = a.start
	}
	best := map[[3]int]int{start: 0}
	nodes := []node{{q: start, parent: -1}}
	queue := newDeque()
	queue.pushBack(0)
	for queue.len() > 0 {
		idx := queue.popFront()
		n := nodes[idx]
		if best[n.q] < n.dist {
			continue // reached again, shorter
		}
		if accepting(as, n.q) {
			return spell(nodes, idx), true, nil
		}
		for _, m := range moves(as, n, maxLen) {
			if d, seen := best[m.q]; seen && d <= m.dist {
				continue
			}
			if len(nodes) >= maxStates {
				return "", false, ErrTooComplex
			}
			best[m.q] = m.dist
			m.parent = idx
			nodes = append(nodes, m)
			if m.read {
				queue.pushBack(len(nodes) - 1)
			} else {
				queue.pushFront(len(nodes) - 1)
			}
		}
	}
	return "", false, nil
}

func accepting(as []*nfa, q [3]int) bool {
	for i, a := range as {
		if !a.accept[q[i]] {
			return false
		}
	}
	return true
}

// moves are the ε-moves of each automaton alone, and the characters all of them read
// together (one witness character for each combination of their transitions).
func moves(as []*nfa, n node, maxLen int) []node {
	var out []node
	for i, a := range as {
		for _, t := range a.states[n.q[i]].eps {
			m := node{q: n.q, dist: n.dist}
			m.q[i] = t
			out = append(out, m)
		}
	}
	if maxLen > 0 && n.dist >= maxLen {
		return out
	}
	var walk func(i int, q [3]int, ps []pred)
	walk = func(i int, q [3]int, ps []pred) {
		if i == len(as) {
			if r, ok := witness(ps); ok {
				out = append(out, node{q: q, dist: n.dist + 1, r: r, read: true})
			}
			return
		}
		for _, e := range as[i].states[n.q[i]].edges {
			q[i] = e.to
			walk(i+1, q, append(ps, e.p))
		}
	}
	walk(0, n.q, make([]pred, 0, len(as)))
	return out
}

// spell reads the string that led to node idx.
func spell(nodes []node, idx int) string {
	var rs []rune
	for ; idx >= 0; idx = nodes[idx].parent {
		if nodes[idx].read {
			rs = append(rs, nodes[idx].r)
		}
	}
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	return string(rs)
}

// deque is a double-ended queue of node indexes.
type deque struct {
	front, back []int
}

func newDeque() *deque { return &deque{} }

func (d *deque) len() int        { return len(d.front) + len(d.back) }
func (d *deque) pushFront(i int) { d.front = append(d.front, i) }
func (d *deque) pushBack(i int)  { d.back = append(d.back, i) }

func (d *deque) popFront() int {
	if len(d.front) > 0 {
		i := d.front[len(d.front)-1]
		d.front = d.front[:len(d.front)-1]
		return i
	}
	i := d.back[0]
	d.back = d.back[1:]
	return i
}
