package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/plans"
)

// PlanEngine is what a Planner needs of reconciler.Engine.
type PlanEngine interface {
	PlanChange(ctx context.Context, base, head reconciler.Revision) (*reconciler.Plan, error)
}

// Poster posts commit statuses and plan comments without blocking; *forge.Queue is it.
type Poster interface {
	PostStatus(repo forge.RepoRef, sha string, st forge.Status)
	PostPlanComment(repo forge.RepoRef, pr int, body string)
}

// PlannerOptions configure a Planner.
type PlannerOptions struct {
	// Engine plans; Forge reads pull requests; Poster posts the plan and statuses.
	Engine PlanEngine
	Forge  forge.Forge
	Poster Poster
	// Repo is the repository on the forge; CommentLimit the forge's comment size.
	Repo         forge.RepoRef
	CommentLimit int
	// Git reads the base and, for a PR from the same repository, the head; the head
	// of a fork is read with Git.Fork, anonymously.
	Git *GitRepo
	// PlanDir keeps each plan as JSON (<PlanDir>/<owner>/<name>/pr-<n>.json).
	PlanDir string
	// Store, when set, keeps each plan in the cluster too (for the dashboard), and
	// what became of its pull request once closed or merged.
	Store *plans.Store
	// TargetURL is linked from the cairn/plan status.
	TargetURL string
	// MaxPending bounds the pull requests waiting for a plan (default 64); beyond
	// it a request is dropped and planned at the PR's next update.
	MaxPending int
	Log        logr.Logger
}

// Planner plans pull requests one at a time, on its own goroutine (Run), apart from
// the sync loop: a slow plan never delays a sync. Requests for a pull request that
// is already waiting coalesce into one plan of its newest head.
type Planner struct {
	opts PlannerOptions

	mu      sync.Mutex
	pending []int
	waiting map[int]bool
	wake    chan struct{}
}

// NewPlanner returns a Planner; nothing is planned until Run.
func NewPlanner(opts PlannerOptions) *Planner {
	if opts.MaxPending <= 0 {
		opts.MaxPending = 64
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &Planner{opts: opts, waiting: map[int]bool{}, wake: make(chan struct{}, 1)}
}

// Enqueue asks for a plan of pull request number; it never blocks.
func (p *Planner) Enqueue(number int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting[number] {
		return // the plan to come reads the PR's newest head
	}
	if len(p.pending) >= p.opts.MaxPending {
		p.opts.Log.Info("too many pull requests waiting for a plan: this one is planned at its next update", "pr", number)
		return
	}
	p.pending = append(p.pending, number)
	p.waiting[number] = true
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run plans the pull requests enqueued, in order, until ctx ends.
func (p *Planner) Run(ctx context.Context) {
	for {
		number, ok := p.next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
			}
			continue
		}
		p.plan(ctx, number)
		if ctx.Err() != nil {
			return
		}
	}
}

func (p *Planner) next() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) == 0 {
		return 0, false
	}
	n := p.pending[0]
	p.pending = p.pending[1:]
	delete(p.waiting, n)
	return n, true
}

// plan renders a pull request's base and head with the engine, posts the plan as
// the PR's single cairn comment and a cairn/plan status on the head SHA, and keeps
// the full JSON plan under PlanDir.
func (p *Planner) plan(ctx context.Context, number int) {
	pr, err := p.opts.Forge.PullRequest(ctx, p.opts.Repo, number)
	if err != nil {
		p.opts.Log.Error(err, "failed to read a pull request", "pr", number)
		return
	}
	if pr.State != "" && pr.State != forge.PROpen { // closed or merged: its plan is kept as it was
		if p.opts.Store != nil {
			if err := p.opts.Store.SetState(ctx, number, pr.State, pr.MergeSHA); err != nil {
				p.opts.Log.Error(err, "failed to record a closed pull request", "pr", number)
			}
		}
		return
	}
	p.status(pr.HeadSHA, forge.StatePending, "planning")
	plan, err := p.planPR(ctx, pr)
	if err != nil {
		p.opts.Log.Error(err, "failed to plan a pull request", "pr", number, "revision", pr.HeadSHA)
		p.status(pr.HeadSHA, forge.StateError, "plan failed: "+err.Error())
		return
	}
	p.opts.Poster.PostPlanComment(p.opts.Repo, number, forge.PlanComment(plan.Markdown()+p.keptNote(number), p.opts.CommentLimit))
	state, desc := planOutcome(plan)
	p.status(plan.Revision, state, desc)
	if err := p.keepPlan(number, plan); err != nil {
		p.opts.Log.Error(err, "failed to keep the JSON plan", "pr", number, "revision", plan.Revision)
	}
	if p.opts.Store != nil {
		rec := &plans.Record{Number: number, HeadSHA: plan.Revision, BaseSHA: plan.Base, HeadRef: pr.HeadRef, BaseRef: pr.BaseRef,
			Fork: pr.Fork, State: forge.PROpen, PlannedAt: time.Now().UTC(), Plan: plan}
		if err := p.opts.Store.Save(ctx, rec); err != nil {
			p.opts.Log.Error(err, "failed to keep the plan in the cluster", "pr", number, "revision", plan.Revision)
		}
	}
}

func (p *Planner) planPR(ctx context.Context, pr forge.PR) (*reconciler.Plan, error) {
	base, err := p.opts.Git.ReadRef(ctx, pr.BaseRef)
	if err != nil {
		return nil, err
	}
	headRepo := p.opts.Git
	if pr.Fork {
		headRepo = headRepo.Fork(pr.HeadRepoFullName)
	}
	head, err := headRepo.ReadRef(ctx, pr.HeadRef)
	if err != nil {
		return nil, err
	}
	return p.opts.Engine.PlanChange(ctx, base, head)
}

func (p *Planner) status(sha string, state forge.State, desc string) {
	p.opts.Poster.PostStatus(p.opts.Repo, sha, forge.Status{Context: "cairn/plan", State: state, Description: desc, TargetURL: p.opts.TargetURL})
}

// planOutcome is the cairn/plan status: failure naming the first error (file:line),
// else the counts.
func planOutcome(plan *reconciler.Plan) (forge.State, string) {
	if plan.Error != "" {
		return forge.StateFailure, plan.Error
	}
	create, configure, prune := 0, 0, 0
	for _, i := range plan.Instances {
		if i.Error != "" {
			return forge.StateFailure, fmt.Sprintf("%s/%s: %s", i.Namespace, i.Name, i.Error)
		}
		create, configure, prune = create+len(i.Create), configure+len(i.Configure), prune+len(i.Prune)
	}
	return forge.StateSuccess, fmt.Sprintf("%d to create, %d to configure, %d to prune", create, configure, prune)
}

func (p *Planner) planPath(number int) string {
	return filepath.Join(p.opts.PlanDir, p.opts.Repo.Owner, p.opts.Repo.Name, fmt.Sprintf("pr-%d.json", number))
}

func (p *Planner) keptNote(number int) string {
	return fmt.Sprintf("\n\n<sub>The full plan (JSON) is kept by cairn at `%s`.</sub>\n", p.planPath(number))
}

func (p *Planner) keepPlan(number int, plan *reconciler.Plan) error {
	path := p.planPath(number)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("failed to keep the plan: %w", err)
	}
	b, err := json.MarshalIndent(plan, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode the plan: %w", err)
	}
	return os.WriteFile(path, b, 0o644)
}
