package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// kubeBinaries are the files FindBinaries guarantees in the directory it returns.
var kubeBinaries = []string{
	"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok", "kwok-stages.yaml",
}

// FindBinaries returns the directory holding the Kubernetes binaries: $CAIRN_KUBE_BIN
// when set, otherwise the output of hack/build-kube.sh, which builds them on
// first use (minutes) and answers from its cache afterwards. Concurrent
// callers (test binaries of several packages) wait for one build: the script
// takes a lock.
func FindBinaries(ctx context.Context) (string, error) {
	if dir := os.Getenv("CAIRN_KUBE_BIN"); dir != "" {
		return dir, checkBinaries(dir)
	}
	dir, err := RunBuildScript(ctx, "build-kube.sh", "CAIRN_KUBE_BIN")
	if err != nil {
		return "", err
	}
	return dir, checkBinaries(dir)
}

func checkBinaries(dir string) error {
	for _, name := range kubeBinaries {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("failed to find %s in %s (run hack/build-kube.sh or set CAIRN_KUBE_BIN): %w", name, dir, err)
		}
	}
	return nil
}

// RunBuildScript runs hack/<script> from the cairn module root (found above the
// working directory) with extra environment, and returns the last line it
// prints: the directory of what it built or found in its cache. override names
// the variable that skips the build, for the error messages.
//
// The machine's prerequisites (hack/prereqs.sh --check) are checked first, so a
// missing package fails in seconds, not after a long build. A one-time build
// never counts against the caller's deadline: ctx only carries its values.
func RunBuildScript(ctx context.Context, script, override string, env ...string) (string, error) {
	root, err := repoRoot(override)
	if err != nil {
		return "", err
	}
	check := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "prereqs.sh"), "--check")
	check.Stderr = os.Stderr
	if err := check.Run(); err != nil {
		return "", fmt.Errorf("the machine misses a prerequisite (run hack/prereqs.sh as root): %w", err)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(context.WithoutCancel(ctx), "bash", filepath.Join(root, "hack", script))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("failed to build with hack/%s: %w", script, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// repoRoot walks up from the working directory to the cairn module root.
func repoRoot(override string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module cairn.dev/cairn\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("failed to find the cairn module root above the working directory (set %s)", override)
		}
		dir = parent
	}
}

// systemBinary finds a binary installed from a Debian package.
func systemBinary(name, pkg string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("failed to find %s (apt-get install -y %s): %w", name, pkg, err)
	}
	return path, nil
}
