package reconciler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/contracts"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/prune"
	"cairn.dev/cairn/reconciler/status"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/render/declarations"
)

// instancePlan is what the plan decides of one instance at a revision: its
// declaration, the CR as the revision step found it, the digests of its input and
// whether the revision affects it, and why. plan sets it (planInstance, then
// markDependents) before any reconcile starts, and nothing writes it after but a
// replica's holdInput, which plans again, under the cluster view's lock and before
// the instance's reconcile starts, an instance whose CR no reconcile has attempted.
// The phases read it; they never write it.
type instancePlan struct {
	mi *cairnv1.ModuleInstance // the declaration from Git
	// was is the CR as the revision step found it (nil: none), never replaced: the
	// plan and the verdicts over the revision read it while instance reconciles
	// work on the CR as written (instanceReconcile.live).
	was          *cairnv1.ModuleInstance
	specDigest   string
	sourceDigest string   // local modules: digest of the module directory
	sourceDirs   []string // the repository directories sourceDigest covers
	// inputDigest covers everything the render reads (see inputDigest); refresh is
	// its part that no file holds: the last refresh of the Registries it uses
	// (refreshAnnotation).
	inputDigest string
	refresh     string
	affected    bool
	why         string
	// forced: every object is applied again, unchanged or not (a requested reconcile).
	forced bool
	// held: a hold (cairn hold) keeps the instance at its render, and the revision
	// leaves it as it is; releaseHold: a hold --until-change that this revision ends,
	// as it changes the instance (the revision step removes its annotation).
	held, releaseHold bool
	// rollback is the earlier render a rollback (cairn rollback) applies again at
	// this revision, from status.history (nil: none).
	rollback *cairnv1.HistoryEntry
}

func (p *instancePlan) key() string { return p.mi.Namespace + "/" + p.mi.Name }

// instanceState is one instance in the revision's state: its plan, the CR the
// revision step wrote, its render as settled and the revision's verdicts on it,
// and, once its reconcile is done, its result. The reconcile itself (what it reads
// and writes of the CR, what its phases return) is an instanceReconcile of its own.
type instanceState struct {
	// The plan: set by plan, before any reconcile.
	instancePlan
	// mirrored is the CR as the revision step wrote the instance's input into it
	// (see writeInputs); the instance reconcile works on it. mirrorErr says why it
	// could not be written.
	mirrored  *cairnv1.ModuleInstance
	mirrorErr error
	// remote is the outcome of an instance another replica reconciled, as its CR
	// records it (a sharded sync's, see awaitAttempts).
	remote *InstanceOutcome

	// What the render phase returns and the revision decides of it, kept for the
	// instance's reconcile and for the verdicts over the revision. render is the
	// render phase's (renderOne); the placement takes its render and returns the
	// embedded placedRender (the placed objects, the render with its keyed digest,
	// its warnings, and the artifact it was published as); instanceVerdicts are what
	// the revision decides of the instance once rendered (settle, or the barrier over
	// every render: see barrier.go); failure is why it fails before its reconcile
	// starts (its render, its placement, a verdict), written before settled is
	// closed or, by the barrier, before any reconcile that reads it starts.
	render rendering
	placedRender
	instanceVerdicts
	failure *outcome.Failure
	// secretNote reports a rotation of an instance the revision does not affect
	// (rotateUnaffected).
	secretNote string
	// final is its result once its reconcile is done and its render released
	// (releaseRender); nil before.
	final *InstanceResult

	// How a sync's reconciles meet: renderOnce renders and settles each instance
	// once (see RevisionState.renderHeld); placed is closed once its objects are
	// placed or its render failed, settled once settle has decided (a sync's; nil in
	// a plan).
	renderOnce sync.Once
	placed     chan struct{}
	settled    chan struct{}
}

