package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	. "github.com/onsi/gomega"

	"cairn.dev/cairn/sign"
)

const testRegistryPassword = "r3g1stry-Pa55"

// startRegistry serves an in-process registry; with auth, it requires basic auth
// robot:testRegistryPassword.
func startRegistry(t *testing.T, auth bool) string {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if auth {
		next := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "robot" || p != testRegistryPassword {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// writeChartDir writes a minimal chart directory.
func writeChartDir(t *testing.T, name, version string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	files := map[string]string{
		"Chart.yaml":              "apiVersion: v2\nname: " + name + "\nversion: " + version + "\n",
		"values.yaml":             "replicas: 1\n",
		"templates/configmap.yml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
	}
	writeFiles(t, dir, files)
	return dir
}

// writeFiles writes files (by slash-separated path) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// execCairnWithStdin runs the command with stdin.
func execCairnWithStdin(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return cliResult{stdout: out.String(), stderr: errOut.String(), code: exitCodeOf(err), err: err}
}

var digestRefRE = regexp.MustCompile(`oci://(\S+@sha256:[0-9a-f]{64})`)

func TestSupplyChainCLI(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("CAIRN_PASSWORD", "key-password")
	host := startRegistry(t, false)
	keys := t.TempDir()

	res := execCairnWithStdin(t, "", "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	g.Expect(res.err).NotTo(HaveOccurred())
	g.Expect(res.stdout).To(ContainSubstring("Public key written to " + filepath.Join(keys, "cosign.pub")))
	info, err := os.Stat(filepath.Join(keys, "cosign.key"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	res = execCairnWithStdin(t, "", "keygen", "--output-key-prefix", filepath.Join(keys, "other"))
	g.Expect(res.err).NotTo(HaveOccurred())

	res = execCairnWithStdin(t, "", "push", "chart", writeChartDir(t, "demo", "0.1.0+abc"),
		"--to", "oci://"+host+"/charts/demo", "--plain-http")
	g.Expect(res.err).NotTo(HaveOccurred())
	g.Expect(res.stdout).To(ContainSubstring("version 0.1.0+abc (tag 0.1.0_abc)"))
	m := digestRefRE.FindStringSubmatch(res.stdout)
	g.Expect(m).To(HaveLen(2), res.stdout)
	digestRef := m[1]
	g.Expect(digestRef).To(HavePrefix(host + "/charts/demo@sha256:"))

	verify := func(ref, pub string) cliResult {
		return execCairnWithStdin(t, "", "verify", ref, "--key", filepath.Join(keys, pub), "--plain-http")
	}
	res = verify(digestRef, "cosign.pub")
	g.Expect(res.code).To(Equal(1))
	g.Expect(sign.Reason(res.err)).To(Equal(sign.ReasonSignatureMissing))

	res = execCairnWithStdin(t, "", "sign", host+"/charts/demo:0.1.0_abc", "--key", filepath.Join(keys, "cosign.key"), "--plain-http")
	g.Expect(res.err).NotTo(HaveOccurred())
	g.Expect(res.stdout).To(HavePrefix("Signed " + digestRef + " with key "))

	pub, err := os.ReadFile(filepath.Join(keys, "cosign.pub"))
	g.Expect(err).NotTo(HaveOccurred())
	pk, err := sign.LoadPublicKey(pub)
	g.Expect(err).NotTo(HaveOccurred())
	for _, ref := range []string{digestRef, host + "/charts/demo:0.1.0_abc", "oci://" + digestRef} {
		res = verify(ref, "cosign.pub")
		g.Expect(res.code).To(Equal(0), "%s: %v", ref, res.err)
		g.Expect(res.stdout).To(Equal("Verified " + digestRef + " with key " + pk.ID() + "\n"))
	}

	res = verify(digestRef, "other.pub")
	g.Expect(res.code).To(Equal(1))
	g.Expect(sign.Reason(res.err)).To(Equal(sign.ReasonSignatureInvalid))
	g.Expect(res.err.Error()).To(ContainSubstring("not by any of the 1 trusted keys"))
	g.Expect(res.stdout).To(BeEmpty())

	// push --sign-key signs what it pushed; the wrong password fails before pushing.
	tgzDir := writeChartDir(t, "signed", "1.0.0")
	t.Setenv("CAIRN_PASSWORD", "wrong")
	res = execCairnWithStdin(t, "", "push", "chart", tgzDir, "--to", "oci://"+host+"/charts/signed",
		"--plain-http", "--sign-key", filepath.Join(keys, "other.key"))
	g.Expect(sign.Reason(res.err)).To(Equal(sign.ReasonInvalidKey))
	g.Expect(res.err.Error()).NotTo(ContainSubstring("wrong"))
	res = verify(host+"/charts/signed:1.0.0", "other.pub")
	g.Expect(sign.Reason(res.err)).To(Equal(sign.ReasonNotFound), "nothing was pushed")

	t.Setenv("CAIRN_PASSWORD", "key-password")
	res = execCairnWithStdin(t, "", "push", "chart", tgzDir, "--to", "oci://"+host+"/charts/signed",
		"--plain-http", "--sign-key", filepath.Join(keys, "other.key"))
	g.Expect(res.err).NotTo(HaveOccurred())
	g.Expect(res.stdout).To(ContainSubstring("signed with key "))
	res = verify(host+"/charts/signed:1.0.0", "other.pub")
	g.Expect(res.code).To(Equal(0), "%v", res.err)
}

func TestKeygenPassword(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	t.Setenv("CAIRN_PASSWORD", "")
	os.Unsetenv("CAIRN_PASSWORD")
	t.Setenv("COSIGN_PASSWORD", "")
	os.Unsetenv("COSIGN_PASSWORD")

	res := execCairnWithStdin(t, "", "keygen", "--output-key-prefix", filepath.Join(dir, "k"))
	g.Expect(res.code).To(Equal(1))
	g.Expect(res.err.Error()).To(ContainSubstring("set CAIRN_PASSWORD"))
	_, err := os.Stat(filepath.Join(dir, "k.key"))
	g.Expect(os.IsNotExist(err)).To(BeTrue())

	// cosign's variable works, and an explicitly empty password is allowed.
	t.Setenv("COSIGN_PASSWORD", "")
	res = execCairnWithStdin(t, "", "keygen", "--output-key-prefix", filepath.Join(dir, "k"))
	g.Expect(res.err).NotTo(HaveOccurred())
	priv, err := os.ReadFile(filepath.Join(dir, "k.key"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = sign.LoadPrivateKey(priv, nil)
	g.Expect(err).NotTo(HaveOccurred())

	// An existing key is never overwritten.
	res = execCairnWithStdin(t, "", "keygen", "--output-key-prefix", filepath.Join(dir, "k"))
	g.Expect(res.code).To(Equal(1))
	g.Expect(res.err.Error()).To(ContainSubstring("never overwritten"))
	again, err := os.ReadFile(filepath.Join(dir, "k.key"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(priv))
}

// keygen's default prefix writes into the working directory: inside a Git work tree
// it refuses (the key would be one `git add -A` from the repository), unless
// --output-key-prefix names the path; outside one it writes cosign.key as cosign does.
func TestKeygenRefusesAWorkTreeByDefault(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("CAIRN_PASSWORD", "key-password")
	repo := t.TempDir()
	g.Expect(os.Mkdir(filepath.Join(repo, ".git"), 0o755)).To(Succeed())
	sub := filepath.Join(repo, "keys")
	g.Expect(os.Mkdir(sub, 0o755)).To(Succeed())
	t.Chdir(sub)

	res := execCairnWithStdin(t, "", "keygen")
	g.Expect(res.code).To(Equal(1))
	g.Expect(res.err.Error()).To(ContainSubstring("refusing to write the private key cosign.key inside the Git work tree " + repo))
	g.Expect(res.err.Error()).To(ContainSubstring("--output-key-prefix"))
	g.Expect(filepath.Join(sub, "cosign.key")).NotTo(BeAnExistingFile())

	// Named explicitly, the path is the user's choice.
	res = execCairnWithStdin(t, "", "keygen", "--output-key-prefix", "release")
	g.Expect(res.err).NotTo(HaveOccurred())
	g.Expect(filepath.Join(sub, "release.key")).To(BeAnExistingFile())

	// Outside any work tree, the default writes cosign.key.
	plain := t.TempDir()
	t.Chdir(plain)
	res = execCairnWithStdin(t, "", "keygen")
	g.Expect(res.err).NotTo(HaveOccurred())
	g.Expect(filepath.Join(plain, "cosign.key")).To(BeAnExistingFile())
	g.Expect(filepath.Join(plain, "cosign.pub")).To(BeAnExistingFile())
}

func TestPushChartCredentials(t *testing.T) {
	g := NewWithT(t)
	host := startRegistry(t, true)
	chartDir := writeChartDir(t, "private", "2.0.0")
	push := func(stdin string, flags ...string) cliResult {
		args := append([]string{"push", "chart", chartDir, "--to", "oci://" + host + "/charts/private", "--plain-http"}, flags...)
		return execCairnWithStdin(t, stdin, args...)
	}

	res := push("")
	g.Expect(res.code).To(Equal(1))
	g.Expect(sign.Reason(res.err)).To(Equal(sign.ReasonUnauthorized))

	res = push("not-the-password\n", "--username", "robot", "--password-stdin")
	g.Expect(sign.Reason(res.err)).To(Equal(sign.ReasonUnauthorized))
	g.Expect(res.err.Error()).NotTo(ContainSubstring("not-the-password"))

	res = push(testRegistryPassword+"\n", "--username", "robot", "--password-stdin")
	g.Expect(res.err).NotTo(HaveOccurred())

	auth := base64.StdEncoding.EncodeToString([]byte("robot:" + testRegistryPassword))
	config := filepath.Join(t.TempDir(), "config.json")
	g.Expect(os.WriteFile(config, []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600)).To(Succeed())
	res = push("", "--registry-config", config)
	g.Expect(res.err).NotTo(HaveOccurred())

	otherConfig := filepath.Join(t.TempDir(), "config.json")
	g.Expect(os.WriteFile(otherConfig, []byte(`{"auths":{"elsewhere.example.com":{"auth":"`+auth+`"}}}`), 0o600)).To(Succeed())
	res = push("", "--registry-config", otherConfig)
	g.Expect(sign.Reason(res.err)).To(Equal(sign.ReasonUnsupportedSecret))
	g.Expect(res.err.Error()).NotTo(ContainSubstring(testRegistryPassword))
	g.Expect(res.err.Error()).NotTo(ContainSubstring(auth))

	res = push("", "--registry-config", config, "--username", "robot")
	g.Expect(res.code).To(Equal(1))
	g.Expect(res.err.Error()).To(ContainSubstring("not both"))
}
