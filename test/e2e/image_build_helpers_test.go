package e2e

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// makeImage runs `make image` (the static build of cairn, then hack/image) pushing to
// host/cairn/cairn:e2e, its binary and reference file in a temporary directory, and
// returns the digest reference it wrote and the binary (static: it runs on the host too).
func makeImage(t *testing.T, host string) (ref, bin string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir := t.TempDir()
	refFile, bin := filepath.Join(dir, "image.ref"), filepath.Join(dir, "cairn")
	begin := time.Now()
	cmd := exec.Command("make", "--no-print-directory", "-C", root, "image", "GO="+goBin, "IMAGE="+host+"/cairn/cairn:e2e",
		"IMAGE_BIN="+bin, "IMAGE_REF_FILE="+refFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	data, err := os.ReadFile(refFile)
	if err != nil {
		t.Fatal(err)
	}
	ref = strings.TrimSpace(string(data))
	t.Logf("make image built and pushed %s in %s", ref, time.Since(begin).Round(time.Second))
	return ref, bin
}

// unpackImage pulls the image ref (by digest) and unpacks its layers, owners and
// modes kept, into a new directory: the container's root file system.
func unpackImage(t *testing.T, ref string) (string, *v1.ConfigFile) {
	t.Helper()
	d, err := name.NewDigest(ref, name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(d)
	if err != nil {
		t.Fatalf("failed to pull %s: %v", ref, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "rootfs")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return root, cfg
		}
		if err != nil {
			t.Fatalf("failed to read the layers of %s: %v", ref, err)
		}
		if err := extractEntry(root, h, tr); err != nil {
			t.Fatal(err)
		}
	}
}

// extractEntry writes one entry of the flattened layers under root.
func extractEntry(root string, h *tar.Header, r io.Reader) error {
	rel := filepath.Clean("/" + h.Name)
	if rel == "/" {
		return nil
	}
	p := filepath.Join(root, rel)
	mode := h.FileInfo().Mode()
	switch h.Typeflag {
	case tar.TypeDir:
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	case tar.TypeReg:
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	case tar.TypeSymlink:
		return os.Symlink(h.Linkname, p)
	default:
		return fmt.Errorf("layer entry %s has type %q, which the test does not unpack", h.Name, h.Typeflag)
	}
	if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
		return err
	}
	return os.Chmod(p, mode) // after chown, which clears set-id bits
}

// serveGitHTTP serves repo over smart HTTP on loopback with git-http-backend (the git
// CLI, tests only) and returns its URL: the controller's pod reaches the platform
// repository over the network, not through a path on its file system.
func serveGitHTTP(t *testing.T, repo *gitRepo) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal("git CLI not available (the CI installs it):", err)
	}
	backend := &cgi.Handler{
		Path:       filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env:        []string{"GIT_PROJECT_ROOT=" + filepath.Dir(repo.dir), "GIT_HTTP_EXPORT_ALL=1", "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1"},
		InheritEnv: []string{"PATH"},
		Stderr:     io.Discard,
	}
	s := httptest.NewServer(http.Handler(backend))
	t.Cleanup(s.Close)
	return s.URL + "/" + filepath.Base(repo.dir)
}
