// Command localcluster starts the local cluster of test/harness detached, for
// the demo and for running tests against one long-lived cluster:
//
//	go run ./test/localcluster up   --dir .demo [--full] [--registry [--registry-port N]]
//	go run ./test/localcluster env  --dir .demo
//	go run ./test/localcluster down --dir .demo
//
// `up` reuses a healthy cluster already running in the directory. Exit codes:
// 0 success, 1 failure, 2 usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"cairn.dev/cairn/test/harness"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: localcluster up|down|env --dir DIR [--full] [--registry]")
		return 2
	}
	fs := flag.NewFlagSet("localcluster "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".demo", "state directory of the cluster")
	full := fs.Bool("full", false, "also run kube-controller-manager, kube-scheduler and kwok with one node")
	registry := fs.Bool("registry", false, "also run a plain-HTTP registry")
	registryPort := fs.Int("registry-port", 0, "fixed port of the registry (default: a free one)")
	timeout := fs.Duration("timeout", 3*time.Minute, "how long up may wait for the cluster")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	var err error
	switch args[0] {
	case "up":
		opts := harness.Options{Dir: *dir, Full: *full, Registry: *registry, RegistryPort: *registryPort, Detached: true, StartTimeout: *timeout, Log: stderr}
		err = up(ctx, opts, stdout, stderr)
	case "down":
		err = down(*dir, stdout)
	case "env":
		err = printEnv(*dir, stdout)
	default:
		fmt.Fprintf(stderr, "unknown command %q: want up, down or env\n", args[0])
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "localcluster %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// up reuses the cluster running in opts.Dir when it is healthy and has what
// opts ask for; otherwise it stops what is left there and starts anew.
func up(ctx context.Context, opts harness.Options, stdout, stderr io.Writer) error {
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", opts.Dir, err)
	}
	c, err := harness.Attach(ctx, opts.Dir)
	if err == nil && covers(c, opts) {
		printCluster(stdout, c, "reused")
		return nil
	}
	if err == nil {
		fmt.Fprintf(stderr, "localcluster: the running cluster lacks what was asked for; restarting it\n")
	} else if !errors.Is(err, harness.ErrNotRunning) || hasPids(opts.Dir) {
		fmt.Fprintf(stderr, "localcluster: %v; restarting\n", err)
	}
	if _, err := harness.StopDir(opts.Dir); err != nil {
		return err
	}
	c, err = harness.Start(ctx, opts)
	if err != nil {
		return err
	}
	printCluster(stdout, c, "started")
	return nil
}

func covers(c *harness.Cluster, opts harness.Options) bool {
	port := fmt.Sprintf(":%d", opts.RegistryPort)
	return (c.Full || !opts.Full) && (c.RegistryHost != "" || !opts.Registry) &&
		(opts.RegistryPort == 0 || strings.HasSuffix(c.RegistryHost, port))
}

func hasPids(dir string) bool {
	entries, _ := os.ReadDir(filepath.Join(dir, "pids"))
	return len(entries) > 0
}

func printCluster(w io.Writer, c *harness.Cluster, how string) {
	fmt.Fprintf(w, "cluster %s in %s\n", how, c.Dir)
	fmt.Fprintf(w, "kubeconfig: %s\n", c.Kubeconfig)
	if c.RegistryHost != "" {
		fmt.Fprintf(w, "registry:   %s\n", c.RegistryHost)
	}
	fmt.Fprintf(w, "kubectl:    %s\n", c.KubectlPath())
	fmt.Fprintf(w, "env file:   %s\n", filepath.Join(c.Dir, "env"))
}

func down(dir string, stdout io.Writer) error {
	stopped, err := harness.StopDir(dir)
	if err != nil {
		return err
	}
	if len(stopped) == 0 {
		fmt.Fprintf(stdout, "no cluster running in %s\n", dir)
		return nil
	}
	fmt.Fprintf(stdout, "stopped %v in %s\n", stopped, dir)
	return nil
}

func printEnv(dir string, stdout io.Writer) error {
	data, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		return fmt.Errorf("failed to read the env file (is the cluster up?): %w", err)
	}
	_, err = stdout.Write(data)
	return err
}
