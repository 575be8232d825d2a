package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/render"
)

// secretModule renders a ConfigMap and a Secret whose password is values.password.
const secretModule = `package db

instance: {name: string, namespace: string}
values: password: string
objects: {
	config: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "\(instance.name)-config", data: host: "db"}
	secret: {apiVersion: "v1", kind: "Secret", metadata: name: "\(instance.name)-credentials", stringData: password: values.password}
}
`

func secretRepo(ns, password string) map[string]string {
	return map[string]string{
		"platform.yaml":                 platformYAML(""),
		"modules/db/db.cue":             secretModule,
		"modules/db/cue.mod/module.cue": "module: \"cairn.dev/test/db@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"instances/db.yaml": fmt.Sprintf("apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: db\n  namespace: %s\n"+
			"spec:\n  module:\n    local:\n      path: ./modules/db\n  values:\n    password: %s\n", ns, password),
	}
}

// TestDigestsDoNotLetASecretValueBeGuessedOffline: an instance renders a Secret with
// the password "hunter2". Someone who may read ModuleInstances (not Secrets) and
// knows the module tries to confirm a guess offline: neither status.renderDigest nor
// the Secret's inventory hash equals the unkeyed digest they compute for the right
// guess. A new password still changes both, and the Secret is applied again.
func TestDigestsDoNotLetASecretValueBeGuessedOffline(t *testing.T) {
	e := newEnv(t)
	e.deleteNamespacesAtEnd(e.ns)
	repo := newGitRepo(t, secretRepo(e.ns, "hunter2"))
	e.sync(repo)
	mi := e.instance(e.ns, "db")
	g := e.g
	g.Expect(isTrue(mi, "Ready")).To(BeTrue())

	plainDigest, plainHash := e.offlineGuess(repo, mi, "hunter2")
	t.Logf("renderDigest %s, offline guess %s; inventory hash %s, offline guess %s",
		mi.Status.RenderDigest, plainDigest, e.secretHash(), plainHash)
	g.Expect(mi.Status.RenderDigest).To(HavePrefix("hmac-sha256:"))
	g.Expect(mi.Status.RenderDigest).NotTo(ContainSubstring(strings.TrimPrefix(plainDigest, "sha256:")))
	g.Expect(e.secretHash()).NotTo(Equal(plainHash), "the inventory hash is keyed")
	g.Expect(mi.Status.History[0].RenderDigest).To(Equal(mi.Status.RenderDigest))
	raw, err := json.Marshal(mi.Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).NotTo(ContainSubstring("hunter2"))

	var key corev1.Secret
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: reconciler.DigestKeySecret}, &key)).To(Succeed())
	g.Expect(key.Data["key"]).To(HaveLen(32), "a cluster-local random key")

	before, beforeHash := mi.Status.RenderDigest, e.secretHash()
	e.sync(repo) // same revision, same key: the same digests
	g.Expect(e.instance(e.ns, "db").Status.RenderDigest).To(Equal(before))

	repo.commit("rotate the password", map[string]string{"instances/db.yaml": secretRepo(e.ns, "hunter3")["instances/db.yaml"]})
	res := e.sync(repo)
	g.Expect(result(res, e.ns, "db").Action).To(BeEquivalentTo("Updated"))
	after := e.instance(e.ns, "db")
	g.Expect(after.Status.RenderDigest).NotTo(Equal(before), "a changed value changes the digest")
	g.Expect(e.secretHash()).NotTo(Equal(beforeHash), "and the Secret's hash")
	var s corev1.Secret
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "db-credentials"}, &s)).To(Succeed())
	g.Expect(string(s.Data["password"])).To(Equal("hunter3"), "the Secret was applied again")
}

// offlineGuess is what an attacker computes for a guessed password: the plain render
// digest of the module with that value, and the unkeyed hash of the Secret as cairn
// applies it (its labels are public on the instance).
func (e *env) offlineGuess(repo *gitRepo, mi *cairnv1.ModuleInstance, guess string) (string, string) {
	e.t.Helper()
	r := render.NewRenderer()
	defer r.Close()
	values, _ := json.Marshal(map[string]string{"password": guess})
	res, err := r.Render(context.Background(), render.Request{Name: "db", Namespace: e.ns, Source: os.DirFS(repo.dir),
		LocalPath: "modules/db", Values: values})
	e.g.Expect(err).NotTo(HaveOccurred())
	var secret *unstructured.Unstructured
	for _, u := range res.Objects {
		if u.GetKind() == "Secret" {
			secret = u
		}
	}
	e.g.Expect(secret).NotTo(BeNil())
	secret.SetLabels(map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue,
		cairnv1.InstanceLabel: cairnv1.InstanceKey(mi.Namespace, mi.Name), cairnv1.InstanceUIDLabel: string(mi.UID)})
	b, _ := json.Marshal(secret.Object)
	sum := sha256.Sum256(b)
	return res.Digest, hex.EncodeToString(sum[:8])
}

// secretHash is the inventory hash of db's Secret.
func (e *env) secretHash() string {
	e.t.Helper()
	for _, en := range e.inventoryEntries(e.ns, "db") {
		if strings.HasSuffix(en.ID, "__Secret") {
			return en.Hash
		}
	}
	e.t.Fatalf("no Secret in db's inventory: %v", e.inventoryEntries(e.ns, "db"))
	return ""
}