// instanceVerdicts are what a revision decides of one instance over its render and
// the others': the last inventory it is judged against, whether it applies alone,
// its provider contracts, its prune verdict, and the kinds it withdraws.
type instanceVerdicts struct {
	// oldInv is the last inventory; oldLoaded: it was read once the render was done
	// (settle). leftInventory: the instance has no CR and oldInv was found in
	// cairn's namespace (see adoptedInventory); that Secret is removed once the
	// instance records an inline one.
	oldInv        apply.Inventory
	oldLoaded     bool
	leftInventory bool
	// fast: its apply waits for no other render of the revision (see barrier.go);
	// contracts are then its own.
	fast      bool
	contracts *contracts.Set
	// prune is what it would delete, pruneErr why the guards refuse it.
	prune    *prune.Set
	pruneErr error
	// withdrawn are the kinds its render no longer provides while others use them;
	// withheld are their CRDs, kept in its inventory (ContractWithdrawn).
	withdrawn []withdrawal
	withheld  apply.Inventory
}

// plan decides which instances this revision affects and which left Git. An
// instance is affected when it is new, failed and due for a retry (see retryDue: at
// a new revision, or once status.nextRetryAt has passed), its declaration or the
// Platform or a Registry it uses changed, its local module changed, the cluster's
// capabilities changed since its chart was rendered (discovered before: see
// discoverForCharts), or a dependency is affected. The diff narrows the candidates;
// the digests recorded on the CRs decide, so a wrong or missing diff costs time, never
// correctness.
func (s *RevisionState) plan() {
	for _, mi := range s.set.Instances {
		r := s.newInstanceRun(mi)
		s.runs = append(s.runs, r)
		s.byKey[r.key()] = r
	}
	for _, r := range s.runs {
		if r.affected {
			s.markDependents(r)
		}
	}
	s.findRemoved()
}

func (s *RevisionState) newInstanceRun(mi *cairnv1.ModuleInstance) *instanceState {
	return &instanceState{instancePlan: s.planInstance(mi, s.live[mi.Namespace+"/"+mi.Name])}
}

// planInstance is the plan of mi, whose CR is was (nil: none): its digests and
// whether the revision affects it.
func (s *RevisionState) planInstance(mi, was *cairnv1.ModuleInstance) instancePlan {
	p := instancePlan{mi: mi, was: was, specDigest: s.specDigest(mi)}
	p.sourceDigest, p.sourceDirs = s.repositorySource(mi)
	if was != nil {
		p.refresh = was.Annotations[refreshAnnotation]
	}
	p.inputDigest = inputDigest(p.specDigest, p.sourceDigest, p.refresh)
	p.affected, p.why = s.isAffected(&p)
	return p
}

// isAffected decides whether the revision affects p, and why; a requested
// reconcile sets p.forced, a Registry's new refresh p.refresh and p.inputDigest.
func (s *RevisionState) isAffected(p *instancePlan) (bool, string) {
	refreshed := s.refreshed(p.mi)
	switch {
	case p.mi.Spec.Suspend:
		return false, "suspended"
	case status.SuspendAnnotated(p.was):
		return false, "suspended in the cluster (cairn suspend)"
	case p.was == nil:
		return true, "new instance"
	case s.holds(p):
		return false, heldWhy(p)
	case p.rollback != nil:
		if p.was.Status.LastAttemptedInput == p.inputDigest && !status.IsReady(p.was) {
			if due, why := retryDue(p.was, s.rev.SHA, s.now); !due {
				return false, why
			}
		}
		return true, rollbackWhy(p)
	case status.IsSuspended(p.was):
		return true, "resumed"
	case reconcileRequested(p.was):
		p.forced = true
		return true, "reconcile requested (cairn reconcile): every object applied again"
	case refreshed != "":
		// A new refresh is a new input, written on the CR, so that the reconcile of
		// any replica is woken and renders and verifies it again.
		p.refresh = refreshed + "@" + s.now.UTC().Format(time.RFC3339Nano)
		p.inputDigest = inputDigest(p.specDigest, p.sourceDigest, p.refresh)
		return true, refreshedWhy(p.refresh)
	case !status.IsReady(p.was):
		if due, why := retryDue(p.was, s.rev.SHA, s.now); due {
			return true, why
		}
	}
	switch {
	case p.was.Status.LastAttemptedInput != p.inputDigest:
		return true, inputChange(p)
	case p.was.Generation != p.was.Status.ObservedGeneration:
		return true, "spec changed since the last sync (an interrupted sync or an edit in the cluster)"
	case status.IsReady(p.was) && s.capabilitiesChanged(p):
		return true, "the cluster's capabilities changed (its Kubernetes version or the API versions it serves): the chart renders again"
	case !status.IsReady(p.was):
		_, why := retryDue(p.was, s.rev.SHA, s.now)
		return false, why
	}
	return false, "unchanged"
}

