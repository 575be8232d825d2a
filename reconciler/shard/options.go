package shard

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

const (
	shardPrefix  = "cairn-shard-"
	memberPrefix = "cairn-replica-"
	// shardsAnnotation records on a membership Lease how many shards its replica
	// divides the instances into: replicas that disagree would hash one instance into
	// two different shards, so none takes a shard while a live replica disagrees.
	shardsAnnotation = "cairn.dev/shards"
)

// Options configure a Set.
type Options struct {
	// Namespace is cairn's namespace, where the Leases live.
	Namespace string
	// Identity names this replica in the Leases it holds; it must be unique among
	// the replicas, e.g. lease.NewIdentity() ("<pod>_<uuid>").
	Identity string
	// Shards is how many shards the instances are divided into (--shards).
	Shards int
	// LeaseDuration is how long another replica waits, by its own clock, after it last
	// saw a Lease change before it takes the Lease over. RenewDeadline is how long this
	// replica keeps a shard after the last renewal it sent, by its own monotonic clock,
	// before it treats the shard as lost; it must be shorter than LeaseDuration, and
	// the difference is the safety margin for clock rates and scheduling. RetryPeriod
	// is the period of the loop that renews, acquires and releases.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Clock is the clock of the timings (nil: the real, monotonic one); tests give a
	// fake one.
	Clock clock.Clock
	// Log receives what the Set does with its shards (default: nothing).
	Log logr.Logger
	// OnChange, when set, is called from Run's goroutine after each period in which
	// shards were acquired or lost (lost includes released), with the shard numbers in
	// ascending order. It must return quickly: renewals wait for it. The contexts of
	// lost shards have ended before it is called; it is the place to requeue the
	// instances of acquired shards.
	OnChange func(acquired, lost []int)
}

// DefaultOptions returns controller-runtime's leader-election timings (15s/10s/2s).
func DefaultOptions(namespace, identity string, shards int) Options {
	return Options{Namespace: namespace, Identity: identity, Shards: shards,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
}

func (o Options) validate() error {
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("no namespace"))
	}
	if o.Identity == "" {
		errs = append(errs, errors.New("no identity"))
	}
	if o.Shards < 1 {
		errs = append(errs, fmt.Errorf("%d shards: at least 1 is needed", o.Shards))
	}
	if o.RetryPeriod <= 0 || o.RenewDeadline <= o.RetryPeriod || o.LeaseDuration <= o.RenewDeadline {
		errs = append(errs, fmt.Errorf("timings must satisfy LeaseDuration > RenewDeadline > RetryPeriod > 0, got %s, %s, %s",
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid shard options: %w", err)
	}
	return nil
}

// leaseSeconds is LeaseDuration as the Lease records it, in whole seconds rounded up:
// other replicas wait at least that long, never less than this replica's own timings
// assume.
func (o Options) leaseSeconds() int32 {
	return int32((o.LeaseDuration + time.Second - 1) / time.Second)
}

// LeaseName is the name of the Lease of shard i.
func LeaseName(i int) string { return fmt.Sprintf("%s%d", shardPrefix, i) }

// MemberLeaseName is the name of the membership Lease of the replica identity:
// "cairn-replica-<identity>", where an identity that is not a valid name part (such as
// lease.NewIdentity's "<host>_<uuid>") is lowercased, its other characters made '-',
// shortened if need be, and followed by a hash of the identity, so that two
// identities never share a name.
func MemberLeaseName(identity string) string {
	const maxName = 253 // a Lease's name is a DNS subdomain
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, identity)
	if clean == identity && clean != "" && len(memberPrefix+clean) <= maxName &&
		!strings.HasSuffix(clean, "-") && !strings.HasPrefix(clean, "-") {
		return memberPrefix + clean
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(identity))
	suffix := fmt.Sprintf("%08x", h.Sum32())
	if len(clean) > maxName-len(memberPrefix)-len(suffix)-1 {
		clean = clean[:maxName-len(memberPrefix)-len(suffix)-1]
	}
	clean = strings.Trim(clean, "-")
	if clean == "" {
		return memberPrefix + suffix
	}
	return memberPrefix + clean + "-" + suffix
}
