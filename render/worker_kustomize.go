package render

import (
	"context"
	"fmt"
)

// kustomizeJob is a kustomize build for a worker: the directory to build and
// every file the build may read (stageKustomize), by repository-relative path.
type kustomizeJob struct {
	Dir    string            `json:"dir"`
	Files  map[string][]byte `json:"files"`
	Limits Limits            `json:"limits"`
}

// renderKustomizeInWorker builds req's kustomize directory in one of the
// Renderer's worker processes: the files are read and checked here and sent to
// the worker, which runs krusty under the render's memory budget; at the
// deadline the worker is killed and its place freed at once.
func (r *Renderer) renderKustomizeInWorker(ctx context.Context, req Request) (*Result, error) {
	limits := r.capWorkerMemory(req.Limits.withDefaults())
	ctx, cancel := context.WithTimeout(ctx, limits.Timeout)
	defer cancel()
	res, err := r.kustomizeInWorker(ctx, req, limits)
	if err != nil {
		return nil, fmt.Errorf("kustomize directory %s: %w", req.KustomizePath, err)
	}
	return res, nil
}

func (r *Renderer) kustomizeInWorker(ctx context.Context, req Request, limits Limits) (*Result, error) {
	in, err := stageKustomize(req, limits)
	if err != nil {
		return nil, err
	}
	w, err := r.pool.acquire(ctx, req.Tenant)
	if err != nil {
		if ctx.Err() != nil {
			return nil, busyError(ctx, limits)
		}
		return nil, err
	}
	job := &kustomizeJob{Dir: in.dir, Files: in.files, Limits: limits}
	m, keep, err := w.call(ctx, workerMessage{Kustomize: job}, limits.Memory, nil)
	r.pool.release(w, keep, req.Tenant)
	switch {
	case err != nil && !keep && ctx.Err() != nil:
		return nil, timeoutError(ctx, limits, "during the kustomize build (its worker process was stopped)")
	case err != nil:
		return nil, r.explainCap(err, req.Limits.withDefaults().Memory, limits.Memory)
	case m.Result == nil:
		return nil, newError(ReasonRenderFailed, "render worker answered a kustomize build with no result")
	}
	return assemble(m.Result.evaluated().objects, req.Namespace, in.digest, nil)
}

// serveKustomize builds a kustomize directory in the worker, under the
// render's memory budget; the parent keeps the deadline.
func (s *workerServer) serveKustomize(job *kustomizeJob) workerMessage {
	s.startBudget(job.Limits.Memory, 0, 0)
	defer s.budget.Store(0)
	objs, err := runKrusty(job.Dir, job.Files, job.Limits.withDefaults())
	if err != nil {
		return workerMessage{Error: toWorkerError(err)}
	}
	return workerMessage{Result: toWorkerResult(evaluated{objects: objs})}
}
