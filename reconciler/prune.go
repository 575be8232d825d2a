package reconciler

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

// defaultProtectedKinds are never pruned unless an instance opts in.
var defaultProtectedKinds = []string{"Namespace", "CustomResourceDefinition", "PersistentVolumeClaim", "PersistentVolume"}

// pruneGuard holds the Platform's limits on deletions and the commit's allowance.
// The limits that span a sync apply to each owner's instances apart: each tenant's,
// and the platform team's own (see checkSync).
type pruneGuard struct {
	maxDeletions int // -1: no cap
	maxPercent   int // -1: no cap
	protected    map[string]bool
	allowed      int  // from the cairn-allow-prune trailer; -1: none
	tenants      bool // the Platform has tenants: verdicts and messages name the owner
}

func newPruneGuard(p *cairnv1.Platform, commitMessage string) pruneGuard {
	g := pruneGuard{maxDeletions: -1, maxPercent: -1, protected: map[string]bool{}, allowed: allowPruneTrailer(commitMessage)}
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

// allowPruneTrailer reads "cairn-allow-prune: <n>" from a commit message; -1 if absent.
func allowPruneTrailer(msg string) int {
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

// pruneSet is what one instance would delete in this sync.
type pruneSet struct {
	key     string
	uid     string          // the live instance's UID, checked on the objects ("": not checked)
	stale   apply.Inventory // ids to delete (protected kinds already set aside)
	kept    []string        // protected objects left in place
	before  int             // objects in the last inventory
	removed bool            // the instance left Git
	owner   string          // the tenant whose file declares the instance; "": the platform team's
	covered bool            // the commit's cairn-allow-prune trailer may speak for it (see trailerCovers)
	refused error           // the sync-wide verdict on it (see checkSync)
}

// split sets protected kinds aside unless the instance opts in.
func (g pruneGuard) split(key string, stale apply.Inventory, optIn bool) *pruneSet {
	ps := &pruneSet{key: key, stale: apply.Inventory{}}
	for id, e := range stale {
		meta, err := object.ParseObjMetadata(id)
		if err == nil && g.protected[meta.GroupKind.Kind] && !optIn {
			ps.kept = append(ps.kept, id)
			continue
		}
		ps.stale[id] = e
	}
	sort.Strings(ps.kept)
	return ps
}

// checkSync applies the limits that span the sync (total deletions, the share of
// instances removed) to each owner's sets apart, instances counting each owner's live
// instances: one tenant's deletions never refuse another's. It records the verdict on
// each set and returns the refusals, one per refused owner.
func (g pruneGuard) checkSync(sets []*pruneSet, instances map[string]int) []error {
	byOwner := map[string][]*pruneSet{}
	for _, s := range sets {
		byOwner[s.owner] = append(byOwner[s.owner], s)
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
func (g pruneGuard) checkOwner(owner string, sets []*pruneSet, instances int) error {
	guarded, covered := []*pruneSet{}, 0
	for _, s := range sets {
		if s.covered {
			covered += len(s.stale)
		}
	}
	lifted := g.allowed >= 0 && covered <= g.allowed
	for _, s := range sets {
		if !lifted || !s.covered {
			guarded = append(guarded, s)
		}
	}
	err := g.limits(owner, guarded, instances)
	for _, s := range guarded {
		if len(s.stale) > 0 || s.removed {
			s.refused = err
		}
	}
	return err
}

// limits is the verdict of maxDeletions and the half-of-instances rule on sets.
func (g pruneGuard) limits(owner string, sets []*pruneSet, instances int) error {
	total, removed := 0, 0
	for _, s := range sets {
		total += len(s.stale)
		if s.removed {
			removed++
		}
	}
	if g.maxDeletions >= 0 && total > g.maxDeletions {
		if !g.tenants {
			return g.refuse(limitMaxDeletions, "this sync would delete %d objects, over prune.maxDeletions %d", total, g.maxDeletions)
		}
		return g.refuse(limitMaxDeletions, "%s instances would delete %d objects in this sync, over its cap of %d (prune.maxDeletions, counted per tenant)",
			whose(owner), total, g.maxDeletions)
	}
	if instances > 0 && removed*2 > instances {
		if !g.tenants {
			return g.refuse(limitHalfOfInstances, "this commit removes %d of %d instances, more than half", removed, instances)
		}
		return g.refuse(limitHalfOfInstances, "this commit removes %d of %s %d instances, more than half",
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

// checkInstance applies maxPercent to an instance that stays in Git.
func (g pruneGuard) checkInstance(s *pruneSet) error {
	if s.removed || g.maxPercent < 0 || s.before == 0 || len(s.stale) == 0 {
		return nil
	}
	if g.allowed >= 0 && s.covered && len(s.stale) <= g.allowed {
		return nil
	}
	if pct := len(s.stale) * 100 / s.before; pct > g.maxPercent {
		return g.refuse(limitMaxPercent, "instance %s would lose %d of its %d objects (%d%%), over prune.maxPercent %d%%",
			s.key, len(s.stale), s.before, pct, g.maxPercent)
	}
	return nil
}

func (g pruneGuard) refuse(limit, format string, args ...any) *outcome.Failure {
	hint := fmt.Sprintf("; add the trailer \"%s: <n>\" to the commit message to allow n deletions", cairnv1.AllowPruneTrailer)
	if g.tenants {
		hint = fmt.Sprintf("; add the trailer \"%s: <n>\" to a commit that changes the instance's file "+
			"(for a removed instance, a file of its owner) to allow n deletions", cairnv1.AllowPruneTrailer)
	}
	return refusal(limit, outcome.Failuref(outcome.Stalled, cairnv1.ReasonPruneGuard, "prune refused: "+format+hint, args...))
}

// The prune guards, as cairn_prune_refusals_total names them.
const (
	limitMaxDeletions    = report.LimitMaxDeletions
	limitHalfOfInstances = report.LimitHalfOfInstances
	limitMaxPercent      = report.LimitMaxPercent
	limitEmptyRender     = report.LimitEmptyRender
)

// guardError is a prune refusal by the guard limit.
type guardError struct {
	limit string
	err   error
}

func (e *guardError) Error() string { return e.err.Error() }
func (e *guardError) Unwrap() error { return e.err }

// refusal marks f as a refusal by the guard limit; its message is unchanged.
func refusal(limit string, f *outcome.Failure) *outcome.Failure {
	f.Err = &guardError{limit: limit, err: f.Err}
	return f
}

// refusedBy is the guard that refused err ("" when err is no prune refusal).
func refusedBy(err error) string {
	var g *guardError
	if errors.As(err, &g) {
		return g.limit
	}
	return ""
}
