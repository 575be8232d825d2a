package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// stateFile records, in the cluster directory, what Attach needs.
const stateFile = "state.json"

// ErrNotRunning is returned by Attach when the directory holds no running cluster.
var ErrNotRunning = errors.New("no running cluster")

type state struct {
	APIServerURL string   `json:"apiServerURL"`
	RegistryHost string   `json:"registryHost,omitempty"`
	BinDir       string   `json:"binDir"`
	Full         bool     `json:"full"`
	Components   []string `json:"components"`
}

// writeState writes state.json and the env file (KUBECONFIG, CAIRN_REGISTRY,
// CAIRN_KUBE_BIN and the CAIRN_TEST_* variables that make tests reuse the
// cluster), for `set -a; . DIR/env`.
func writeState(c *Cluster) error {
	st := state{APIServerURL: c.APIServerURL, RegistryHost: c.RegistryHost, BinDir: c.BinDir, Full: c.Full}
	for _, p := range c.procs {
		st.Components = append(st.Components, p.name)
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode the cluster state: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.Dir, stateFile), data, 0o644); err != nil {
		return fmt.Errorf("failed to write the cluster state: %w", err)
	}
	return os.WriteFile(filepath.Join(c.Dir, "env"), []byte(c.Env()), 0o644)
}

// Env returns the environment of the cluster as NAME=value lines.
func (c *Cluster) Env() string {
	var b strings.Builder
	fmt.Fprintf(&b, "KUBECONFIG=%s\nCAIRN_TEST_KUBECONFIG=%s\n", c.Kubeconfig, c.Kubeconfig)
	if c.RegistryHost != "" {
		fmt.Fprintf(&b, "CAIRN_REGISTRY=%s\nCAIRN_TEST_REGISTRY=%s\n", c.RegistryHost, c.RegistryHost)
	}
	if c.BinDir != "" {
		fmt.Fprintf(&b, "CAIRN_KUBE_BIN=%s\n", c.BinDir)
	}
	return b.String()
}

// Attach returns the cluster that Start left running in dir (detached), after
// checking that every process it started is alive, kube-apiserver is ready
// and the registry answers. It returns an error wrapping ErrNotRunning when
// the cluster is stopped or broken.
func Attach(ctx context.Context, dir string) (*Cluster, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	st, err := readState(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), APIServerURL: st.APIServerURL,
		RegistryHost: st.RegistryHost, BinDir: st.BinDir, Full: st.Full}
	if c.procs, err = alive(dir, st.Components); err != nil {
		return nil, err
	}
	if c.RESTConfig, err = restConfigFrom(c.Kubeconfig); err != nil {
		return nil, err
	}
	return c, checkHealth(ctx, c)
}

func readState(dir string) (state, error) {
	var st state
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("%w in %s", ErrNotRunning, dir)
	}
	if err != nil {
		return st, fmt.Errorf("failed to read the cluster state: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("failed to parse %s: %w", filepath.Join(dir, stateFile), err)
	}
	return st, nil
}

// alive returns the processes of components, all of which must be running.
func alive(dir string, components []string) ([]*process, error) {
	var procs []*process
	for _, name := range components {
		p, err := readPidFile(dir, name)
		if err != nil || !p.running() {
			return nil, fmt.Errorf("%w in %s: %s is not running", ErrNotRunning, dir, name)
		}
		procs = append(procs, p)
	}
	return procs, nil
}

func checkHealth(ctx context.Context, c *Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client, err := kubeHTTPClient(c)
	if err != nil {
		return err
	}
	if err := httpOK(client, c.APIServerURL+"/readyz")(ctx); err != nil {
		return fmt.Errorf("%w in %s: kube-apiserver: %v", ErrNotRunning, c.Dir, err)
	}
	if c.RegistryHost == "" {
		return nil
	}
	if err := httpOK(httpClient(nil), "http://"+c.RegistryHost+"/v2/")(ctx); err != nil {
		return fmt.Errorf("%w in %s: registry: %v", ErrNotRunning, c.Dir, err)
	}
	return nil
}

// StopDir stops the processes recorded in dir/pids, and only those: a pid is
// signalled only while it still names the process the harness started. It
// removes the pid files, the state and the env file, keeping logs and data.
func StopDir(dir string) ([]string, error) {
	procs, err := readPidFiles(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir}
	var stopped []string
	for _, p := range procs {
		if p.running() {
			stopped = append(stopped, p.name)
		}
		c.procs = append(c.procs, p)
	}
	c.Stop()
	_ = os.Remove(filepath.Join(dir, stateFile))
	_ = os.Remove(filepath.Join(dir, "env"))
	return stopped, nil
}

// refuseRunning fails when dir holds live processes of an earlier Start.
func refuseRunning(dir string) error {
	procs, err := readPidFiles(dir)
	if err != nil {
		return err
	}
	for _, p := range procs {
		if p.running() {
			return fmt.Errorf("a cluster is running in %s (%s, pid %d): attach to it or stop it first", dir, p.name, p.pid)
		}
	}
	return nil
}

// Connect returns a cluster started elsewhere, from its kubeconfig and
// registry host; Stop leaves it alone.
func Connect(kubeconfig, registryHost string) (*Cluster, error) {
	cfg, err := restConfigFrom(kubeconfig)
	if err != nil {
		return nil, err
	}
	return &Cluster{RESTConfig: cfg, Kubeconfig: kubeconfig, APIServerURL: cfg.Host, RegistryHost: registryHost,
		BinDir: os.Getenv("CAIRN_KUBE_BIN"), Full: true}, nil
}
