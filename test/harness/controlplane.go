package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// serviceCIDR is large enough for fleet benchmarks with thousands of Services.
const serviceCIDR = "10.96.0.0/16"

// apiServerFeatureGates turns off the server side of watch-list streams
// (WatchList, beta and on by default since 1.34). With it on, kube-apiserver
// turns every watch from resourceVersion "" or "0" into a watch-list stream
// (sendInitialEvents=true), and refuses those unless etcd can answer
// RequestWatchProgress, which it decides from the etcd version (3.4.31+ or
// 3.5.13+; Debian's etcd-server is 3.4.23). kwok v0.8.0 starts every watch from
// "0", so each of its pod and node watches ended at once with "a watch stream
// was requested by the client but the required storage feature
// RequestWatchProgress is disabled", and kwok saw changes only when it relisted,
// after a back-off that grows to about a minute: a Job's pod completed 6 s to
// 75 s after the Job was created. Off, those watches are plain watches, and
// clients that ask for a watch-list (client-go's WatchListClient, on by default)
// are refused at once and fall back to LIST and WATCH. KUBE_FEATURE_WatchListClient=false
// in kwok's environment does not help: kwok already opts its reflectors out of
// watch-list; the stream is the server's defaulting. Options.APIServerArgs come
// after this flag: repeated --feature-gates flags add up and a later value of a
// gate wins, so they can turn it back on, but without the "kube:" prefix
// (kube-apiserver refuses gates with and without it mixed).
const apiServerFeatureGates = "WatchList=false"

// startOnFreePort starts a server on a fresh port and waits for it, trying
// another port when the one picked was taken in between.
func startOnFreePort(ctx context.Context, name string, run func(port int) (*process, func(context.Context) error, error)) (*process, int, error) {
	return startOnPort(ctx, name, 0, run)
}

// startOnPort is startOnFreePort with a fixed port unless port is 0.
func startOnPort(ctx context.Context, name string, fixed int, run func(port int) (*process, func(context.Context) error, error)) (*process, int, error) {
	var last error
	for range 3 {
		port, err := fixed, error(nil)
		if fixed == 0 {
			port, err = FreePort()
		}
		if err != nil {
			return nil, 0, err
		}
		p, check, err := run(port)
		if err != nil {
			return nil, 0, err
		}
		if last = waitFor(ctx, name, []*process{p}, check); last == nil {
			return p, port, nil
		}
		p.stop(5 * time.Second)
		if fixed != 0 || !strings.Contains(last.Error(), "address already in use") {
			return nil, 0, last
		}
	}
	return nil, 0, last
}

// startEtcd starts etcd with its data in dir/etcd and returns its client URL.
func (s *starter) startEtcd(ctx context.Context) (string, error) {
	etcd, err := systemBinary("etcd", "etcd-server")
	if err != nil {
		return "", err
	}
	var url string
	p, _, err := startOnFreePort(ctx, "etcd", func(port int) (*process, func(context.Context) error, error) {
		peerPort, err := FreePort()
		if err != nil {
			return nil, nil, err
		}
		url = fmt.Sprintf("http://127.0.0.1:%d", port)
		peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
		p, err := s.launch.start("etcd", etcd,
			"--name=cairn", "--data-dir="+filepath.Join(s.dir, "etcd"), "--logger=zap",
			"--listen-client-urls="+url, "--advertise-client-urls="+url,
			"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
			"--initial-cluster=cairn="+peer, "--quota-backend-bytes=8589934592")
		return p, httpOK(httpClient(nil), url+"/health"), err
	})
	s.add(p)
	return url, err
}

// startAPIServer starts kube-apiserver against etcdURL, writes the admin
// kubeconfig and waits for /readyz.
func (s *starter) startAPIServer(ctx context.Context, etcdURL string) error {
	certFile, keyFile, err := s.pki.ServingPair("apiserver", "kubernetes", "kubernetes.default",
		"kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	if err != nil {
		return err
	}
	saPub, saKey, err := writeServiceAccountKey(s.pki.Dir)
	if err != nil {
		return err
	}
	s.saKey = saKey
	admin, err := s.pki.clientPair(adminUser, "system:masters")
	if err != nil {
		return err
	}
	p, port, err := startOnFreePort(ctx, "kube-apiserver", func(port int) (*process, func(context.Context) error, error) {
		args := append([]string{
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
			"--tls-cert-file=" + certFile, "--tls-private-key-file=" + keyFile,
			"--client-ca-file=" + s.pki.CAFile,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + saPub, "--service-account-signing-key-file=" + saKey,
			"--service-cluster-ip-range=" + serviceCIDR,
			"--authorization-mode=Node,RBAC", "--allow-privileged=true",
			"--max-requests-inflight=3000", "--max-mutating-requests-inflight=1000",
			"--endpoint-reconciler-type=none", "--profiling=false",
			// See apiServerFeatureGates: without it, kwok's watches
			// end at once on Debian's etcd 3.4.23 and it sees pods late.
			"--feature-gates=" + apiServerFeatureGates,
		}, s.opts.APIServerArgs...)
		p, err := s.launch.start("kube-apiserver", filepath.Join(s.bins, "kube-apiserver"), args...)
		url := fmt.Sprintf("https://127.0.0.1:%d/readyz", port)
		return p, httpOK(httpClient(s.adminTLS(admin)), url), err
	})
	s.add(p)
	if err != nil {
		return err
	}
	s.c.APIServerURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	s.admin = admin
	return writeKubeconfig(s.c.Kubeconfig, s.c.APIServerURL, s.pki.CAPEM, adminUser, admin)
}

func (s *starter) adminTLS(admin keyPair) *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.pki.CAPEM)
	cert, err := tls.X509KeyPair(admin.CertPEM, admin.KeyPEM)
	if err != nil {
		return &tls.Config{RootCAs: pool}
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}
}
