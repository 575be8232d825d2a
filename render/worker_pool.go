package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cairn.dev/cairn/internal/fairslots"
)

// workerStartTimeout bounds the start of a worker process, within the
// render's own deadline.
const workerStartTimeout = 30 * time.Second

// workerPool keeps the render worker processes of a Renderer: at most size
// at once, started on demand, reused by one render after another, and
// replaced when they die or are killed. Renders take the places in turn by
// tenant (fairslots): one tenant's renders never hold every place while
// another's wait.
type workerPool struct {
	slots  *fairslots.Slots // the places, shared between tenants
	tokens chan *workerProc // one per place in the pool: its idle worker, or nil
	sent   atomic.Int64     // modules sent to workers to prepare
	stop   chan struct{}    // closed by close: the reaper ends
	stop1  sync.Once

	mu   sync.Mutex
	live map[*workerProc]struct{}
}

// newWorkerPool returns a pool of size places whose workers end after idle
// without a render (never when idle is not positive).
func newWorkerPool(size int, idle time.Duration) *workerPool {
	p := &workerPool{slots: fairslots.New(size), tokens: make(chan *workerProc, size), live: map[*workerProc]struct{}{}, stop: make(chan struct{})}
	for range size {
		p.tokens <- nil
	}
	if idle > 0 {
		go p.reapEvery(idle)
	}
	return p
}

// reapEvery ends, every idle/2, the workers that served no render for idle:
// a long-running sync loop gives their memory back between commits.
func (p *workerPool) reapEvery(idle time.Duration) {
	t := time.NewTicker(max(idle/2, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.reapIdle(idle)
		}
	}
}

// reapIdle kills the idle workers unused for longer than idle and says how
// many; a busy worker is not in the pool's places and is left alone.
func (p *workerPool) reapIdle(idle time.Duration) int {
	n := 0
	for range cap(p.tokens) {
		select {
		case w := <-p.tokens:
			if w != nil && time.Since(w.idleSince) > idle {
				w.kill()
				p.forget(w)
				w, n = nil, n+1
			}
			p.tokens <- w
		default:
			return n
		}
	}
	return n
}

// acquire returns an idle worker, or starts one in a free place, waiting
// for a place within ctx, in turn with the renders of other tenants (""
// is the platform team).
func (p *workerPool) acquire(ctx context.Context, tenant string) (*workerProc, error) {
	if err := p.slots.Acquire(ctx, tenant); err != nil {
		return nil, err
	}
	if ctx.Err() != nil { // granted as the deadline passed
		p.slots.Release(tenant)
		return nil, ctx.Err()
	}
	var w *workerProc
	select {
	case w = <-p.tokens: // there is one per slot; the reaper returns it at once
	case <-ctx.Done():
		p.slots.Release(tenant)
		return nil, ctx.Err()
	}
	if w != nil && !w.exited() {
		return w, nil
	}
	p.forget(w)
	w, err := p.start(ctx)
	if err != nil {
		p.tokens <- nil
		p.slots.Release(tenant)
		return nil, err
	}
	return w, nil
}

// release gives the worker's place back: with the worker when it can serve
// another render, else after killing it.
func (p *workerPool) release(w *workerProc, keep bool, tenant string) {
	if !keep {
		w.kill()
		p.forget(w)
		w = nil
	} else {
		w.idleSince = time.Now()
	}
	p.tokens <- w
	p.slots.Release(tenant)
}

func (p *workerPool) forget(w *workerProc) {
	if w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.live, w)
}

// pids returns the process IDs of the live workers.
func (p *workerPool) pids() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for w := range p.live {
		out = append(out, w.cmd.Process.Pid)
	}
	return out
}

// close kills every worker; renders running in them fail.
func (p *workerPool) close() {
	p.stop1.Do(func() { close(p.stop) })
	p.mu.Lock()
	defer p.mu.Unlock()
	for w := range p.live {
		w.kill()
	}
}

// start starts a worker: a re-execution of the running binary
// (os.Executable) that serves renders (ServeWorkerIfRequested). This is
// cairn running itself, not another program: CUE evaluation can be neither
// interrupted nor bounded in memory in-process, and a process can be killed.
// The worker's environment holds nothing but the request to serve; it gets
// everything a render needs (files, values, pins) over its stdin.
func (p *workerPool) start(ctx context.Context) (*workerProc, error) {
	if os.Getenv(workerEnv) != "" {
		return nil, newError(ReasonRenderFailed, "this process was started as a render worker but does not serve renders: call render.ServeWorkerIfRequested first in main (or TestMain)")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, newError(ReasonRenderFailed, "failed to find the executable to start a render worker: %w", err)
	}
	w, err := startWorker(exe)
	if err != nil {
		return nil, err
	}
	if err := w.waitReady(ctx); err != nil {
		w.kill()
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live[w] = struct{}{}
	return w, nil
}

// workerProc is one worker process, seen from the parent.
type workerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	enc    *json.Encoder
	stderr *headBuffer

	msgs    chan workerMessage // closed once the process has exited
	killed  chan struct{}
	kill1   sync.Once
	gone    chan struct{}
	waitErr error
	// idleSince is when the worker last went back to the pool.
	idleSince time.Time
}

