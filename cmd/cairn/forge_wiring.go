package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/reconciler"
)

// forgeWiring connects a sync loop to a forge: commit statuses through a bounded
// queue, pull-request plans, and webhooks that wake the loop.
type forgeWiring struct {
	flags *forgeFlags
	repo  *repoFlags
	log   logr.Logger

	client forge.Forge
	queue  *forge.Queue
	ref    forge.RepoRef
	limit  int
	report *reconciler.ForgeReporter

	trigger *forge.Trigger
	prs     chan int
	server  *http.Server

	mu   sync.Mutex
	hint string
}

func newForgeWiring(flags *forgeFlags, repo *repoFlags, log logr.Logger) (*forgeWiring, error) {
	w := &forgeWiring{flags: flags, repo: repo, log: log, trigger: forge.NewTrigger(), prs: make(chan int, 16)}
	client, limit, err := flags.client()
	if err != nil || client == nil {
		return w, err
	}
	gitURL, _ := repo.url()
	if w.ref, err = flags.repoRef(gitURL); err != nil {
		return nil, err
	}
	w.client, w.limit = client, limit
	qopts := forge.DefaultQueueOptions()
	qopts.Logger = log.WithName("forge")
	w.queue = forge.NewQueue(client, qopts)
	w.report = reconciler.NewForgeReporter(w.queue, w.ref, flags.targetURL)
	return w, nil
}

// reporter is the engine's reporter (nil without a forge).
func (w *forgeWiring) reporter() reconciler.Reporter {
	if w.report == nil {
		return nil
	}
	return w.report
}

func (w *forgeWiring) close() {
	if w.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.server.Shutdown(ctx); err != nil {
			w.log.Error(err, "failed to stop the webhook server cleanly")
		}
	}
	if w.queue != nil {
		if err := w.queue.Close(); err != nil {
			w.log.Error(err, "gave up forge updates at exit")
		}
	}
}

// listen serves the webhooks when --listen is set.
func (w *forgeWiring) listen(ctx context.Context) error {
	if w.flags.listen == "" {
		return nil
	}
	secret, err := readSecretFile(w.flags.webhookSecretFile, "--webhook-secret-file")
	if err != nil {
		return err
	}
	opts := forge.DefaultReceiverOptions()
	opts.Hooks = w.flags.providers().Hooks(secret)
	opts.Branch = w.repo.branch
	opts.Logger = w.log.WithName("webhooks")
	if w.ref.Name != "" {
		opts.Repos = []string{w.ref.String()}
	}
	recv, err := forge.NewReceiver(opts, w.onEvent)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/hooks/", recv)
	w.server = forge.NewServer(w.flags.listen, mux)
	go func() {
		if err := w.server.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error(err, "webhook server stopped", "address", w.flags.listen)
		}
	}()
	return nil
}

// onEvent turns a verified delivery into a wake-up; bursts coalesce.
func (w *forgeWiring) onEvent(ev forge.Event) {
	switch e := ev.(type) {
	case forge.Push:
		w.mu.Lock()
		w.hint = e.SHAHint
		w.mu.Unlock()
		w.trigger.Fire()
	case forge.PullRequest:
		select {
		case w.prs <- e.Number:
		default: // a full queue of plans: this one comes with the next update of the PR
		}
	}
}

func (w *forgeWiring) pushes() <-chan struct{}  { return w.trigger.C() }
func (w *forgeWiring) pullRequests() <-chan int { return w.prs }

func (w *forgeWiring) pushHint() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.hint
	w.hint = ""
	return h
}

// plan renders a pull request's base and head with the sync's engine, posts the plan
// as the PR's single cairn comment and a cairn/plan status on the head SHA, and keeps
// the full JSON plan under the cache directory.
func (w *forgeWiring) plan(ctx context.Context, e *reconciler.Engine, repo *repoFlags, number int) {
	if w.client == nil {
		return
	}
	pr, err := w.client.PullRequest(ctx, w.ref, number)
	if err != nil {
		w.log.Error(err, "failed to read a pull request", "pr", number)
		return
	}
	w.status(pr.HeadSHA, forge.StatePending, "planning")
	plan, err := w.planPR(ctx, e, repo, pr)
	if err != nil {
		w.log.Error(err, "failed to plan a pull request", "pr", number, "revision", pr.HeadSHA)
		w.status(pr.HeadSHA, forge.StateError, "plan failed: "+err.Error())
		return
	}
	w.queue.PostPlanComment(w.ref, number, forge.PlanComment(plan.Markdown()+w.keptNote(number), w.limit))
	state, desc := planOutcome(plan)
	w.status(plan.Revision, state, desc)
	if err := w.keepPlan(number, plan); err != nil {
		w.log.Error(err, "failed to keep the JSON plan", "pr", number, "revision", plan.Revision)
	}
}

func (w *forgeWiring) planPR(ctx context.Context, e *reconciler.Engine, repo *repoFlags, pr forge.PR) (*reconciler.Plan, error) {
	base, err := repo.revisionOfRef(ctx, pr.BaseRef)
	if err != nil {
		return nil, err
	}
	headRepo := *repo
	if pr.Fork {
		// a fork is read anonymously: no credential of ours is sent to it
		headRepo.repo, headRepo.username, headRepo.passwordFile, headRepo.sshKey = forkURL(repo.repo, pr.HeadRepoFullName), "", "", ""
	}
	head, err := headRepo.revisionOfRef(ctx, pr.HeadRef)
	if err != nil {
		return nil, err
	}
	return e.PlanChange(ctx, base, head)
}

func (w *forgeWiring) status(sha string, state forge.State, desc string) {
	w.queue.PostStatus(w.ref, sha, forge.Status{Context: "cairn/plan", State: state, Description: desc, TargetURL: w.flags.targetURL})
}

// planOutcome is the cairn/plan status: failure naming the first error (file:line),
// else the counts.
func planOutcome(p *reconciler.Plan) (forge.State, string) {
	if p.Error != "" {
		return forge.StateFailure, p.Error
	}
	create, configure, prune := 0, 0, 0
	for _, i := range p.Instances {
		if i.Error != "" {
			return forge.StateFailure, fmt.Sprintf("%s/%s: %s", i.Namespace, i.Name, i.Error)
		}
		create, configure, prune = create+len(i.Create), configure+len(i.Configure), prune+len(i.Prune)
	}
	return forge.StateSuccess, fmt.Sprintf("%d to create, %d to configure, %d to prune", create, configure, prune)
}

func (w *forgeWiring) planPath(number int) string {
	return filepath.Join(w.repo.cacheDir, "plans", w.ref.Owner, w.ref.Name, fmt.Sprintf("pr-%d.json", number))
}

func (w *forgeWiring) keptNote(number int) string {
	return fmt.Sprintf("\n\n<sub>The full plan (JSON) is kept by cairn at `%s`.</sub>\n", w.planPath(number))
}

func (w *forgeWiring) keepPlan(number int, p *reconciler.Plan) error {
	path := w.planPath(number)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// forkURL is the Git URL of the fork: the repository URL with its owner/name path
// replaced, and no user information.
func forkURL(repoURL, fullName string) string {
	u, err := url.Parse(repoURL)
	if err != nil || u.Host == "" {
		return repoURL
	}
	u.User = nil
	u.Path = "/" + strings.Trim(fullName, "/") + ".git"
	return u.String()
}
