// Package secretgen owns cairn's generated Secrets (ModuleInstance spec.secrets):
// reading the live Secrets of a declaration and its copies, deciding per Secret to
// create, keep, update or rotate it, writing what was decided, and the values
// themselves: random strings in an encoding, read from crypto/rand, and a
// certificate authority unique to one Secret with a leaf certificate it signs.
// It also gives the inventory entries of the generated Secrets, refuses one that
// clashes with a rendered object, and says what a sync would do to each (Plan).
// The reconciler decides when a sync reads and writes them, as which identity.
package secretgen
