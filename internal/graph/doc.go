// Package graph owns the picture of the instance graph: instances as nodes,
// dependsOn and provider-contract edges between them, drawn as text, Mermaid
// (for forges, which render it in Markdown) or Graphviz DOT. It draws plain
// values; what the edges are is the reconciler's to decide.
package graph
