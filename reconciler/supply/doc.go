// Package supply owns cairn's supply chain: it reads each Registry's credentials,
// CA bundle, trusted cosign keys and signing key, resolves and verifies the OCI
// artifacts a sync renders (modules, catalogs, charts, Timoni modules), pulls them by
// digest, and publishes renders as signed OCI artifacts.
//
// A Chain is the view of one sync: it is built by New from the declared Registries,
// resolves each tag once (every later use of the same tag in the sync gets the same
// digest) and types every failure as an outcome.Failure. The reconciler glues it into
// a sync; this package knows nothing of syncs, instances' runs or the cluster beyond
// the SecretSource it is given. Credentials and Secret data never appear in its
// errors.
package supply
