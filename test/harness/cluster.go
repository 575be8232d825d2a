package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
)

// Cluster is a running local cluster, started by Start, found by Attach or
// given by Connect.
type Cluster struct {
	// Dir is the state directory; empty for a cluster given by Connect.
	Dir string
	// RESTConfig is the admin's (group system:masters), QPS 1000, burst 2000.
	RESTConfig *rest.Config
	// Kubeconfig is the path of the admin kubeconfig.
	Kubeconfig string
	// APIServerURL is https://127.0.0.1:PORT.
	APIServerURL string
	// RegistryHost is "127.0.0.1:PORT" of the plain-HTTP registry, or empty.
	RegistryHost string
	// BinDir holds kubectl and the other Kubernetes binaries, when known.
	BinDir string
	// Full says kube-controller-manager, kube-scheduler and kwok run.
	Full bool

	procs []*process
}

// starter carries the state of one Start.
type starter struct {
	opts   Options
	dir    string
	bins   string
	launch launcher
	pki    *PKI
	saKey  string
	admin  keyPair
	c      *Cluster
}

// Start starts a cluster as opts say and waits until it is usable. It refuses
// a directory whose cluster still runs (see Attach) and otherwise replaces the
// state left there. On error everything started is stopped again.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	s, err := newStarter(ctx, opts)
	if err != nil {
		return nil, err
	}
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, opts.startTimeout())
	defer cancel()
	if err := s.run(ctx); err != nil {
		s.c.Stop()
		return nil, err
	}
	s.logf("cluster ready in %s (kubeconfig %s)", time.Since(begin).Round(time.Millisecond), s.c.Kubeconfig)
	return s.c, nil
}

func newStarter(ctx context.Context, opts Options) (*starter, error) {
	if opts.Dir == "" {
		return nil, errors.New("harness: Options.Dir is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("failed to resolve %s: %w", opts.Dir, err)
	}
	if err := refuseRunning(dir); err != nil {
		return nil, err
	}
	bins := opts.BinDir
	if bins == "" {
		if bins, err = FindBinaries(ctx); err != nil {
			return nil, err
		}
	} else if err := checkBinaries(bins); err != nil {
		return nil, err
	}
	if err := resetDir(dir); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), BinDir: bins, Full: opts.Full}
	return &starter{opts: opts, dir: dir, bins: bins, launch: launcher{dir: dir, detached: opts.Detached}, c: c}, nil
}

// run starts the components in order.
func (s *starter) run(ctx context.Context) error {
	var err error
	if s.pki, err = NewPKI(filepath.Join(s.dir, "pki")); err != nil {
		return err
	}
	etcdURL, err := s.timed("etcd", func() (string, error) { return s.startEtcd(ctx) })
	if err != nil {
		return err
	}
	if _, err := s.timed("kube-apiserver", func() (string, error) { return "", s.startAPIServer(ctx, etcdURL) }); err != nil {
		return err
	}
	if s.c.RESTConfig, err = restConfigFrom(s.c.Kubeconfig); err != nil {
		return err
	}
	if s.opts.Full {
		if _, err := s.timed("controllers, scheduler, kwok and node", func() (string, error) { return "", s.startControllers(ctx) }); err != nil {
			return err
		}
	}
	if s.opts.Registry {
		if _, err := s.timed("registry", func() (string, error) { return "", s.startClusterRegistry(ctx) }); err != nil {
			return err
		}
	}
	return writeState(s.c)
}

func (s *starter) startClusterRegistry(ctx context.Context) error {
	r, err := startRegistry(ctx, s.launch, RegistryOptions{Dir: filepath.Join(s.dir, "registry"), Port: s.opts.RegistryPort})
	if r != nil {
		s.add(r.proc)
		s.c.RegistryHost = r.Host
	}
	return err
}

func (s *starter) timed(what string, step func() (string, error)) (string, error) {
	begin := time.Now()
	out, err := step()
	if err == nil {
		s.logf("%s ready in %s", what, time.Since(begin).Round(time.Millisecond))
	}
	return out, err
}

func (s *starter) add(p *process) {
	if p != nil {
		s.c.procs = append(s.c.procs, p)
	}
}

func (s *starter) logf(format string, args ...any) {
	if s.opts.Log != nil {
		fmt.Fprintf(s.opts.Log, "harness: "+format+"\n", args...)
	}
}

// Stop stops every process of the cluster, the last started first. It does
// nothing for a cluster given by Connect.
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop(15 * time.Second)
		_ = os.Remove(filepath.Join(c.Dir, "pids", c.procs[i].name+".pid"))
	}
	c.procs = nil
}

// KubectlPath returns the kubectl built with the cluster's binaries.
func (c *Cluster) KubectlPath() string {
	return filepath.Join(c.BinDir, "kubectl")
}

// resetDir removes the state of a previous cluster in dir (never other files)
// and creates the sub-directories.
func resetDir(dir string) error {
	for _, sub := range []string{"etcd", "pki", "logs", "pids", "registry", "kubeconfig", "env", stateFile} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return fmt.Errorf("failed to clean %s: %w", dir, err)
		}
	}
	for _, sub := range []string{"pki", "logs", "pids", "registry"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return fmt.Errorf("failed to create %s: %w", sub, err)
		}
	}
	return nil
}
