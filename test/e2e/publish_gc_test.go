package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/sign"
)

// TestPublishedRendersAreCollected: with render.publish.keep 2, four commits that
// change one instance leave four entries in its history (newest first, each with
// its commit, artifact and signing key), and the publish registry (a real one, with
// deletes enabled) holds exactly the two newest renders and their signatures: the
// older ones no longer pull by digest. Another instance's artifacts are untouched.
func TestPublishedRendersAreCollected(t *testing.T) {
	e := newEnv(t)
	pub := startRegistry(t, true, false)
	keys := newKeyPair(t)
	suffix := e.ns
	e.putCairnSecret("pub-creds-"+suffix, corev1.SecretTypeBasicAuth, basicAuthData())
	e.putCairnSecret("signing-"+suffix, corev1.SecretTypeOpaque, map[string][]byte{
		"cosign.key": keys.private, "cosign.password": []byte(testKeyPassword)})
	other := inst{name: "other", ns: e.ns, replicas: 1, configs: configs("o")}
	files := appRepo("  render:\n    publish: {registry: rendered, repository: rendered/cluster, keep: 2}\n", other)
	files["registries.yaml"] = registryYAML("rendered", pub.Host, true,
		"  secretRef: {name: pub-creds-"+suffix+"}\n  signing:\n    keySecretRef: {name: signing-"+suffix+"}\n")
	repo := newGitRepo(t, files)
	e.g.Expect(result(e.sync(repo), e.ns, "other").Ready).To(BeTrue())
	otherArtifact := *e.instanceCR(e.ns, "other").Status.Published

	var shas []string
	for i := 1; i <= 4; i++ {
		web := inst{name: "web", ns: e.ns, replicas: 1, configs: configs(fmt.Sprint("c", i))}
		shas = append(shas, repo.commit(fmt.Sprint("web ", i), map[string]string{"instances/web.yaml": web.yaml()}))
		res := e.sync(repo)
		e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
	}

	history := e.instanceCR(e.ns, "web").Status.History
	e.g.Expect(history).To(HaveLen(4))
	slices.Reverse(shas)
	for i, h := range history {
		e.g.Expect(h.Revision).To(Equal(shas[i]), "newest first")
		e.g.Expect(h.Result).To(Equal(cairnv1.HistoryReady))
		e.g.Expect(h.Published).NotTo(BeNil())
		e.g.Expect(h.Published.KeyID).To(Equal(keys.key.Public().ID()))
		e.g.Expect(h.Published.Ref).To(HaveSuffix(":" + strings.ReplaceAll(h.RenderDigest, ":", "-")))
	}

	rc := registryClient(t, pub, true)
	repoPath := "rendered/cluster/" + e.ns + "/web"
	tags, err := rc.Tags(e.ctx, repoPath)
	e.g.Expect(err).NotTo(HaveOccurred())
	var want []string
	for _, h := range history[:2] {
		want = append(want, strings.ReplaceAll(h.RenderDigest, ":", "-"), sign.SignatureTag(digestOf(h.Published.Digest)))
		_, err := rc.Verify(e.ctx, repoPath, digestOf(h.Published.Digest), []*sign.PublicKey{keys.key.Public()})
		e.g.Expect(err).NotTo(HaveOccurred(), "a kept render stays signed")
	}
	e.g.Expect(tags).To(ConsistOf(want), "the two newest renders and their signatures, nothing else")
	for _, h := range history[2:] {
		_, _, err := rc.PullArtifact(e.ctx, repoPath, digestOf(h.Published.Digest))
		e.g.Expect(sign.Reason(err)).To(Equal(sign.ReasonNotFound), "an older render is deleted: %v", err)
		_, err = rc.Resolve(e.ctx, repoPath, sign.SignatureTag(digestOf(h.Published.Digest)))
		e.g.Expect(sign.Reason(err)).To(Equal(sign.ReasonNotFound), "and its signature: %v", err)
	}

	otherPath := "rendered/cluster/" + e.ns + "/other"
	_, err = rc.Verify(e.ctx, otherPath, digestOf(otherArtifact.Digest), []*sign.PublicKey{keys.key.Public()})
	e.g.Expect(err).NotTo(HaveOccurred(), "another instance's artifact is untouched")
	e.g.Expect(e.instanceCR(e.ns, "other").Status.History).To(HaveLen(1), "other was applied once")
}
