package render

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// workerRequest is a request of a test module with a memory budget.
func workerRequest(dir string, memory int64, timeout time.Duration) Request {
	return Request{Name: "web", Namespace: "team-a", Source: testRepo, LocalPath: dir,
		Limits: Limits{Memory: memory, Timeout: timeout}}
}

// processGone reports whether the process pid has ended (reaped, or a zombie
// left to whoever adopted it).
func processGone(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && strings.Contains(string(stat), ") Z ")
}

// TestWorkerMemoryBudget: a module whose value doubles at each level fails
// with LimitExceeded naming the budget, well within its deadline; this
// process stays far below the explosion, and the next render gets a new
// worker.
func TestWorkerMemoryBudget(t *testing.T) {
	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 1})
	defer r.Close()

	start := time.Now()
	_, err := r.Render(context.Background(), workerRequest("modules/explode", 128<<20, time.Minute))
	g.Expect(Reason(err)).To(Equal(ReasonLimitExceeded), "error: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("render exceeded its memory budget (renderMemory) of 128 MiB"))
	g.Expect(time.Since(start)).To(BeNumerically("<", 30*time.Second))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	g.Expect(ms.HeapAlloc).To(BeNumerically("<", 128<<20), "the test process holds the explosion")

	res, err := r.Render(context.Background(), workerRequest("modules/nomodfile", 128<<20, time.Minute))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Objects).NotTo(BeEmpty())
}

// TestWorkerMemoryCap: MaxWorkerMemory caps a render's budget: a render that
// asks for 4 GiB is stopped at the cap of 128 MiB, and its message names the
// budget it ran with and the one it asked for.
func TestWorkerMemoryCap(t *testing.T) {
	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 1, MaxWorkerMemory: 128 << 20})
	defer r.Close()

	start := time.Now()
	_, err := r.Render(context.Background(), workerRequest("modules/explode", 4<<30, time.Minute))
	g.Expect(Reason(err)).To(Equal(ReasonLimitExceeded), "error: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("render exceeded its memory budget (renderMemory) of 128 MiB"))
	g.Expect(err.Error()).To(ContainSubstring("renderMemory asks for 4096 MiB, more than the 128 MiB this cairn gives a render worker: --render-memory"))
	g.Expect(time.Since(start)).To(BeNumerically("<", 30*time.Second))
}

// TestWorkerKilledAtDeadline: a render that passes its deadline returns
// RenderTimeout and its worker process is killed, not abandoned; the next
// render starts another.
func TestWorkerKilledAtDeadline(t *testing.T) {
	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 1})
	defer r.Close()
	_, err := r.Render(context.Background(), workerRequest("modules/nomodfile", 0, time.Minute))
	g.Expect(err).NotTo(HaveOccurred())
	pids := r.pool.pids()
	g.Expect(pids).To(HaveLen(1))

	_, err = r.Render(context.Background(), workerRequest("modules/slow", 0, 300*time.Millisecond))
	g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout))
	g.Expect(err.Error()).To(ContainSubstring("timeout 300ms"))
	g.Eventually(func() bool { return processGone(pids[0]) }).WithTimeout(5 * time.Second).Should(BeTrue())

	_, err = r.Render(context.Background(), workerRequest("modules/nomodfile", 0, time.Minute))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.pool.pids()).To(HaveLen(1))
	g.Expect(r.pool.pids()).NotTo(ContainElement(pids[0]))
}

// TestWorkerReused: renders run one after another in the same worker, which
// keeps the module prepared: it is sent to the worker once, and again only
// when its files change.
func TestWorkerReused(t *testing.T) {
	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 1})
	defer r.Close()
	first, err := renderLocal(t, r, testRepo, "modules/basic", `{"replicas": 2}`)
	g.Expect(err).NotTo(HaveOccurred())
	pids := r.pool.pids()
	for _, values := range []string{`{"replicas": 3}`, `{"replicas": 2}`} {
		res, err := renderLocal(t, r, testRepo, "modules/basic", values)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.pool.pids()).To(Equal(pids), "the worker is reused")
		if values == `{"replicas": 2}` {
			g.Expect(res.Digest).To(Equal(first.Digest))
		}
	}
	g.Expect(r.pool.sent.Load()).To(Equal(int64(1)), "the worker keeps the module prepared")

	_, err = renderLocal(t, r, testRepo, "modules/nomodfile", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.pool.sent.Load()).To(Equal(int64(2)))
}

