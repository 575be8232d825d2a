// Package prune owns the prune guards: what an instance would delete with the
// protected kinds set aside, and the Platform's limits on deletions (maxDeletions
// and the half-of-instances rule per owner, maxPercent per instance), lifted by a
// commit's cairn-allow-prune trailer where it may speak; each refusal carries the
// limit that refused it.
package prune
