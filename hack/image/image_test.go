package main

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"

	"cairn.dev/cairn/sign"
	"cairn.dev/cairn/test/harness"
)

// TestImage builds images from a static test binary, pushes them to a real
// registry, pulls them back by digest and checks what a cluster would run.
func TestImage(t *testing.T) {
	g := NewWithT(t)
	reg := startRegistry(t)
	keyFile, pub := testKeys(t)
	binary := buildTestBinary(t, "hello from the image")
	repo := reg.Host + "/cairn/cairn"
	args := func(tag string, extra ...string) []string {
		return append([]string{"-binary", binary, "-image", repo + ":" + tag, "-version", "v1.2.3",
			"-revision", "0123abcd", "-source", "https://example.com/cairn"}, extra...)
	}

	refFile := filepath.Join(t.TempDir(), "image.ref")
	out, stderr, err := runImage(t, args("one", "-sign-key", keyFile, "-ref-file", refFile)...)
	g.Expect(err).NotTo(HaveOccurred(), stderr)
	ref := strings.TrimSpace(out)
	g.Expect(ref).To(MatchRegexp(`^` + regexp.QuoteMeta(repo) + `@sha256:[0-9a-f]{64}$`))
	g.Expect(os.ReadFile(refFile)).To(Equal([]byte(ref + "\n")))
	g.Expect(stderr).To(ContainSubstring("signed " + ref + " with key " + pub.ID()))

	t.Run("config", func(t *testing.T) { checkConfig(NewWithT(t), pull(t, ref)) })
	t.Run("layer", func(t *testing.T) { checkLayer(t, pull(t, ref), binary) })

	t.Run("the same binary gives the same digest", func(t *testing.T) {
		g := NewWithT(t)
		again, stderr, err := runImage(t, args("two")...)
		g.Expect(err).NotTo(HaveOccurred(), stderr)
		g.Expect(strings.TrimSpace(again)).To(Equal(ref))
	})

	t.Run("another binary or date gives another digest", func(t *testing.T) {
		g := NewWithT(t)
		other, stderr, err := runImage(t, "-binary", buildTestBinary(t, "another"), "-image", repo+":other")
		g.Expect(err).NotTo(HaveOccurred(), stderr)
		g.Expect(strings.TrimSpace(other)).NotTo(Equal(ref))
		t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
		dated, stderr, err := runImage(t, args("dated")...)
		g.Expect(err).NotTo(HaveOccurred(), stderr)
		g.Expect(strings.TrimSpace(dated)).NotTo(Equal(ref))
		cfg, err := pull(t, strings.TrimSpace(dated)).ConfigFile()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.Created.Time.Equal(time.Unix(1700000000, 0))).To(BeTrue(), "created %s", cfg.Created)
	})

	t.Run("the signature verifies with the public key only", func(t *testing.T) {
		g := NewWithT(t)
		res, err := verify(t, reg, ref, pub)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.KeyID).To(Equal(pub.ID()))
		_, err = verify(t, reg, ref, otherPublicKey(t))
		g.Expect(sign.Reason(err)).To(Equal(sign.ReasonSignatureInvalid))
	})

	t.Run("without a key the image is pushed unsigned and says so", func(t *testing.T) {
		g := NewWithT(t)
		out, stderr, err := runImage(t, "-binary", binary, "-image", reg.Host+"/cairn/unsigned:one")
		g.Expect(err).NotTo(HaveOccurred(), stderr)
		g.Expect(stderr).To(ContainSubstring("not signed"))
		_, err = verify(t, reg, strings.TrimSpace(out), pub)
		g.Expect(sign.Reason(err)).To(Equal(sign.ReasonSignatureMissing))
	})
}

