package globs

// nfa is an automaton with ε-moves whose transitions read sets of characters.
type nfa struct {
	states []state
	start  int
	accept []bool
}

type state struct {
	eps   []int
	edges []edge
}

type edge struct {
	p  pred
	to int
}

func (a *nfa) add() int {
	a.states = append(a.states, state{})
	a.accept = append(a.accept, false)
	return len(a.states) - 1
}

func (a *nfa) eps(from, to int) { a.states[from].eps = append(a.states[from].eps, to) }
func (a *nfa) edge(from int, p pred, to int) {
	a.states[from].edges = append(a.states[from].edges, edge{p, to})
}

// builder appends pieces to an automaton, from its current end state.
type builder struct {
	a   *nfa
	cur int
}

func newBuilder() *builder {
	a := &nfa{}
	a.start = a.add()
	return &builder{a: a, cur: a.start}
}

// one reads one character of p.
func (b *builder) one(p pred) {
	next := b.a.add()
	b.a.edge(b.cur, p, next)
	b.cur = next
}

// many reads any number of characters of p.
func (b *builder) many(p pred) {
	loop := b.a.add()
	b.a.eps(b.cur, loop)
	b.a.edge(loop, p, loop)
	b.cur = loop
}

// optional reads what piece reads, or nothing.
func (b *builder) optional(piece func()) {
	from := b.cur
	piece()
	end := b.a.add() // fresh: an ε-move into a loop of piece would skip what leads to it
	b.a.eps(b.cur, end)
	b.a.eps(from, end)
	b.cur = end
}

func (b *builder) done() *nfa {
	b.a.accept[b.cur] = true
	return b.a
}

// either reads what one of the pieces reads.
func (b *builder) either(pieces ...func()) {
	from, end := b.cur, b.a.add()
	for _, piece := range pieces {
		b.cur = from
		piece()
		b.a.eps(b.cur, end)
	}
	b.cur = end
}
