// Package secretgen owns the generation of the values of cairn's generated Secrets
// (ModuleInstance spec.secrets): random strings in an encoding, read from
// crypto/rand, and a certificate authority unique to one Secret with a leaf
// certificate it signs. It never reads or writes the cluster; the reconciler
// decides when a value is generated and keeps it.
package secretgen
