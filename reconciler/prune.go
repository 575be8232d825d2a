package reconciler

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// defaultProtectedKinds are never pruned unless an instance opts in.
var defaultProtectedKinds = []string{"Namespace", "CustomResourceDefinition", "PersistentVolumeClaim", "PersistentVolume"}

// pruneGuard holds the Platform's limits on deletions and the commit's allowance.
type pruneGuard struct {
	maxDeletions int // -1: no cap
	maxPercent   int // -1: no cap
	protected    map[string]bool
	allowed      int // from the cairn-allow-prune trailer; -1: none
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
	uid     string    // the live instance's UID, checked on the objects ("": not checked)
	stale   inventory // ids to delete (protected kinds already set aside)
	kept    []string  // protected objects left in place
	before  int       // objects in the last inventory
	removed bool      // the instance left Git
}

// split sets protected kinds aside unless the instance opts in.
func (g pruneGuard) split(key string, stale inventory, optIn bool) *pruneSet {
	ps := &pruneSet{key: key, stale: inventory{}}
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

// checkSync applies the limits that span the whole sync: total deletions and the share
// of instances removed. It returns nil when the prune may go ahead.
func (g pruneGuard) checkSync(sets []*pruneSet, totalInstances int) error {
	total, removed := 0, 0
	for _, s := range sets {
		total += len(s.stale)
		if s.removed {
			removed++
		}
	}
	if g.allowed >= 0 && total <= g.allowed {
		return nil
	}
	if g.maxDeletions >= 0 && total > g.maxDeletions {
		return g.refuse(limitMaxDeletions, "this sync would delete %d objects, over prune.maxDeletions %d", total, g.maxDeletions)
	}
	if totalInstances > 0 && removed*2 > totalInstances {
		return g.refuse(limitHalfOfInstances, "this commit removes %d of %d instances, more than half", removed, totalInstances)
	}
	return nil
}

// checkInstance applies maxPercent to an instance that stays in Git.
func (g pruneGuard) checkInstance(s *pruneSet) error {
	if s.removed || g.maxPercent < 0 || s.before == 0 || len(s.stale) == 0 {
		return nil
	}
	if g.allowed >= 0 && len(s.stale) <= g.allowed {
		return nil
	}
	if pct := len(s.stale) * 100 / s.before; pct > g.maxPercent {
		return g.refuse(limitMaxPercent, "instance %s would lose %d of its %d objects (%d%%), over prune.maxPercent %d%%",
			s.key, len(s.stale), s.before, pct, g.maxPercent)
	}
	return nil
}

func (g pruneGuard) refuse(limit, format string, args ...any) *Failure {
	hint := fmt.Sprintf("; add the trailer \"%s: <n>\" to the commit message to allow n deletions", cairnv1.AllowPruneTrailer)
	return refusal(limit, failuref(Stalled, cairnv1.ReasonPruneGuard, "prune refused: "+format+hint, args...))
}

// The prune guards, as cairn_prune_refusals_total names them.
const (
	limitMaxDeletions    = "maxDeletions"
	limitHalfOfInstances = "halfOfInstances"
	limitMaxPercent      = "maxPercent"
	limitEmptyRender     = "emptyRender"
)

// guardError is a prune refusal by the guard limit.
type guardError struct {
	limit string
	err   error
}

func (e *guardError) Error() string { return e.err.Error() }
func (e *guardError) Unwrap() error { return e.err }

// refusal marks f as a refusal by the guard limit; its message is unchanged.
func refusal(limit string, f *Failure) *Failure {
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

// deleteStale deletes the stale objects of one instance in reverse apply order
// (see deleteStages), each stage gone before the next; only objects that still carry
// the instance's labels are deleted (see deleteStage).
func deleteStale(ctx context.Context, m *ssa.ResourceManager, s *pruneSet, timeout time.Duration) (*ssa.ChangeSet, error) {
	objects, err := s.stale.objects()
	if err != nil {
		return nil, stalled(cairnv1.ReasonPruneFailed, err)
	}
	all := ssa.NewChangeSet()
	for _, stage := range deleteStages(objects) {
		entries, terminating, err := deleteStage(ctx, m.Client(), stage, s)
		all.Append(entries)
		if err != nil {
			return all, classify(cairnv1.ReasonPruneFailed, err)
		}
		if err := waitGone(ctx, m.Client(), terminating, timeout); err != nil {
			return all, transient(cairnv1.ReasonPruneFailed, fmt.Errorf("failed to wait for deletion: %w", err))
		}
	}
	return all, nil
}

// deleteStages groups objects in reverse apply order (see deleteStage for the kinds).
func deleteStages(objects []*unstructured.Unstructured) [][]*unstructured.Unstructured {
	stages := make([][]*unstructured.Unstructured, len(deleteOrder)+1)
	for _, u := range objects {
		stages[deleteStageOf(u)] = append(stages[deleteStageOf(u)], u)
	}
	out := stages[:0]
	for _, s := range stages {
		if len(s) > 0 {
			out = append(out, s)
		}
	}
	return out
}
