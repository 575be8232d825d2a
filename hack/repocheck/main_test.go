package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func gitRepo(t *testing.T, files map[string]int) string {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	run("init", "-q")
	for name, size := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("add", "-f", ".")
	return dir
}

func TestCheckRefusesLargeFilesAndKeysOutsideTestdata(t *testing.T) {
	g := NewWithT(t)
	dir := gitRepo(t, map[string]int{
		"cmd/cairn/cairn":           3 << 20,
		"render/testdata/chart.tgz": 3 << 20,
		"main.go":                   100,
		"cosign.key":                10,
		"sign/testdata/test.key":    10,
	})
	problems, err := check(dir, defaultMaxBytes)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(problems).To(ConsistOf(
		ContainSubstring("cmd/cairn/cairn: 3145728 bytes"),
		ContainSubstring("cosign.key: private key material"),
	))
}

func TestCheckPassesACleanTree(t *testing.T) {
	g := NewWithT(t)
	dir := gitRepo(t, map[string]int{"main.go": 100, "testdata/big.bin": 3 << 20})
	problems, err := check(dir, defaultMaxBytes)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(problems).To(BeEmpty())
}

// The project's own tree passes: the check in make test is green on main.
func TestCheckPassesThisRepository(t *testing.T) {
	g := NewWithT(t)
	problems, err := check("../..", defaultMaxBytes)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(problems).To(BeEmpty())
}