// inputDigest is the digest of everything an instance's render reads: specDigest
// (its declaration, the Platform's spec and the Registries it uses), sourceDigest
// (the files of its module in the repository) and refresh (the last time the
// Secrets or ConfigMaps of a Registry it uses changed in the cluster, "" when
// never). The revision step writes it on the CR (inputDigestAnnotation) and each
// attempt records it (status.lastAttemptedInput): a commit that leaves it
// unchanged leaves the instance alone, whatever paths the commit touched.
func inputDigest(specDigest, sourceDigest, refresh string) string {
	if refresh == "" {
		return digestJSON([]string{specDigest, sourceDigest})
	}
	return digestJSON([]string{specDigest, sourceDigest, refresh})
}

// refreshedWhy says why an instance whose Registry was refreshed is rendered again.
func refreshedWhy(refresh string) string {
	return "the Secrets or ConfigMaps of Registry " + refreshedRegistry(refresh) + " changed in the cluster: rendered and verified again"
}

// refreshedRegistry is the Registry a refresh ("<registry>@<time>") names.
func refreshedRegistry(refresh string) string {
	name, _, _ := strings.Cut(refresh, "@")
	return name
}

// unrefreshed are the Registries of this sync's refresh whose new input could not be
// written into the CR of an instance that uses them (see refreshAnnotation): that
// instance keeps its old input, and no reconcile would verify it again unless the
// next sync refreshes them again.
func (s *RevisionState) unrefreshed() []string {
	var out []string
	for _, r := range s.runs {
		if r.mirrorErr == nil || r.refresh == "" || (r.was != nil && r.was.Annotations[refreshAnnotation] == r.refresh) {
			continue
		}
		if name := refreshedRegistry(r.refresh); !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// inputChange says what changed in r's input since its last attempt.
func inputChange(p *instancePlan) string {
	switch k := moduleKindOf(p.mi); {
	case p.was.Status.LastAttemptedInput == "":
		return "input digest not recorded yet (the first sync by this version of cairn): rendered again"
	case p.was.Annotations[specDigestAnnotation] != p.specDigest:
		return "declaration changed"
	case p.sourceDigest != p.was.Status.SourceDigest && k != nil && k.sourceChange() != "":
		return k.sourceChange()
	case p.refresh != "": // the declaration and module as attempted: the Registry's refresh is what is new
		return refreshedWhy(p.refresh)
	}
	return "input written at " + gitsource.ShortSHA(p.was.Annotations[inputRevisionAnnotation]) + " not synced yet"
}

func (s *RevisionState) markDependents(r *instanceState) {
	for _, dep := range s.set.Dependents(r.mi.Namespace, r.mi.Name) {
		if d := s.byKey[dep.Namespace+"/"+dep.Name]; d != nil && !d.affected && !d.suspended() && !d.held {
			d.affected, d.why = true, "dependency "+r.key()+" changed"
		}
	}
}

// findRemoved lists the CRs whose declaration left Git. An invalid declaration still
// names its instance, so that instance is kept; so is one whose file could not be read
// (see heldFile): it is held, neither applied nor removed.
func (s *RevisionState) findRemoved() {
	for key, live := range s.live {
		if s.byKey[key] != nil {
			continue
		}
		if _, declared := s.set.Origins[declarations.Key(cairnv1.ModuleInstanceKind, live.Namespace, live.Name)]; declared {
			continue
		}
		if _, held := s.heldFile(live); held {
			s.held = append(s.held, live)
			continue
		}
		s.removed = append(s.removed, live)
	}
}

// specDigest covers everything from Git that the render and apply of mi depend on:
// its spec, the Platform's spec, and the spec of every Registry its render uses (see
// usedRegistries), so that a changed key, CA or credentials reference re-renders and
// re-verifies every instance that uses that Registry.
func (in *revisionInput) specDigest(mi *cairnv1.ModuleInstance) string {
	parts := []any{mi.Spec, in.set.Platform.Spec}
	for _, reg := range usedRegistries(in.set, mi) {
		parts = append(parts, reg.Name, reg.Spec)
	}
	return digestJSON(parts)
}

// usedRegistries are the Registries the render of mi reads or writes: its chart's
// (by the hostname of the chart URL), the Platform's moduleRegistry for a CUE module
// or for any module rendered against catalogs, and the publish Registry when the
// Platform publishes renders. Sorted by name, without repeats.
func usedRegistries(set *declarations.Set, mi *cairnv1.ModuleInstance) []*cairnv1.Registry {
	p := set.Platform.Spec
	used := map[string]bool{}
	if ref, _, ok, err := ociModule(mi); ok {
		for _, reg := range set.Registries {
			used[reg.Name] = used[reg.Name] || (err == nil && reg.Spec.Hostname == ref.Host)
		}
	} else if k := moduleKindOf(mi); k != nil && k.usesModuleRegistry(p) {
		used[p.ModuleRegistry] = true
	}
	if p.Render.Publish != nil {
		used[p.Render.Publish.Registry] = true
	}
	var out []*cairnv1.Registry
	for _, reg := range set.Registries {
		if used[reg.Name] {
			out = append(out, reg)
		}
	}
	return out
}

// refreshed is the first Registry that mi's render uses among those whose Secrets
// or ConfigMaps changed in the cluster (Revision.Refreshed), or "".
func (in *revisionInput) refreshed(mi *cairnv1.ModuleInstance) string {
	if len(in.rev.Refreshed) == 0 {
		return ""
	}
	for _, reg := range usedRegistries(in.set, mi) {
		if slices.Contains(in.rev.Refreshed, reg.Name) {
			return reg.Name
		}
	}
	return ""
}

func digestJSON(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func cleanLocal(p string) string {
	p = strings.TrimPrefix(p, "./")
	return strings.TrimSuffix(p, "/")
}

// cleanKustomize is a kustomize path relative to the repository root: "./apps/x/" is
// "apps/x", "./" and "." are the root ".".
func cleanKustomize(p string) string {
	if p = cleanLocal(p); p == "" {
		return "."
	}
	return p
}

func splitKey(key string) (string, string) {
	ns, name, ok := strings.Cut(key, "/")
	if !ok {
		return "", key
	}
	return ns, name
}

// repositorySource returns the digest of what mi's module reads from the repository
// and the directories that holds ("" and none for a registry module or chart): see
// moduleKind.source.
func (s *RevisionState) repositorySource(mi *cairnv1.ModuleInstance) (string, []string) {
	if k := moduleKindOf(mi); k != nil {
		return k.source(s)
	}
	return "", nil
}

// linkedModuleDigest is the digest of a module directory of the repository and of
// what its symbolic links lead to (see render.LinkedPaths), and those paths: a
// change to a linked schema re-renders the module. A module whose links would be
// refused has the digest of its directory: its render says why.
func (s *RevisionState) linkedModuleDigest(dir string) (string, []string) {
	dir = cleanLocal(dir)
	d := s.moduleDigest(dir)
	if s.root == nil || len(s.root.Links()) == 0 {
		return d, []string{dir}
	}
	targets, err := render.LinkedPaths(s.root, dir, tenantPaths(s.set))
	if err != nil || len(targets) == 0 {
		return d, []string{dir}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", dir, d)
	for _, p := range targets {
		content, _ := s.root.Bytes(p)
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00", p, s.moduleDigest(p), len(content))
		h.Write(content)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), append([]string{dir}, targets...)
}

// moduleDigest is the digest of a local module's files, computed once per directory
// and sync (many instances share a module).
func (s *RevisionState) moduleDigest(path string) string {
	dir := cleanLocal(path)
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.moduleDigests[dir]; ok {
		return d
	}
	d := s.root.DigestDir(dir)
	s.moduleDigests[dir] = d
	return d
}