func startWorker(exe string) (*workerProc, error) {
	cmd := exec.Command(exe)
	cmd.Env = []string{workerEnv + "=1"}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, newError(ReasonRenderFailed, "failed to start a render worker: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, newError(ReasonRenderFailed, "failed to start a render worker: %w", err)
	}
	w := &workerProc{cmd: cmd, stdin: stdin, enc: json.NewEncoder(stdin), stderr: &headBuffer{max: 4 << 10},
		msgs: make(chan workerMessage), killed: make(chan struct{}), gone: make(chan struct{})}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		return nil, newError(ReasonRenderFailed, "failed to start a render worker: %w", err)
	}
	go w.read(stdout)
	return w, nil
}

// read passes the worker's messages on until its output ends, then reaps it.
func (w *workerProc) read(r io.Reader) {
	dec := json.NewDecoder(r)
	for {
		var m workerMessage
		if err := dec.Decode(&m); err != nil {
			break
		}
		select {
		case w.msgs <- m:
		case <-w.killed:
		}
	}
	w.kill() // output that is not the protocol ends the worker too
	w.waitErr = w.cmd.Wait()
	close(w.gone)
	close(w.msgs)
}

func (w *workerProc) waitReady(ctx context.Context) error {
	timer := time.NewTimer(workerStartTimeout)
	defer timer.Stop()
	select {
	case m, ok := <-w.msgs:
		if ok && m.Ready {
			return nil
		}
		<-w.gone
		return newError(ReasonRenderFailed, "render worker did not start (%s): the executable must call render.ServeWorkerIfRequested first in main (or TestMain)", w.exitDescription())
	case <-timer.C:
		return newError(ReasonRenderFailed, "render worker did not start within %s", workerStartTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *workerProc) kill() {
	w.kill1.Do(func() {
		close(w.killed)
		_ = w.cmd.Process.Kill()
		_ = w.stdin.Close()
	})
}

func (w *workerProc) exited() bool {
	select {
	case <-w.gone:
		return true
	default:
		return false
	}
}

// workerHandler answers a worker's questions during one render.
type workerHandler interface {
	module() (*workerModule, error)
	modFile(mv string) ([]byte, error)
	lookupCall(call lookupCall) workerMessage
}

// call sends a render (job or chart) to the worker and returns the message
// that ends it: a result or an error. keep reports whether the worker can
// serve another render (it cannot after a deadline, a cancellation or its
// death). memory is the render's budget, for the error of a worker over it.
func (w *workerProc) call(ctx context.Context, req workerMessage, memory int64, h workerHandler) (workerMessage, bool, error) {
	if err := w.enc.Encode(req); err != nil {
		return workerMessage{}, false, w.died(memory)
	}
	for {
		select {
		case m, ok := <-w.msgs:
			if !ok {
				return workerMessage{}, false, w.died(memory)
			}
			if done, err := w.answer(m, h); done {
				return m, true, err
			} else if err != nil {
				return workerMessage{}, false, w.died(memory)
			}
		case <-ctx.Done():
			return workerMessage{}, false, ctx.Err()
		}
	}
}

// answer handles one message of the worker: done when it ends the render
// (a result, or an error returned as such); an error alone when the worker
// could not be written to.
func (w *workerProc) answer(m workerMessage, h workerHandler) (bool, error) {
	switch {
	case m.Result != nil || m.ChartResult != nil:
		return true, nil
	case m.Error != nil:
		return true, m.Error.toError()
	case m.Need && h != nil:
		mod, err := h.module()
		if err != nil {
			return true, errors.Join(err, w.enc.Encode(workerMessage{Abort: true}))
		}
		return false, w.enc.Encode(workerMessage{Module: mod})
	case m.Lookup != nil && h != nil:
		return false, w.enc.Encode(h.lookupCall(*m.Lookup))
	case m.ModFile != "" && h != nil:
		data, err := h.modFile(m.ModFile)
		if err != nil {
			return false, w.enc.Encode(workerMessage{Error: toWorkerError(err)})
		}
		return false, w.enc.Encode(workerMessage{ModFileData: data})
	}
	return false, nil
}

// died explains the end of a worker during a render: over its memory budget
// (LimitExceeded), or another crash, which fails only this render.
func (w *workerProc) died(memory int64) error {
	w.kill()
	<-w.gone
	if w.exitCode() == exitOverBudget {
		return newError(ReasonLimitExceeded, "render exceeded its memory budget (renderMemory) of %s: its worker process was stopped", formatBytes(memory))
	}
	return newError(ReasonRenderFailed, "render worker exited unexpectedly (%s)", w.exitDescription())
}

func (w *workerProc) exitCode() int {
	var exit *exec.ExitError
	if errors.As(w.waitErr, &exit) {
		return exit.ExitCode()
	}
	return -1
}

// exitDescription is the exit status and, for a fatal runtime error (a stack
// overflow, say), its one-line message; nothing else of the worker's output,
// which could quote values.
func (w *workerProc) exitDescription() string {
	desc := "exit status unknown"
	if w.waitErr != nil {
		desc = w.waitErr.Error()
	} else if w.cmd.ProcessState != nil {
		desc = w.cmd.ProcessState.String()
	}
	for _, line := range strings.Split(w.stderr.String(), "\n") {
		if strings.HasPrefix(line, "fatal error: ") {
			return desc + ": " + line
		}
	}
	return desc
}

// formatBytes is n in MiB when it is a whole number of them.
func formatBytes(n int64) string {
	if n > 0 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *headBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (b *headBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
