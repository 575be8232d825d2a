package shard

import "hash/fnv"

// Of is the shard, in [0, shards), of the ModuleInstance namespace/name: FNV-1a (32
// bits) of "namespace/name" modulo shards. It depends on nothing but its arguments, so
// every replica, every version of cairn and every restart puts an instance in the same
// shard; fewer than two shards is one shard, 0.
func Of(namespace, name string, shards int) int {
	if shards < 2 {
		return 0
	}
	return int(hashOf(namespace, name) % uint32(shards))
}

// hashOf is FNV-1a (32 bits) of "namespace/name"; the '/' keeps a/bc apart from ab/c.
func hashOf(namespace, name string) uint32 {
	h := fnv.New32a()
	// A hash.Hash never returns an error from Write.
	_, _ = h.Write([]byte(namespace))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(name))
	return h.Sum32()
}
