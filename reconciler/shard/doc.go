// Package shard spreads the controller's instance reconciles over replicas
// (`cairn controller --shards N`): the instances are divided into N shards by a hash of
// namespace/name, each shard is a coordination.k8s.io/v1 Lease named cairn-shard-<i>
// in cairn's namespace, and a replica reconciles only the instances of the shards
// whose Lease it holds.
//
// # Wiring
//
// New returns a replica's Set; its Run (or Start: a Set is a controller-runtime
// Runnable that runs on every replica, not only the leader) takes and keeps the
// replica's shards until its context ends. An instance's reconcile asks Bind (or
// Context) for a context under its shard and runs under it, or skips the instance when
// the shard is not held; Options.OnChange says which shards were acquired, so that
// their instances are queued again. The Set needs get, list, create, update and delete
// on Leases in cairn's namespace.
//
// # Leases and membership
//
// Every RetryPeriod, Run renews its membership Lease cairn-replica-<identity> and the
// Leases of the shards it holds, lists the namespace's Leases once, then acquires free
// or expired shards up to its share, or gives one up above it. Each write carries the
// resourceVersion read before it (optimistic concurrency), so of two replicas writing
// one Lease only one succeeds, and a renewal that finds the Lease written by another
// replica ends the shard.
//
// The Leases are written directly rather than through client-go's leaderelection, one
// elector per shard: an elector tries to acquire for as long as it runs, whereas a
// replica here takes shards only up to its share and gives up a chosen one to even
// out the spread; N electors would each read their Lease every period where one list
// serves here; and the own-clock rule below needs the moment each renewal was sent,
// which the elector keeps to itself.
//
// # Expiry, judged by each replica's own clock
//
// A Lease expires LeaseDurationSeconds (as recorded in it) after the replica looking
// first saw its current resourceVersion, by that replica's monotonic clock; renewTime
// is written for people to read but never compared across machines, so clock skew
// between nodes does not matter. The membership Leases of replicas gone for that long
// are not counted, and deleted (with a resourceVersion precondition).
//
// # A lost shard stops before it writes: the own-clock rule
//
// A holder treats a shard as lost once its last successful renewal was sent more
// than RenewDeadline ago by its own monotonic clock, without waiting for an API call
// to fail: the shard's context is cancelled then by a timer, and its Err reads the
// clock itself, so that a replica resumed after a pause past its lease (SIGSTOP,
// a frozen VM) sees the loss at its first check, before any goroutine acts on the
// stale shard. Another replica takes the Lease only LeaseDuration after it saw the
// holder's last renewal land, and the holder sent that renewal before it landed, so
// RenewDeadline < LeaseDuration keeps the holder's context ended before another's
// begins; the difference is the margin for clock rates and timers. A lost Lease is not
// written again: not renewed (even though the resourceVersion would refuse it), not
// released, and not re-acquired before it expires like any other's. Writes already on
// the wire when the context ends may still land, so the reconcile should check its
// context (ctx.Err(), which reads the clock) right before each write.
//
// # Spread
//
// With n shards over r live replicas (members), an even spread gives each n/r or
// n/r+1. A replica below n/r takes free or expired shards up to n/r; one below n/r+1
// takes up to that only when no other replica holds fewer than it. A replica gives up
// one shard when it holds the most (ties go to the lowest identity), at least two more
// than the replica holding fewest, that one holds fewer than its due, and no shard is
// free: at most one shard per period, and only when that evens the spread, so shards
// do not thrash. Giving up ends the shard's context first, then clears the Lease's
// holder so another replica takes it at once; Run does the same for all its shards
// when it ends, after deleting its membership Lease. A replica takes no shard in its
// first period (replicas started together see each other first; with one shard,
// which has no spread to even, it does), none while its own
// membership is stale, and none, nor gives any up, while a live replica divides into
// another number of shards (a rollout changing --shards), since the two would hash one
// instance into different shards.
//
// # Why namespace/name
//
// Of hashes namespace/name (FNV-1a, 32 bits) rather than the tenant: a large tenant
// spreads over the replicas instead of loading one; dependencies are read from the
// cluster (the ModuleInstances' status), so an instance and its dependencies may sit
// in different shards; and fairness between tenants is kept inside each replica by
// its worker slots (internal/fairslots).
package shard
