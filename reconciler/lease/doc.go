// Package lease owns the Lease that lets one sync at a time change a cluster: a
// coordination.k8s.io/v1 Lease named Name in cairn's namespace, taken and renewed
// with client-go's leader election. `cairn sync` holds it for as long as it syncs;
// the controller uses the same name as its leader-election ID, so the two exclude
// each other.
package lease
