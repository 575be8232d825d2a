// Package layers holds no code: its test keeps the direction of imports between
// cairn's packages (docs/architecture.md, "Packages"). A package imports only
// packages of a lower layer, or of its own layer under the same top folder.
package layers
