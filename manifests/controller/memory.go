package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The controller's container holds the controller process and its render workers
// (child processes, each stopped when it passes its render's memory budget), under
// one memory limit. The workers' budgets together and the controller's own share
// (its caches, and the Helm and kustomize renders it runs in-process) must fit in
// the limit: RenderWorkers(limit, budget) × budget + ControllerMemory <= limit.
// `cairn controller` checks the same relation at start against the limit it reads
// from its cgroup (FitRenderWorkers).
const (
	// MemoryLimit is the container's memory limit.
	MemoryLimit int64 = 2 << 30
	// ControllerMemory is the controller process's own share of the limit; the
	// Deployment sets GOMEMLIMIT to it.
	ControllerMemory int64 = 512 << 20
	// RenderMemory is each render worker's budget (--render-memory), the
	// Platform's default renderMemory: a render that asks for more gets this.
	RenderMemory int64 = 512 << 20
	// MinRenderMemory is the smallest budget a worker is run with.
	MinRenderMemory int64 = 64 << 20
)

// GoMemLimit is the GOMEMLIMIT the Deployment gives the controller process: its
// own share, ControllerMemory (benchmarks run the controller with it too).
func GoMemLimit() string { return fmt.Sprintf("%dMiB", ControllerMemory>>20) }

// RenderWorkers is how many workers of budget fit beside the controller's share
// in limit (0 when none does).
func RenderWorkers(limit, budget int64) int {
	if budget <= 0 || limit <= ControllerMemory {
		return 0
	}
	return int((limit - ControllerMemory) / budget)
}

// RenderSizing is the number of render workers and the memory budget of each.
type RenderSizing struct {
	Workers int
	Budget  int64
}

// Total is what the workers may hold together.
func (s RenderSizing) Total() int64 { return int64(s.Workers) * s.Budget }

func (s RenderSizing) String() string {
	return fmt.Sprintf("%d render workers of %s", s.Workers, formatBytes(s.Budget))
}

// FitRenderWorkers fits want into a container of memory limit (0: no limit is
// known, want is kept): with fewer workers, down to one, and when one worker of
// want's budget does not fit either, with the budget left beside the controller's
// share. It returns the sizing and, when it changed want, why; it fails when less
// than MinRenderMemory is left for one worker.
func FitRenderWorkers(want RenderSizing, limit int64) (RenderSizing, string, error) {
	if limit <= 0 || want.Total()+ControllerMemory <= limit {
		return want, "", nil
	}
	why := fmt.Sprintf("%s and the controller's own %s exceed the container's memory limit of %s",
		want, formatBytes(ControllerMemory), formatBytes(limit))
	if n := RenderWorkers(limit, want.Budget); n >= 1 {
		return RenderSizing{Workers: n, Budget: want.Budget}, why, nil
	}
	left := limit - ControllerMemory
	if left < MinRenderMemory {
		return want, "", fmt.Errorf("failed to fit render workers: the container's memory limit of %s leaves less than %s for one render worker beside the controller's own %s: raise the limit",
			formatBytes(limit), formatBytes(MinRenderMemory), formatBytes(ControllerMemory))
	}
	return RenderSizing{Workers: 1, Budget: left &^ (1<<20 - 1)}, why, nil
}

// DefaultRenderSizing is the render workers of the Deployment: as many of
// RenderMemory as fit in MemoryLimit beside the controller, at most four.
func DefaultRenderSizing() RenderSizing {
	return RenderSizing{Workers: min(4, RenderWorkers(MemoryLimit, RenderMemory)), Budget: RenderMemory}
}

// formatBytes is n as a Kubernetes quantity (512Mi, 2Gi).
func formatBytes(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}
