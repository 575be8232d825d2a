package reconciler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/render"
)

func TestDigestsAreKeyedAndFollowTheContent(t *testing.T) {
	secret := func(password string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "db", "namespace": "team-a"}, "stringData": map[string]any{"password": password}}}
	}
	k1, k2 := newDigestKey(), newDigestKey()
	plain := func(u *unstructured.Unstructured) string {
		b, _ := json.Marshal(u.Object)
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:8])
	}
	for _, tc := range []struct {
		name       string
		a, b       *unstructured.Unstructured
		keyA, keyB []byte
		same       bool
	}{
		{"same object, same key", secret("hunter2"), secret("hunter2"), k1, k1, true},
		{"another value", secret("hunter2"), secret("hunter3"), k1, k1, false},
		{"another cluster's key", secret("hunter2"), secret("hunter2"), k1, k2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(apply.ObjectHash(tc.a, tc.keyA) == apply.ObjectHash(tc.b, tc.keyB)).To(Equal(tc.same))
			g.Expect(apply.ObjectHash(tc.a, tc.keyA)).NotTo(Equal(plain(tc.a)), "not the unkeyed hash")
			ra, rb := &render.Result{Digest: "sha256:" + plain(tc.a)}, &render.Result{Digest: "sha256:" + plain(tc.b)}
			g.Expect(keyedDigest(ra, tc.keyA).Digest == keyedDigest(rb, tc.keyB).Digest).To(Equal(tc.same))
			g.Expect(keyedDigest(ra, tc.keyA).Digest).To(HavePrefix("hmac-sha256:"))
			g.Expect(ra.Digest).To(Equal("sha256:"+plain(tc.a)), "the render's own result is left alone")
		})
	}
}
