// Package graph owns the picture of the instance graph and its strongly connected
// components: instances as nodes, dependsOn and provider-contract edges between
// them, drawn as text, Mermaid (for forges, which render it in Markdown) or
// Graphviz DOT, and the components (Tarjan) that the cycle checks of the
// declarations and of the contracts read. It works on plain values; what the
// edges are is the reconciler's to decide.
package graph
