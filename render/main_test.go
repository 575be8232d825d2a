package render

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// parentEnv makes the test binary a parent that renders the slow module in a
// worker and prints the worker's process ID (TestWorkerEndsWithItsParent).
const parentEnv = "CAIRN_TEST_RENDER_PARENT"

// TestMain lets the test binary serve as the render worker of its Renderers.
func TestMain(m *testing.M) {
	ServeWorkerIfRequested()
	if os.Getenv(parentEnv) != "" {
		serveAsParent()
	}
	os.Exit(m.Run())
}

func serveAsParent() {
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 1})
	go func() {
		for len(r.pool.pids()) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Println(r.pool.pids()[0])
	}()
	_, err := r.Render(context.Background(), Request{Name: "web", Namespace: "team-a", Source: testRepo, LocalPath: "modules/slow",
		Limits: Limits{Timeout: time.Minute}})
	fmt.Fprintln(os.Stderr, "the slow render ended:", err)
	os.Exit(1)
}

// newInProcessRenderer is a Renderer that evaluates in the test process, for
// tests of what it keeps between renders.
func newInProcessRenderer() *Renderer {
	return NewRendererWithOptions(RendererOptions{InProcess: true})
}
