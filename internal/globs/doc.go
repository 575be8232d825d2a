// Package globs decides whether two glob patterns overlap: whether some string
// matches both, and which one. It knows the two dialects of the Platform: namespace
// patterns (path.Match over Kubernetes namespace names) and tenant path globs
// (doublestar over clean file paths of the repository).
//
// Each pattern is compiled into a small automaton whose transitions are sets of
// characters; the overlap is a breadth-first search of the product of the two
// automata and of a third one that accepts only the strings that can occur (a
// namespace name, a clean relative path). The search finds the shortest common
// string, so it is exact and bounded by the product of the patterns' sizes.
package globs
