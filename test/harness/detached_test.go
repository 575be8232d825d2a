package harness_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/test/harness"
)

func TestDetachedClusterCanBeAttachedAndStopped(t *testing.T) {
	g := NewWithT(t)
	bins, err := harness.FindBinaries(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	c, err := harness.Start(context.Background(), harness.Options{Dir: dir, BinDir: bins, Detached: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(c.Stop)

	_, err = harness.Start(context.Background(), harness.Options{Dir: dir, BinDir: bins})
	g.Expect(err).To(MatchError(ContainSubstring("a cluster is running")))

	attached, err := harness.Attach(context.Background(), dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(attached.APIServerURL).To(Equal(c.APIServerURL))
	g.Expect(os.ReadFile(filepath.Join(dir, "env"))).To(ContainSubstring("KUBECONFIG=" + c.Kubeconfig))

	stopped, err := harness.StopDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stopped).To(Equal([]string{"etcd", "kube-apiserver"}))
	_, err = harness.Attach(context.Background(), dir)
	g.Expect(errors.Is(err, harness.ErrNotRunning)).To(BeTrue(), "got %v", err)
}

func TestRegistryWithAuthAndTLS(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	pki, err := harness.NewPKI(dir)
	g.Expect(err).NotTo(HaveOccurred())
	r, err := harness.StartRegistry(context.Background(), harness.RegistryOptions{
		Dir: dir, Username: "alice", Password: "s3cret", TLS: pki,
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(r.Stop)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pki.CAPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	resp, err := client.Get(r.URL() + "/v2/")
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))

	for password, want := range map[string]int{"s3cret": http.StatusOK, "wrong": http.StatusUnauthorized} {
		req, err := http.NewRequest(http.MethodGet, r.URL()+"/v2/", nil)
		g.Expect(err).NotTo(HaveOccurred())
		req.SetBasicAuth("alice", password)
		resp, err = client.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(want), password)
	}

	_, err = http.Get(r.URL() + "/v2/")
	g.Expect(err).To(HaveOccurred(), "a client without the test CA must refuse the certificate")
}
