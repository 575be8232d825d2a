package render

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"cuelang.org/go/mod/modfile"
	"cuelang.org/go/mod/module"
)

// workerEnv is set in the environment of a render worker process.
const workerEnv = "CAIRN_RENDER_WORKER"

// exitOverBudget is the exit code of a worker whose memory passed the budget
// of its render.
const exitOverBudget = 86

// memoryPoll is how often a worker reads its memory while it renders.
const memoryPoll = 2 * time.Millisecond

// ServeWorkerIfRequested makes this process a render worker when the
// Renderer that started it asked for one (see RendererOptions): it then
// serves renders on stdin and stdout and exits, and never returns. Otherwise
// it returns at once. Call it first in main, and in TestMain of every test
// binary that renders (the worker is a re-execution of the running binary).
func ServeWorkerIfRequested() {
	if os.Getenv(workerEnv) == "" {
		return
	}
	out := os.Stdout
	os.Stdout = os.Stderr // nothing but the protocol goes to the parent
	err := serveWorker(os.Stdin, out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cairn render worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// workerServer is the worker's side: it keeps prepared modules and CUE
// contexts between the renders it serves, one at a time.
type workerServer struct {
	in       *json.Decoder
	out      *json.Encoder
	prepared *preparedCache
	contexts *contextPool
	budget   renderBudget // of the render being served; 0 between renders
}

// renderBudget is the memory budget of the render being served. The watcher
// checks it under the lock, so that once a render has ended (its budget set to
// 0, before its reply is written) no later exit is blamed on the next one.
type renderBudget struct {
	mu    sync.Mutex
	bytes int64
}

// Store sets the budget (0: no render).
func (b *renderBudget) Store(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bytes = n
}

// serveWorker serves renders until in ends.
func serveWorker(in io.Reader, out io.Writer) error {
	s := &workerServer{
		in:       json.NewDecoder(bufio.NewReaderSize(in, 64<<10)),
		out:      json.NewEncoder(out),
		prepared: newPreparedCache(64, 256<<20),
		contexts: newContextPool(1),
	}
	go s.watchMemory()
	if err := s.out.Encode(workerMessage{Ready: true}); err != nil {
		return err
	}
	for {
		var msg workerMessage
		if err := s.in.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("failed to read a request: %w", err)
		}
		if msg.Chart != nil {
			if err := s.out.Encode(s.recovered(func() workerMessage { return s.serveChart(msg.Chart, msg.ChartLookup) })); err != nil {
				return fmt.Errorf("failed to write a result: %w", err)
			}
			continue
		}
		if msg.Kustomize != nil {
			if err := s.out.Encode(s.recovered(func() workerMessage { return s.serveKustomize(msg.Kustomize) })); err != nil {
				return fmt.Errorf("failed to write a result: %w", err)
			}
			continue
		}
		if msg.Render == nil {
			continue // an abort or answer that came too late
		}
		reply, ok := s.serve(msg.Render)
		if !ok {
			continue
		}
		if err := s.out.Encode(reply); err != nil {
			return fmt.Errorf("failed to write a result: %w", err)
		}
	}
}

// serve renders one job under its memory budget; there is no reply to a
// render the parent aborted.
func (s *workerServer) serve(job *workerJob) (reply workerMessage, ok bool) {
	s.startBudget(job.Limits.Memory, job.MaxPrepared, job.MaxPreparedBytes)
	defer s.budget.Store(0)
	defer func() {
		if p := recover(); p != nil {
			reply, ok = workerMessage{Error: toWorkerError(newError(ReasonRenderFailed, "CUE evaluation panicked: %v", p))}, true
		}
	}()
	ev, err := s.evaluate(job)
	switch {
	case errors.Is(err, errAborted):
		return workerMessage{}, false
	case err != nil:
		return workerMessage{Error: toWorkerError(err)}, true
	}
	return workerMessage{Result: toWorkerResult(ev)}, true
}

// evaluate evaluates the job's module, preparing it first when this worker
// has not.
func (s *workerServer) evaluate(job *workerJob) (evaluated, error) {
	key := preparedKey{module: job.Key}
	p := s.prepared.get(key)
	if p == nil {
		var err error
		if p, err = s.prepare(); err != nil || p == nil {
			return evaluated{}, err
		}
		s.prepared.add(key, p)
	}
	c := s.contexts.get()
	start := time.Now()
	in := renderInput{name: job.Name, namespace: job.Namespace, values: job.Values, limits: job.Limits}
	objs, err := evaluate(p, c.ctx, in)
	if err == nil {
		s.contexts.put(c, time.Since(start))
	}
	return evaluated{objs, p.digest, p.warnings}, err
}

// recovered is fn's reply, or an error reply when it panics.
func (s *workerServer) recovered(fn func() workerMessage) (reply workerMessage) {
	defer func() {
		if p := recover(); p != nil {
			reply = workerMessage{Error: toWorkerError(newError(ReasonRenderFailed, "rendering panicked: %v", p))}
		}
	}()
	return fn()
}

// errAborted ends a render whose module the parent could not provide.
var errAborted = errors.New("render aborted by the parent")

// prepare asks the parent for the module and loads it.
func (s *workerServer) prepare() (*preparedModule, error) {
	if err := s.out.Encode(workerMessage{Need: true}); err != nil {
		return nil, err
	}
	var msg workerMessage
	if err := s.in.Decode(&msg); err != nil {
		return nil, err
	}
	if msg.Module == nil {
		return nil, errAborted
	}
	src, deps, pins, err := msg.Module.prepareInputs(s.askModFile)
	if err != nil {
		return nil, err
	}
	return prepare(src, deps, pins)
}

// askModFile asks the parent for the module file of a version the module
// does not list; the worker pins it.
func (s *workerServer) askModFile(mv module.Version) (*modfile.File, error) {
	if err := s.out.Encode(workerMessage{ModFile: mv.String()}); err != nil {
		return nil, err
	}
	var msg workerMessage
	if err := s.in.Decode(&msg); err != nil {
		return nil, err
	}
	if msg.Error != nil {
		return nil, msg.Error.toError()
	}
	return modfile.Parse(msg.ModFileData, mv.String()+"/"+modFilePath)
}

// startBudget sets the budget of the next render: the garbage collector is
// asked to keep the process within three quarters of it, and the prepared
// modules kept are trimmed to the Renderer's bounds and a quarter of it.
func (s *workerServer) startBudget(budget int64, maxPrepared int, maxPreparedBytes int64) {
	if budget <= 0 {
		budget = DefaultLimits().Memory
	}
	if maxPrepared != 0 {
		s.prepared.resize(maxPrepared, min(maxPreparedBytes, budget/4))
	} else {
		s.prepared.resize(s.prepared.maxEntries, min(s.prepared.maxBytes, budget/4))
	}
	debug.SetMemoryLimit(budget / 4 * 3)
	s.budget.Store(budget)
}

// watchMemory ends the process, with exitOverBudget, as soon as its memory
// (what the Go runtime holds from the system: heap, stacks and runtime
// structures; what debug.SetMemoryLimit bounds) passes the budget of the
// render being served. CUE evaluation cannot be stopped from within. It also
// ends the process when its parent is gone, even in the middle of a render.
func (s *workerServer) watchMemory() {
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	parent := os.Getppid()
	for tick := 0; ; tick++ {
		time.Sleep(memoryPoll)
		if tick%50 == 0 && os.Getppid() != parent {
			os.Exit(1) // the parent died; the worker was given to another
		}
		s.budget.check(samples)
	}
}

// check exits, with exitOverBudget, when the process's memory passes the
// budget of the render being served.
func (b *renderBudget) check(samples []metrics.Sample) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bytes == 0 {
		return
	}
	metrics.Read(samples)
	used := samples[0].Value.Uint64() - samples[1].Value.Uint64()
	if used > uint64(b.bytes) && b.bytes < math.MaxInt64 {
		overBudget(used, b.bytes)
	}
}

func overBudget(used uint64, budget int64) {
	fmt.Fprintf(os.Stderr, "cairn render worker: memory %d bytes exceeds the render's budget of %d bytes\n", used, budget)
	os.Exit(exitOverBudget)
}
