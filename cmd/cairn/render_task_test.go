package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"

	"cairn.dev/cairn/reconciler/rendertask"
	"cairn.dev/cairn/sign"
)

// TestRenderTaskCommand: `cairn render-task` renders a task's Spec from the files a
// render Job's pod mounts, writes the result's digest to the termination message
// and exits 0; a task that cannot render writes the error there and exits 1. The
// publish Registry's credentials come from the mounted docker config: without it
// the registry refuses the task.
func TestRenderTaskCommand(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "pusher" || p != "Task-Push-Pa55" {
			w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	client, err := sign.NewClient(sign.Endpoint{Host: host, PlainHTTP: true, Credentials: &sign.Credentials{Username: "pusher", Password: "Task-Push-Pa55"}})
	g.Expect(err).NotTo(HaveOccurred())

	src := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(src, "modules/web"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(src, "modules/web/main.cue"), []byte(`package app

instance: {name: string, namespace: string}
values: {}
objects: cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: instance.name}
`), 0o644)).To(Succeed())
	tarball, err := rendertask.PackSource(os.DirFS(src), []string{"modules/web"})
	g.Expect(err).NotTo(HaveOccurred())
	sourceDigest, err := rendertask.PushSource(ctx, client, "p/team-a/web/source", tarball)
	g.Expect(err).NotTo(HaveOccurred())
	key, err := rendertask.NewKey()
	g.Expect(err).NotTo(HaveOccurred())

	mounts := t.TempDir()
	spec := &rendertask.Spec{Namespace: "team-a", Name: "web", InputDigest: "sha256:input", Revision: "abc",
		Registry: rendertask.Endpoint{Host: host, PlainHTTP: true}, Source: "p/team-a/web/source", SourceDigest: sourceDigest.String(),
		Result: "p/team-a/web/render", Request: rendertask.Request{LocalPath: "modules/web"}, PublicKey: rendertask.EncodeKey(key.Public)}
	writeSpec := func(s *rendertask.Spec) string {
		b, err := json.Marshal(s)
		g.Expect(err).NotTo(HaveOccurred())
		p := filepath.Join(mounts, "spec.json")
		g.Expect(os.WriteFile(p, b, 0o600)).To(Succeed())
		return p
	}
	dockerConfig := filepath.Join(mounts, "config.json")
	g.Expect(os.WriteFile(dockerConfig, []byte(`{"auths":{"`+host+`":{"username":"pusher","password":"Task-Push-Pa55"}}}`), 0o600)).To(Succeed())
	termination := filepath.Join(mounts, "termination-log")
	args := func(specPath string) []string {
		return []string{"render-task", "--spec", specPath, "--registry-config", dockerConfig,
			"--module-registry-config", filepath.Join(mounts, "none"), "--termination-log", termination, "--tmp-dir", t.TempDir()}
	}

	noCredentials := append(args(writeSpec(spec)), "--registry-config", filepath.Join(mounts, "none"))
	res := execCairn(t, noCredentials...)
	g.Expect(res.code).To(Equal(1), "the registry asks for the mounted credentials")

	res = execCairn(t, args(writeSpec(spec))...)
	g.Expect(res.err).NotTo(HaveOccurred(), res.stderr)
	msg, err := os.ReadFile(termination)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(msg)).To(HavePrefix("digest: sha256:"))
	dgst := digest.Digest(strings.TrimPrefix(string(msg), "digest: "))
	got, err := rendertask.Fetch(ctx, client, spec, dgst, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Objects).To(HaveLen(1))
	g.Expect(got.Objects[0].GetName()).To(Equal("web"))

	bad := *spec
	bad.SourceDigest = "sha256:" + strings.Repeat("0", 64)
	res = execCairn(t, args(writeSpec(&bad))...)
	g.Expect(res.code).To(Equal(1))
	msg, err = os.ReadFile(termination)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(msg)).To(HavePrefix("unavailable: registry unavailable: failed to pull the source"), "not the render's failure: retried")
	g.Expect(string(msg)).NotTo(ContainSubstring("Task-Push-Pa55"), "no credential in the termination message")
}

// TestRenderTaskTrustsTheCABundle: a publish registry served with a certificate
// of a private CA is refused by `cairn render-task` until --ca-bundle (what
// --renderer-ca-configmap mounts) names that CA.
func TestRenderTaskTrustsTheCABundle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "https://")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	client, err := sign.NewClient(sign.Endpoint{Host: host, CAPEM: ca})
	g.Expect(err).NotTo(HaveOccurred())
	src := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(src, "modules/web"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(src, "modules/web/main.cue"), []byte("package app\n\ninstance: {name: string, namespace: string}\nvalues: {}\n"+
		"objects: cm: {apiVersion: \"v1\", kind: \"ConfigMap\", metadata: name: instance.name}\n"), 0o644)).To(Succeed())
	tarball, err := rendertask.PackSource(os.DirFS(src), []string{"modules/web"})
	g.Expect(err).NotTo(HaveOccurred())
	sourceDigest, err := rendertask.PushSource(ctx, client, "p/web/source", tarball)
	g.Expect(err).NotTo(HaveOccurred())
	key, err := rendertask.NewKey()
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	b, err := json.Marshal(&rendertask.Spec{Namespace: "team-a", Name: "web", InputDigest: "sha256:input", Revision: "abc",
		Registry: rendertask.Endpoint{Host: host}, Source: "p/web/source", SourceDigest: sourceDigest.String(),
		Result: "p/web/render", Request: rendertask.Request{LocalPath: "modules/web"}, PublicKey: rendertask.EncodeKey(key.Public)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "spec.json"), b, 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o644)).To(Succeed())
	termination := filepath.Join(dir, "termination-log")
	args := []string{"render-task", "--spec", filepath.Join(dir, "spec.json"), "--registry-config", filepath.Join(dir, "none"),
		"--module-registry-config", filepath.Join(dir, "none"), "--termination-log", termination, "--tmp-dir", t.TempDir()}

	res := execCairn(t, args...)
	g.Expect(res.code).To(Equal(1), "a CA it does not know")
	msg, _ := os.ReadFile(termination)
	g.Expect(string(msg)).To(ContainSubstring("certificate"))
	res = execCairn(t, append(args, "--ca-bundle", filepath.Join(dir, "ca.crt"))...)
	g.Expect(res.err).NotTo(HaveOccurred(), res.stderr)
	msg, _ = os.ReadFile(termination)
	g.Expect(string(msg)).To(HavePrefix("digest: sha256:"))
}
