package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"cairn.dev/cairn/manifests/controller"
	"cairn.dev/cairn/render"
)

// renderFlags size the controller's render workers: child processes in the
// controller's container, each stopped when it passes its render's budget. Their
// budgets together and the controller's own share must fit in the container's
// memory limit (manifests/controller, memory.go); the controller checks it at start.
type renderFlags struct {
	workers int
	memory  string
}

func (f *renderFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&f.workers, "render-workers", 0, "render worker processes (0: as many as fit in the container's memory limit beside the controller, at most max(4, CPUs)); lowered, with a logged error, when they do not fit")
	fl.StringVar(&f.memory, "render-memory", "512Mi", "the most memory one render worker may use: a Platform's or tenant's renderMemory above it is lowered to it")
}

// sizing is the render workers the flags ask for, fitted to the container's memory
// limit (0: none known): fewer workers (or, for one, a smaller budget) when they do
// not fit, said in the log; an error when not even one worker fits.
func (f *renderFlags) sizing(limit int64, log logr.Logger) (controller.RenderSizing, error) {
	q, err := resource.ParseQuantity(f.memory)
	if err != nil || q.Value() <= 0 {
		return controller.RenderSizing{}, fmt.Errorf("--render-memory %q is not a positive quantity (such as 512Mi)", f.memory)
	}
	if f.workers < 0 {
		return controller.RenderSizing{}, fmt.Errorf("--render-workers must not be negative")
	}
	want := controller.RenderSizing{Workers: f.workers, Budget: q.Value()}
	if want.Workers == 0 {
		want.Workers = render.DefaultRendererOptions().MaxEvaluations
	}
	got, why, err := controller.FitRenderWorkers(want, limit)
	switch {
	case err != nil:
		return got, err
	case why != "" && f.workers > 0: // asked for explicitly: a misconfiguration
		log.Error(errors.New(why), "render workers lowered to fit the container's memory limit",
			"asked", want.String(), "running", got.String(), "memoryLimit", limit)
	case why != "":
		log.Info("render workers sized to the container's memory limit", "running", got.String(), "memoryLimit", limit)
	}
	return got, nil
}

// rendererOptions are the renderer options of sizing.
func rendererOptions(s controller.RenderSizing) render.RendererOptions {
	ro := render.DefaultRendererOptions()
	ro.MaxEvaluations, ro.MaxAbandoned, ro.MaxWorkerMemory = s.Workers, s.Workers, s.Budget
	return ro
}

// limitOwnMemory gives the Go runtime of this process, when GOMEMLIMIT is not set,
// the share of the container's memory limit that the render workers leave.
func limitOwnMemory(limit int64, s controller.RenderSizing, log logr.Logger) {
	if limit <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	own := limit - s.Total()
	debug.SetMemoryLimit(own)
	log.Info("the controller's own memory limit (GOMEMLIMIT) is what the render workers leave", "bytes", own)
}

// cgroupMemoryLimit is the memory limit of this process's container, from fsys (the
// root file system): cgroup v2's memory.max, else cgroup v1's
// memory.limit_in_bytes; 0 when there is none or it cannot be read.
func cgroupMemoryLimit(fsys fs.FS) int64 {
	for _, p := range []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 { // "max", or cgroup v1's near-MaxInt64 for none
			return 0
		}
		return n
	}
	return 0
}
