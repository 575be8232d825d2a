package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cairn.dev/cairn/test/harness"
)

func TestAPIServerStopsAndStartsAgainWithItsData(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	bins, err := harness.FindBinaries(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	c, err := harness.Start(ctx, harness.Options{Dir: dir, BinDir: bins})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(c.Stop)
	client := clientFor(t, c.RESTConfig)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survivor"}, Data: map[string]string{"k": "v"}}
	created, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	pidFile := filepath.Join(dir, "pids", "kube-apiserver.pid")
	firstPid, err := os.ReadFile(pidFile)
	g.Expect(err).NotTo(HaveOccurred())

	for _, grace := range []time.Duration{0, 10 * time.Second} {
		stopped, err := c.StopAPIServer(grace)
		g.Expect(err).NotTo(HaveOccurred(), "grace %s", grace)
		_, err = client.CoreV1().ConfigMaps("default").Get(ctx, "survivor", metav1.GetOptions{})
		g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
		_, err = c.StopAPIServer(0)
		g.Expect(err).To(MatchError(ContainSubstring("no running kube-apiserver")))

		begin := time.Now()
		g.Expect(stopped.Start(ctx)).To(Succeed())
		t.Logf("stopped with grace %s, ready again in %s", grace, time.Since(begin).Round(time.Millisecond))
		got, err := client.CoreV1().ConfigMaps("default").Get(ctx, "survivor", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.UID).To(Equal(created.UID))
		g.Expect(got.Data).To(Equal(cm.Data))
	}
	g.Expect(os.ReadFile(pidFile)).NotTo(Equal(firstPid), "the pid file names the new process")

	attached, err := harness.Connect(c.Kubeconfig, "")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = attached.StopAPIServer(0)
	g.Expect(err).To(HaveOccurred(), "a cluster given by Connect is not the harness's to stop")
}
