package main

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/go-digest"

	"cairn.dev/cairn/sign"
	"cairn.dev/cairn/test/harness"
)

// testKeyPassword is the password of the test signing key.
const testKeyPassword = "Image-Key-Pa55-W4m"

// buildTestBinary builds a static linux program for GOARCH that prints greeting.
func buildTestBinary(t *testing.T, greeting string) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(" + `"` + greeting + `"` + ") }\n"
	write(t, filepath.Join(dir, "go.mod"), "module imagetest\n\ngo 1.22\n")
	write(t, filepath.Join(dir, "main.go"), src)
	cmd := exec.Command("go", "build", "-trimpath", "-o", "app", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "app")
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startRegistry starts Debian's docker-registry on loopback for one test.
func startRegistry(t *testing.T) *harness.Registry {
	t.Helper()
	reg, err := harness.StartRegistry(context.Background(), harness.RegistryOptions{Dir: filepath.Join(t.TempDir(), "registry")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	return reg
}

// testKeys writes a cosign key pair into a temporary directory, sets its password
// as COSIGN_PASSWORD (and CAIRN_PASSWORD unset, so that one is read) and returns
// the key file and the public key.
func testKeys(t *testing.T) (string, *sign.PublicKey) {
	t.Helper()
	priv, pub := newKeyPair(t, testKeyPassword)
	path := filepath.Join(t.TempDir(), "cosign.key")
	write(t, path, string(priv))
	t.Setenv("CAIRN_PASSWORD", "")
	os.Unsetenv("CAIRN_PASSWORD")
	t.Setenv("COSIGN_PASSWORD", testKeyPassword)
	return path, pub
}

// otherPublicKey returns the public half of a fresh key pair.
func otherPublicKey(t *testing.T) *sign.PublicKey {
	_, pub := newKeyPair(t, "other")
	return pub
}

// newKeyPair returns a new encrypted cosign private key and its public key.
func newKeyPair(t *testing.T, password string) ([]byte, *sign.PublicKey) {
	t.Helper()
	priv, pubPEM, err := sign.GenerateKeyPair([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := sign.LoadPublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

// runImage runs the command with args and returns its stdout and stderr.
func runImage(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, args, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// pull fetches the image ref (host/repo@sha256:...) with go-containerregistry.
func pull(t *testing.T, ref string) v1.Image {
	t.Helper()
	d, err := name.NewDigest(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// tarFile is one entry of a layer, as read back.
type tarFile struct {
	header *tar.Header
	data   []byte
}

// layerFiles reads every entry of the only layer of img.
func layerFiles(t *testing.T, img v1.Image) map[string]tarFile {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("want one layer, got %d (%v)", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]tarFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(h.Name, "./")] = tarFile{header: h, data: data}
	}
}

// verify checks the cosign signature of ref with key through cairn's sign package.
func verify(t *testing.T, reg *harness.Registry, ref string, key *sign.PublicKey) (sign.Result, error) {
	t.Helper()
	d, err := name.NewDigest(ref)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sign.NewClient(sign.Endpoint{Host: reg.Host, PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	return c.Verify(context.Background(), d.RepositoryStr(), digest.Digest(d.DigestStr()), []*sign.PublicKey{key})
}
