// Command cairn reconciles a platform repository into a Kubernetes cluster.
//
// Exit codes: 0 success; 1 the command failed (bad flags, unreachable cluster or
// repository, unusable declarations); 2 the command ran but an instance failed (sync)
// or would fail (plan).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"cairn.dev/cairn/render"
)

// errInstancesFailed makes the process exit with code 2.
var errInstancesFailed = errors.New("one or more instances failed")

func main() {
	// A render worker is this binary started again by its own Renderer.
	render.ServeWorkerIfRequested()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRootCommand().ExecuteContext(ctx)
	switch {
	case err == nil:
	case errors.Is(err, errInstancesFailed):
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
