package prune

import (
	"bufio"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/report"
)

// defaultProtectedKinds are never pruned unless an instance opts in (the
// Platform's prune.protectedKinds replaces them).
var defaultProtectedKinds = []string{"Namespace", "CustomResourceDefinition", "PersistentVolumeClaim", "PersistentVolume"}

// Guard holds the Platform's limits on deletions and the commit's allowance.
// The limits that span a sync apply to each owner's instances apart: each tenant's,
// and the platform team's own (see CheckSync).
type Guard struct {
	maxDeletions int // -1: no cap
	maxPercent   int // -1: no cap
	protected    map[string]bool
	allowed      int  // from the cairn-allow-prune trailer; -1: none
	tenants      bool // the Platform has tenants: verdicts and messages name the owner
}

// NewGuard returns the guard of Platform p (nil: the defaults) for a commit with
// commitMessage.
func NewGuard(p *cairnv1.Platform, commitMessage string) Guard {
	g := Guard{maxDeletions: -1, maxPercent: -1, protected: map[string]bool{}, allowed: AllowTrailer(commitMessage)}
	kinds := defaultProtectedKinds
	if p != nil {
		if p.Spec.Prune.MaxDeletions != nil {
			g.maxDeletions = int(*p.Spec.Prune.MaxDeletions)
		}
		if p.Spec.Prune.MaxPercent != nil {
			g.maxPercent = int(*p.Spec.Prune.MaxPercent)
		}
		if p.Spec.Prune.ProtectedKinds != nil {
			kinds = p.Spec.Prune.ProtectedKinds
		}
		g.tenants = len(p.Spec.Tenants) > 0
	}
	for _, k := range kinds {
		g.protected[k] = true
	}
	return g
}

// AllowTrailer reads "cairn-allow-prune: <n>" from a commit message; -1 if absent.
func AllowTrailer(msg string) int {
	allowed := -1
	sc := bufio.NewScanner(strings.NewReader(msg))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(key), cairnv1.AllowPruneTrailer) {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(val)); err == nil && n >= 0 {
			allowed = n
		}
	}
	return allowed
}

// Set is what one instance would delete in this sync.
type Set struct {
	Key     string
	UID     string          // the live instance's UID, checked on the objects ("": not checked)
	Stale   apply.Inventory // ids to delete (protected kinds already set aside)
	Kept    []string        // protected objects left in place
	Before  int             // objects in the last inventory
	Removed bool            // the instance left Git
	Owner   string          // the tenant whose file declares the instance; "": the platform team's
	Covered bool            // the commit's cairn-allow-prune trailer may speak for it (the caller decides)
	Refused error           // the sync-wide verdict on it (see CheckSync)
}

// Split sets protected kinds aside unless the instance opts in.
func (g Guard) Split(key string, stale apply.Inventory, optIn bool) *Set {
	ps := &Set{Key: key, Stale: apply.Inventory{}}
	for id, e := range stale {
		meta, err := object.ParseObjMetadata(id)
		if err == nil && g.protected[meta.GroupKind.Kind] && !optIn {
			ps.Kept = append(ps.Kept, id)
			continue
		}
		ps.Stale[id] = e
	}
	sort.Strings(ps.Kept)
	return ps
}

