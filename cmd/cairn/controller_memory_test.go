package main

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"

	"cairn.dev/cairn/manifests/controller"
	"cairn.dev/cairn/render"
)

// TestCgroupMemoryLimit: cgroup v2's memory.max, else v1's limit_in_bytes; no limit
// ("max", v1's near-MaxInt64, nothing readable) is 0.
func TestCgroupMemoryLimit(t *testing.T) {
	file := func(path, data string) fstest.MapFS { return fstest.MapFS{path: {Data: []byte(data)}} }
	tests := []struct {
		name string
		fsys fstest.MapFS
		want int64
	}{
		{"v2", file("sys/fs/cgroup/memory.max", "2147483648\n"), 2 << 30},
		{"v2 without a limit", file("sys/fs/cgroup/memory.max", "max\n"), 0},
		{"v1", file("sys/fs/cgroup/memory/memory.limit_in_bytes", "1073741824\n"), 1 << 30},
		{"v1 without a limit", file("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n"), 0},
		{"none", fstest.MapFS{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(cgroupMemoryLimit(tt.fsys)).To(Equal(tt.want))
		})
	}
}

// TestRenderSizingAtStart: the flags' workers and budget are kept when they fit the
// container's limit; four workers of 512Mi in 2Gi run as three, with an error in the
// log naming both; derived workers are sized without an error; a limit too small
// for one worker, and bad flags, refuse to start.
func TestRenderSizingAtStart(t *testing.T) {
	g := NewWithT(t)
	var logs strings.Builder
	log := funcr.New(func(_, args string) { logs.WriteString(args + "\n") }, funcr.Options{})

	got, err := (&renderFlags{workers: 3, memory: "512Mi"}).sizing(2<<30, log)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(controller.RenderSizing{Workers: 3, Budget: 512 << 20}))
	g.Expect(logs.String()).To(BeEmpty())

	got, err = (&renderFlags{workers: 4, memory: "512Mi"}).sizing(2<<30, log)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(controller.RenderSizing{Workers: 3, Budget: 512 << 20}))
	g.Expect(logs.String()).To(ContainSubstring(`"msg"="render workers lowered to fit the container's memory limit"`))
	g.Expect(logs.String()).To(ContainSubstring(`"error"="4 render workers of 512Mi and the controller's own 512Mi exceed the container's memory limit of 2Gi"`))
	g.Expect(logs.String()).To(ContainSubstring(`"running"="3 render workers of 512Mi"`))

	logs.Reset()
	got, err = (&renderFlags{memory: "512Mi"}).sizing(1<<30, log)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(controller.RenderSizing{Workers: 1, Budget: 512 << 20}))
	g.Expect(logs.String()).To(ContainSubstring("render workers sized to the container's memory limit"))
	g.Expect(logs.String()).NotTo(ContainSubstring(`"error"`))

	got, err = (&renderFlags{memory: "512Mi"}).sizing(0, log)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Workers).To(Equal(render.DefaultRendererOptions().MaxEvaluations), "no limit known")

	_, err = (&renderFlags{workers: 2, memory: "512Mi"}).sizing(520<<20, log)
	g.Expect(err).To(MatchError(ContainSubstring("leaves less than 64Mi for one render worker")))
	_, err = (&renderFlags{memory: "lots"}).sizing(0, log)
	g.Expect(err).To(MatchError(ContainSubstring(`--render-memory "lots" is not a positive quantity`)))
	_, err = (&renderFlags{workers: -1, memory: "512Mi"}).sizing(0, log)
	g.Expect(err).To(MatchError(ContainSubstring("--render-workers must not be negative")))

	ro := rendererOptions(controller.RenderSizing{Workers: 3, Budget: 512 << 20})
	g.Expect(ro.MaxEvaluations).To(Equal(3))
	g.Expect(ro.MaxWorkerMemory).To(Equal(int64(512 << 20)))
}
