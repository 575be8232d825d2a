package main

import (
	"path/filepath"

	"github.com/go-logr/logr"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/reconciler/loop"
	"cairn.dev/cairn/reconciler/plans"
	"cairn.dev/cairn/reconciler/report"
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
	report *report.ForgeReporter

	plans *loop.Planner
	hooks *loop.Webhooks
}

func newForgeWiring(flags *forgeFlags, repo *repoFlags, log logr.Logger) (*forgeWiring, error) {
	w := &forgeWiring{flags: flags, repo: repo, log: log}
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
	w.report = report.NewForgeReporter(w.queue, w.ref, flags.targetURL)
	return w, nil
}

// reporter is the engine's reporter (nil without a forge).
func (w *forgeWiring) reporter() report.Reporter {
	if w.report == nil {
		return nil
	}
	return w.report
}

// planner plans pull requests with e (nil without a forge). The repository's Git
// options come from the flags; a fork's head is read anonymously (loop.GitRepo.Fork).
func (w *forgeWiring) planner(e loop.PlanEngine) *loop.Planner {
	return w.plannerKeeping(e, nil)
}

// plannerKeeping is planner, keeping the plans in store too (nil: on disk only).
func (w *forgeWiring) plannerKeeping(e loop.PlanEngine, store *plans.Store) *loop.Planner {
	if w.client == nil {
		return nil
	}
	opts, err := w.repo.gitOptions()
	if err != nil {
		w.log.Error(err, "pull requests are not planned")
		return nil
	}
	w.plans = loop.NewPlanner(loop.PlannerOptions{
		Engine: e, Forge: w.client, Poster: w.queue, Repo: w.ref, CommentLimit: w.limit,
		Git: loop.NewGitRepo(opts, ""), PlanDir: w.planDir(),
		TargetURL: w.flags.targetURL, Log: w.log.WithName("plans"), Store: store,
	})
	return w.plans
}

// planDir is where the planner keeps its plans ("" without a forge).
func (w *forgeWiring) planDir() string {
	if w.client == nil {
		return ""
	}
	return filepath.Join(w.repo.cacheDir, "plans")
}

func (w *forgeWiring) close() {
	if w.hooks != nil {
		if err := w.hooks.Close(); err != nil {
			w.log.Error(err, "failed to stop the webhook server cleanly")
		}
	}
	if w.queue != nil {
		if err := w.queue.Close(); err != nil {
			w.log.Error(err, "gave up forge updates at exit")
		}
	}
}

// listen serves the webhooks when --listen is set: a push wakes l, a pull request
// is queued for a plan.
func (w *forgeWiring) listen(l *loop.Loop) error {
	return w.serve(w.flags.listen, func(p forge.Push) { l.Push(p.SHAHint) }, w.onPullRequest)
}

// serve serves the webhooks on addr ("": none), passing pushes to onPush and pull
// requests to onPR.
func (w *forgeWiring) serve(addr string, onPush func(forge.Push), onPR func(forge.PullRequest)) error {
	if addr == "" {
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
	w.hooks, err = loop.Listen(loop.WebhookOptions{Address: addr, Receiver: opts, OnPush: onPush,
		OnPullRequest: onPR, Log: w.log.WithName("webhooks")})
	return err
}

// onPullRequest queues a plan of the pull request.
func (w *forgeWiring) onPullRequest(pr forge.PullRequest) {
	if w.plans != nil {
		w.plans.Enqueue(pr.Number)
	}
}
