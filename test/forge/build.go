package giteaharness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"cairn.dev/cairn/test/harness"
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
	dir, err := harness.RunBuildScript(ctx, "build-gitea.sh", "CAIRN_GITEA_DIR", "GITEA_VERSION="+Version)
	if err != nil {
		return "", fmt.Errorf("gitea %s: %w", Version, err)
	}
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
