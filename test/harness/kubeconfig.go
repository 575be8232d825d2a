package harness

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// adminUser is the identity of the admin kubeconfig, in group system:masters.
const adminUser = "cairn-admin"

// writeKubeconfig writes a kubeconfig with the credentials embedded, so that
// the file works from any directory.
func writeKubeconfig(path, server string, caPEM []byte, user string, pair keyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cairn"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: pair.CertPEM, ClientKeyData: pair.KeyPEM}
	cfg.Contexts["cairn"] = &clientcmdapi.Context{Cluster: "cairn", AuthInfo: user}
	cfg.CurrentContext = "cairn"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("failed to write kubeconfig %s: %w", path, err)
	}
	return nil
}

// restConfigFrom loads a kubeconfig with client rate limits raised for tests
// and benchmarks (QPS 1000, burst 2000).
func restConfigFrom(path string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig %s: %w", path, err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	return cfg, nil
}

// kubeHTTPClient returns an HTTP client with the cluster's admin credentials.
func kubeHTTPClient(c *Cluster) (*http.Client, error) {
	client, err := rest.HTTPClientFor(c.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("failed to create an HTTP client for %s: %w", c.APIServerURL, err)
	}
	client.Timeout = 5 * time.Second
	return client, nil
}