// CheckSync applies the limits that span the sync (total deletions, the share of
// instances removed) to each owner's sets apart, instances counting each owner's live
// instances: one tenant's deletions never refuse another's. It records the verdict on
// each set and returns the refusals, one per refused owner.
func (g Guard) CheckSync(sets []*Set, instances map[string]int) []error {
	byOwner := map[string][]*Set{}
	for _, s := range sets {
		byOwner[s.Owner] = append(byOwner[s.Owner], s)
	}
	owners := make([]string, 0, len(byOwner))
	for o := range byOwner {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	var refusals []error
	for _, o := range owners {
		if err := g.checkOwner(o, byOwner[o], instances[o]); err != nil {
			refusals = append(refusals, err)
		}
	}
	return refusals
}

// checkOwner applies the sync-wide limits to the sets of one owner. The trailer lifts
// them for the sets it covers when their deletions are within it; the others are
// checked as if those were not there.
func (g Guard) checkOwner(owner string, sets []*Set, instances int) error {
	guarded, covered := []*Set{}, 0
	for _, s := range sets {
		if s.Covered {
			covered += len(s.Stale)
		}
	}
	lifted := g.allowed >= 0 && covered <= g.allowed
	for _, s := range sets {
		if !lifted || !s.Covered {
			guarded = append(guarded, s)
		}
	}
	err := g.limits(owner, guarded, instances)
	for _, s := range guarded {
		if len(s.Stale) > 0 || s.Removed {
			s.Refused = err
		}
	}
	return err
}

// limits is the verdict of maxDeletions and the half-of-instances rule on sets.
func (g Guard) limits(owner string, sets []*Set, instances int) error {
	total, removed := 0, 0
	for _, s := range sets {
		total += len(s.Stale)
		if s.Removed {
			removed++
		}
	}
	if g.maxDeletions >= 0 && total > g.maxDeletions {
		if !g.tenants {
			return g.Refuse(LimitMaxDeletions, "this sync would delete %d objects, over prune.maxDeletions %d", total, g.maxDeletions)
		}
		return g.Refuse(LimitMaxDeletions, "%s instances would delete %d objects in this sync, over its cap of %d (prune.maxDeletions, counted per tenant)",
			whose(owner), total, g.maxDeletions)
	}
	if instances > 0 && removed*2 > instances {
		if !g.tenants {
			return g.Refuse(LimitHalfOfInstances, "this commit removes %d of %d instances, more than half", removed, instances)
		}
		return g.Refuse(LimitHalfOfInstances, "this commit removes %d of %s %d instances, more than half",
			removed, whose(owner), instances)
	}
	return nil
}

// whose names the owner in a message: "tenant team-a's", "the platform's own".
func whose(owner string) string {
	if owner == "" {
		return "the platform's own"
	}
	return "tenant " + owner + "'s"
}

// CheckInstance applies maxPercent to an instance that stays in Git.
func (g Guard) CheckInstance(s *Set) error {
	if s.Removed || g.maxPercent < 0 || s.Before == 0 || len(s.Stale) == 0 {
		return nil
	}
	if g.allowed >= 0 && s.Covered && len(s.Stale) <= g.allowed {
		return nil
	}
	if pct := len(s.Stale) * 100 / s.Before; pct > g.maxPercent {
		return g.Refuse(LimitMaxPercent, "instance %s would lose %d of its %d objects (%d%%), over prune.maxPercent %d%%",
			s.Key, len(s.Stale), s.Before, pct, g.maxPercent)
	}
	return nil
}

// Refuse is the refusal of limit: a stalled PruneGuard failure that says how a
// commit may allow the deletions.
func (g Guard) Refuse(limit, format string, args ...any) *outcome.Failure {
	hint := fmt.Sprintf("; add the trailer \"%s: <n>\" to the commit message to allow n deletions", cairnv1.AllowPruneTrailer)
	if g.tenants {
		hint = fmt.Sprintf("; add the trailer \"%s: <n>\" to a commit that changes the instance's file "+
			"(for a removed instance, a file of its owner) to allow n deletions", cairnv1.AllowPruneTrailer)
	}
	return Refusal(limit, outcome.Failuref(outcome.Stalled, cairnv1.ReasonPruneGuard, "prune refused: "+format+hint, args...))
}

// The prune guards, as cairn_prune_refusals_total names them.
const (
	LimitMaxDeletions    = report.LimitMaxDeletions
	LimitHalfOfInstances = report.LimitHalfOfInstances
	LimitMaxPercent      = report.LimitMaxPercent
	LimitEmptyRender     = report.LimitEmptyRender
)

// guardError is a prune refusal by the guard limit.
type guardError struct {
	limit string
	err   error
}

func (e *guardError) Error() string { return e.err.Error() }
func (e *guardError) Unwrap() error { return e.err }

// Refusal marks f as a refusal by the guard limit; its message is unchanged.
func Refusal(limit string, f *outcome.Failure) *outcome.Failure {
	f.Err = &guardError{limit: limit, err: f.Err}
	return f
}

// RefusedBy is the guard that refused err ("" when err is no prune refusal).
func RefusedBy(err error) string {
	var g *guardError
	if errors.As(err, &g) {
		return g.limit
	}
	return ""
}

// Tenants reports whether the Platform has tenants: the trailer then speaks only
// for the instances whose files the commit changes.
func (g Guard) Tenants() bool { return g.tenants }
