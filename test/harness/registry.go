package harness

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// RegistryOptions says how StartRegistry runs Debian's docker-registry
// (Distribution 2.8).
type RegistryOptions struct {
	// Dir holds config.yml, data/, logs/ and pids/. Required.
	Dir string
	// Username and Password, when set, turn on htpasswd basic auth.
	Username, Password string
	// TLS, when set, serves HTTPS with a certificate issued by this CA
	// (for the CA tests); otherwise the registry speaks plain HTTP.
	TLS *PKI
	// Port is the port to listen on; 0 picks a free one.
	Port int
	// Detached leaves the registry running when the calling process exits.
	Detached bool
}

// Registry is a running docker-registry.
type Registry struct {
	// Host is "127.0.0.1:PORT", to be used as an OCI reference prefix.
	Host string
	// CAFile is the CA that signed the serving certificate; empty for HTTP.
	CAFile string
	proc   *process
}

// StartRegistry starts a registry on a free port of 127.0.0.1 and waits
// until GET /v2/ answers.
func StartRegistry(ctx context.Context, opts RegistryOptions) (*Registry, error) {
	for _, sub := range []string{"logs", "pids", "data"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("failed to create the registry directory: %w", err)
		}
	}
	return startRegistry(ctx, launcher{dir: opts.Dir, detached: opts.Detached}, opts)
}

// Stop stops the registry.
func (r *Registry) Stop() {
	r.proc.stop(10 * time.Second)
}

// URL returns the base URL of the registry, http:// or https://.
func (r *Registry) URL() string {
	if r.CAFile != "" {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

func startRegistry(ctx context.Context, launch launcher, opts RegistryOptions) (*Registry, error) {
	bin, err := systemBinary("docker-registry", "docker-registry")
	if err != nil {
		return nil, err
	}
	r := &Registry{}
	p, port, err := startOnPort(ctx, "registry", opts.Port, func(port int) (*process, func(context.Context) error, error) {
		config, err := writeRegistryConfig(opts, r, port)
		if err != nil {
			return nil, nil, err
		}
		p, err := launch.start("registry", bin, "serve", config)
		r.Host = fmt.Sprintf("127.0.0.1:%d", port)
		return p, registryAnswers(r), err
	})
	if err != nil {
		return nil, err
	}
	r.Host, r.proc = fmt.Sprintf("127.0.0.1:%d", port), p
	return r, nil
}

// registryAnswers checks GET /v2/: 200, or 401 when auth is on.
func registryAnswers(r *Registry) func(context.Context) error {
	return func(ctx context.Context) error {
		client, err := r.httpClient()
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL()+"/v2/", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized {
			return fmt.Errorf("GET /v2/: %s", resp.Status)
		}
		return nil
	}
}

func (r *Registry) httpClient() (*http.Client, error) {
	if r.CAFile == "" {
		return httpClient(nil), nil
	}
	pem, err := os.ReadFile(r.CAFile)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", r.CAFile, err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return httpClient(&tls.Config{RootCAs: pool}), nil
}

// writeRegistryConfig writes dir/config.yml for one port.
func writeRegistryConfig(opts RegistryOptions, r *Registry, port int) (string, error) {
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	var b strings.Builder
	fmt.Fprintf(&b, "version: 0.1\nlog:\n  level: info\n")
	fmt.Fprintf(&b, "storage:\n  filesystem:\n    rootdirectory: %q\n  delete:\n    enabled: true\n", filepath.Join(opts.Dir, "data"))
	fmt.Fprintf(&b, "  maintenance:\n    uploadpurging:\n      enabled: false\n")
	fmt.Fprintf(&b, "http:\n  addr: 127.0.0.1:%d\n  secret: %s\n", port, hex.EncodeToString(secret))
	if opts.TLS != nil {
		cert, key, err := opts.TLS.ServingPair("registry")
		if err != nil {
			return "", err
		}
		r.CAFile = opts.TLS.CAFile
		fmt.Fprintf(&b, "  tls:\n    certificate: %q\n    key: %q\n", cert, key)
	}
	if opts.Username != "" {
		htpasswd, err := writeHtpasswd(opts)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "auth:\n  htpasswd:\n    realm: cairn-harness\n    path: %q\n", htpasswd)
	}
	path := filepath.Join(opts.Dir, "config.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return "", fmt.Errorf("failed to write %s: %w", path, err)
	}
	return path, nil
}

func writeHtpasswd(opts RegistryOptions) (string, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte(opts.Password), bcrypt.MinCost)
	if err != nil {
		return "", fmt.Errorf("failed to hash the registry password: %w", err)
	}
	path := filepath.Join(opts.Dir, "htpasswd")
	line := opts.Username + ":" + string(hash) + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		return "", fmt.Errorf("failed to write %s: %w", path, err)
	}
	return path, nil
}
