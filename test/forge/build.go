package giteaharness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Version is the Gitea release the harness builds and runs.
const Version = "v1.26.1"

// FindGitea returns the directory holding the gitea binary and its options/
// and templates/ directories: $CAIRN_GITEA_DIR when set, otherwise the output
// of hack/build-gitea.sh, which builds Gitea on first use (minutes) and
// answers from its cache afterwards. The script takes a lock, so concurrent
// test binaries wait for one build.
func FindGitea(ctx context.Context) (string, error) {
	if dir := os.Getenv("CAIRN_GITEA_DIR"); dir != "" {
		return dir, checkGitea(dir)
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "build-gitea.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GITEA_VERSION="+Version)
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("failed to build gitea %s with hack/build-gitea.sh: %w", Version, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	return dir, checkGitea(dir)
}

func checkGitea(dir string) error {
	for _, name := range []string{"gitea", "options", "templates"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("failed to find %s in %s (run hack/build-gitea.sh or set CAIRN_GITEA_DIR): %w", name, dir, err)
		}
	}
	return nil
}

// repoRoot walks up from the working directory to the cairn module root.
func repoRoot() (string, error) {
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
			return "", fmt.Errorf("failed to find the cairn module root above the working directory (set CAIRN_GITEA_DIR)")
		}
		dir = parent
	}
}
