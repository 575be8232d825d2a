package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// apiServerName is the component name of kube-apiserver in pids/ and logs/.
const apiServerName = "kube-apiserver"

// StoppedAPIServer is a kube-apiserver stopped by Cluster.StopAPIServer, with what it
// takes to start it again exactly as it ran.
type StoppedAPIServer struct {
	c        *Cluster
	cmdline  []string
	detached bool
}

// StopAPIServer stops the kube-apiserver of a cluster started by Start (or found by
// Attach) and waits until it has exited; etcd and the other components keep running.
// With grace 0 the process is killed at once (SIGKILL), as a crash would; otherwise it
// gets SIGTERM and grace to shut down before SIGKILL. Start on the result starts it
// again on the same port, with the same certificates and etcd data. It fails for a
// cluster given by Connect, whose processes the harness does not own.
func (c *Cluster) StopAPIServer(grace time.Duration) (*StoppedAPIServer, error) {
	p := c.process(apiServerName)
	if p == nil || !p.running() {
		return nil, fmt.Errorf("harness: the cluster has no running %s started by the harness", apiServerName)
	}
	cmdline, err := procCmdline(p.pid)
	if err != nil {
		return nil, fmt.Errorf("failed to read the command line of %s: %w", apiServerName, err)
	}
	if grace > 0 {
		p.stop(grace)
	} else {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		p.waitExit(10 * time.Second)
	}
	if p.running() {
		return nil, fmt.Errorf("harness: %s (pid %d) did not exit", apiServerName, p.pid)
	}
	return &StoppedAPIServer{c: c, cmdline: cmdline, detached: p.exited == nil}, nil
}

// Start starts the stopped kube-apiserver again with its former command line and waits
// until it is ready. Its log continues in the same file.
func (s *StoppedAPIServer) Start(ctx context.Context) error {
	launch := launcher{dir: s.c.Dir, detached: s.detached}
	p, err := launch.start(apiServerName, s.cmdline[0], s.cmdline[1:]...)
	if err != nil {
		return err
	}
	s.c.replaceProcess(p)
	client, err := kubeHTTPClient(s.c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return waitFor(ctx, apiServerName+" to be ready again", []*process{p}, httpOK(client, s.c.APIServerURL+"/readyz"))
}

// process returns the component called name, or nil.
func (c *Cluster) process(name string) *process {
	for _, p := range c.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// replaceProcess puts p in place of the component of the same name, so Stop stops it.
func (c *Cluster) replaceProcess(p *process) {
	for i, old := range c.procs {
		if old.name == p.name {
			c.procs[i] = p
			return
		}
	}
	c.procs = append(c.procs, p)
}

// procCmdline reads the arguments of a live process from /proc.
func procCmdline(pid int) ([]string, error) {
	data, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "cmdline"))
	if err != nil {
		return nil, err
	}
	args := strings.Split(string(bytes.TrimRight(data, "\x00")), "\x00")
	if len(args) == 0 || args[0] == "" {
		return nil, errors.New("empty command line")
	}
	return args, nil
}
