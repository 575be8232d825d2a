// Command repocheck fails when the Git repository tracks what must never be
// committed: a file over 2 MB outside a testdata/ directory (a built binary reached
// main once through `git add -A`), or private key material (*.key, cosign.key)
// outside testdata/. make test runs it before the tests (hack/test.sh).
//
// Usage: go run ./hack/repocheck [-max-bytes N] [DIR]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strings"
)

// defaultMaxBytes is the largest file tracked outside testdata/.
const defaultMaxBytes = 2 << 20

func main() {
	maxBytes := flag.Int64("max-bytes", defaultMaxBytes, "largest size of a tracked file outside testdata/")
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	problems, err := check(dir, *maxBytes)
	if err != nil {
		fmt.Fprintf(os.Stderr, "repocheck: %v\n", err)
		os.Exit(2)
	}
	report(os.Stderr, problems)
	if len(problems) > 0 {
		os.Exit(1)
	}
}

func report(w io.Writer, problems []string) {
	for _, p := range problems {
		fmt.Fprintf(w, "repocheck: %s\n", p)
	}
}

// check lists the tracked files of the work tree at dir that break the rules.
func check(dir string, maxBytes int64) ([]string, error) {
	files, err := trackedFiles(dir)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, f := range files {
		if inTestdata(f) {
			continue
		}
		if isKeyFile(f) {
			problems = append(problems, fmt.Sprintf("%s: private key material must not be committed (only under testdata/)", f))
		}
		info, err := os.Lstat(path.Join(dir, f))
		if err != nil {
			continue // deleted in the work tree, not yet in the index
		}
		if info.Mode().IsRegular() && info.Size() > maxBytes {
			problems = append(problems, fmt.Sprintf("%s: %d bytes, over the %d allowed outside testdata/ (a build output? bin/ is ignored)", f, info.Size(), maxBytes))
		}
	}
	return problems, nil
}

// trackedFiles runs git ls-files (the check is a build tool: it may run programs).
func trackedFiles(dir string) ([]string, error) {
	cmd := exec.Command("git", "-C", dir, "ls-files", "-z")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("failed to list the tracked files: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

func inTestdata(f string) bool {
	return strings.HasPrefix(f, "testdata/") || strings.Contains(f, "/testdata/")
}

func isKeyFile(f string) bool {
	return strings.HasSuffix(f, ".key")
}