// checkConfig asserts the image runs /cairn as nonroot, labelled, for linux/GOARCH.
func checkConfig(g *WithT, img v1.Image) {
	mt, err := img.MediaType()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mt).To(Equal(types.OCIManifestSchema1))
	cfg, err := img.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.OS).To(Equal("linux"))
	g.Expect(cfg.Architecture).To(Equal(runtime.GOARCH))
	g.Expect(cfg.Created.Time.Equal(time.Unix(0, 0))).To(BeTrue(), "created %s", cfg.Created)
	g.Expect(cfg.Config.Entrypoint).To(Equal([]string{"/cairn"}))
	g.Expect(cfg.Config.Cmd).To(BeEmpty())
	g.Expect(cfg.Config.User).To(Equal("65532:65532"))
	g.Expect(cfg.Config.WorkingDir).To(Equal("/"))
	g.Expect(cfg.Config.Env).To(ContainElement("SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"))
	want := map[string]string{
		"org.opencontainers.image.source":   "https://example.com/cairn",
		"org.opencontainers.image.version":  "v1.2.3",
		"org.opencontainers.image.revision": "0123abcd",
	}
	for k, v := range want {
		g.Expect(cfg.Config.Labels).To(HaveKeyWithValue(k, v))
	}
	m, err := img.Manifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Annotations).To(HaveKeyWithValue("org.opencontainers.image.revision", "0123abcd"))
	g.Expect(m.Layers).To(HaveLen(1))
	g.Expect(m.Layers[0].MediaType).To(Equal(types.OCILayer))
}

// checkLayer asserts the layer's whole file system: the binary (and that it runs
// from there), the CA bundle, the user, no shell, fixed times and owners.
func checkLayer(t *testing.T, img v1.Image, binary string) {
	g := NewWithT(t)
	files := layerFiles(t, img)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	g.Expect(names).To(ConsistOf("cairn", "etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/",
		"etc/ssl/certs/ca-certificates.crt", "home/", "home/nonroot/", "tmp/"), "no shell, nothing else")
	g.Expect(files).NotTo(HaveKey("bin/sh"))

	bin := files["cairn"]
	g.Expect(bin.header.Typeflag).To(Equal(byte(tar.TypeReg)))
	g.Expect(bin.header.Mode).To(Equal(int64(0o755)))
	want, err := os.ReadFile(binary)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bin.data).To(Equal(want))
	extracted := filepath.Join(t.TempDir(), "cairn")
	g.Expect(os.WriteFile(extracted, bin.data, os.FileMode(bin.header.Mode))).To(Succeed())
	out, err := exec.Command(extracted).Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(Equal("hello from the image\n"))

	ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files["etc/ssl/certs/ca-certificates.crt"].data).To(Equal(ca))
	g.Expect(string(files["etc/passwd"].data)).To(ContainSubstring("\nnonroot:x:65532:65532:"))
	g.Expect(string(files["etc/group"].data)).To(ContainSubstring("\nnonroot:x:65532:"))
	g.Expect(files["tmp/"].header.Mode).To(Equal(int64(0o1777)))
	g.Expect(files["home/nonroot/"].header.Uid).To(Equal(65532))
	for n, f := range files {
		g.Expect(f.header.ModTime.Unix()).To(BeZero(), n)
		if n != "home/nonroot/" {
			g.Expect(f.header.Uid).To(BeZero(), n)
		}
	}
}

// TestImageRegistryCredentials: -registry-config's credentials push and sign to a
// registry that requires them; without them the push is refused.
func TestImageRegistryCredentials(t *testing.T) {
	g := NewWithT(t)
	const user, password = "image-ci", "Image-Registry-Pa55-R8t"
	reg, err := harness.StartRegistry(context.Background(), harness.RegistryOptions{
		Dir: filepath.Join(t.TempDir(), "registry"), Username: user, Password: password,
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(reg.Stop)
	keyFile, pub := testKeys(t)
	binary := buildTestBinary(t, "hi")
	image := reg.Host + "/cairn/private:one"

	_, _, err = runImage(t, "-binary", binary, "-image", image)
	g.Expect(err).To(MatchError(ContainSubstring("failed to push " + image)))

	config := filepath.Join(t.TempDir(), "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	write(t, config, `{"auths":{"`+reg.Host+`":{"auth":"`+auth+`"}}}`)
	out, stderr, err := runImage(t, "-binary", binary, "-image", image, "-registry-config", config, "-sign-key", keyFile)
	g.Expect(err).NotTo(HaveOccurred(), stderr)
	g.Expect(stderr + out).NotTo(ContainSubstring(password))
	c, err := sign.NewClient(sign.Endpoint{Host: reg.Host, PlainHTTP: true, Credentials: &sign.Credentials{Username: user, Password: password}})
	g.Expect(err).NotTo(HaveOccurred())
	d, err := name.NewDigest(strings.TrimSpace(out))
	g.Expect(err).NotTo(HaveOccurred())
	res, err := c.Verify(context.Background(), d.RepositoryStr(), digest.Digest(d.DigestStr()), []*sign.PublicKey{pub})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.KeyID).To(Equal(pub.ID()))
}