// TestWorkerDeathFailsOnlyItsRender: a worker killed from outside in the
// middle of a render fails that render with RenderFailed; a render in the
// other worker finishes, and the pool replaces the dead one.
func TestWorkerDeathFailsOnlyItsRender(t *testing.T) {
	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 2})
	defer r.Close()
	var wg sync.WaitGroup
	var slowErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, slowErr = r.Render(context.Background(), workerRequest("modules/slow", 0, time.Minute))
	}()
	g.Eventually(r.pool.pids).WithTimeout(30 * time.Second).Should(HaveLen(1))
	victim := r.pool.pids()[0]
	time.Sleep(200 * time.Millisecond) // the slow module is evaluating
	res, err := renderLocal(t, r, testRepo, "modules/nomodfile", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Objects).NotTo(BeEmpty())

	g.Expect(syscall.Kill(victim, syscall.SIGKILL)).To(Succeed())
	wg.Wait()
	g.Expect(Reason(slowErr)).To(Equal(ReasonRenderFailed))
	g.Expect(slowErr.Error()).To(ContainSubstring("render worker exited unexpectedly (signal: killed)"))

	for range 3 {
		_, err := renderLocal(t, r, testRepo, "modules/nomodfile", "")
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(r.pool.pids()).NotTo(ContainElement(victim))
}

// TestWorkerSameResultAsInProcess: a render in a worker gives the objects,
// digest, module digest and warnings of an in-process render, and the same
// error with its position.
func TestWorkerSameResultAsInProcess(t *testing.T) {
	g := NewWithT(t)
	w := NewRenderer()
	defer w.Close()
	in := newInProcessRenderer()
	for _, dir := range []string{"modules/basic", "modules/syntax", "modules/notconcrete", "modules/crd"} {
		got, gotErr := renderLocal(t, w, testRepo, dir, "")
		want, wantErr := renderLocal(t, in, testRepo, dir, "")
		if wantErr != nil {
			g.Expect(gotErr).To(HaveOccurred(), dir)
			g.Expect(gotErr.Error()).To(Equal(wantErr.Error()), dir)
			g.Expect(Reason(gotErr)).To(Equal(Reason(wantErr)), dir)
			continue
		}
		g.Expect(gotErr).NotTo(HaveOccurred(), dir)
		g.Expect(got).To(Equal(want), dir)
	}
}

// TestWorkerEndsWithItsParent: a worker whose parent is killed in the middle of
// a render ends too, instead of evaluating on.
func TestWorkerEndsWithItsParent(t *testing.T) {
	g := NewWithT(t)
	parent := exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), parentEnv+"=1")
	out, err := parent.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(parent.Start()).To(Succeed())
	line, err := bufio.NewReader(out).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	worker, err := strconv.Atoi(strings.TrimSpace(line))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(processGone(worker)).To(BeFalse())

	g.Expect(parent.Process.Kill()).To(Succeed())
	_ = parent.Wait()
	g.Eventually(func() bool { return processGone(worker) }).WithTimeout(5 * time.Second).Should(BeTrue())
}

// TestWorkerEndsAfterItsIdleTimeout: a worker that served no render for the
// idle timeout ends, and the next render starts a new one.
func TestWorkerEndsAfterItsIdleTimeout(t *testing.T) {
	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 1, WorkerIdleTimeout: 300 * time.Millisecond})
	defer r.Close()
	_, err := renderLocal(t, r, testRepo, "modules/basic", `{"replicas": 2}`)
	g.Expect(err).NotTo(HaveOccurred())
	pids := r.pool.pids()
	g.Expect(pids).To(HaveLen(1))
	g.Eventually(r.pool.pids).WithTimeout(5 * time.Second).Should(BeEmpty())
	g.Eventually(func() bool { return processGone(pids[0]) }).WithTimeout(5 * time.Second).Should(BeTrue())

	_, err = renderLocal(t, r, testRepo, "modules/basic", `{"replicas": 3}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.pool.pids()).To(HaveLen(1))
	g.Expect(r.pool.pids()).NotTo(ContainElement(pids[0]))
}

// TestBusyWorkerIsNotReaped: reaping leaves alone a worker in the middle of
// a render (it is not among the pool's idle places).
func TestBusyWorkerIsNotReaped(t *testing.T) {
	g := NewWithT(t)
	p := newWorkerPool(1, 0)
	defer p.close()
	w, err := p.acquire(context.Background(), "")
	g.Expect(err).NotTo(HaveOccurred())
	w.idleSince = time.Now().Add(-time.Hour)
	g.Expect(p.reapIdle(time.Millisecond)).To(Equal(0), "busy")
	p.release(w, true, "")
	g.Expect(p.reapIdle(time.Hour)).To(Equal(0), "just released")
	w.idleSince = time.Now().Add(-2 * time.Hour)
	g.Expect(p.reapIdle(time.Hour)).To(Equal(1))
	g.Eventually(func() bool { return processGone(w.cmd.Process.Pid) }).WithTimeout(5 * time.Second).Should(BeTrue())
}
