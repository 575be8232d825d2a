package reconciler

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/render"
)

// DigestKeySecret is the Secret in cairn's namespace that holds the key of every
// digest cairn records over rendered objects (status.renderDigest, the inventory
// hashes): 32 random bytes, created by the first sync. Keyed, those digests reveal
// nothing of what was rendered, so a Secret's value cannot be guessed offline from
// `kubectl get moduleinstance -o yaml`.
const DigestKeySecret = "cairn-digest-key"

// digestKeyField is the key of DigestKeySecret's data that holds the key.
const digestKeyField = "key"

// digestKeyBytes is the size of a digest key.
const digestKeyBytes = 32

// newDigestKey returns a random key.
func newDigestKey() []byte {
	key := make([]byte, digestKeyBytes)
	_, _ = rand.Read(key) // crypto/rand never fails on supported platforms
	return key
}

// digestKey returns the cluster's digest key, read once per engine. A sync creates it
// when it is missing; a plan (create false), which writes nothing, then uses a key of
// its own process, and an engine without a cluster always does.
func (e *Engine) digestKey(ctx context.Context, create bool) ([]byte, error) {
	e.keyMu.Lock()
	defer e.keyMu.Unlock()
	if e.key != nil {
		return e.key, nil
	}
	if e.cluster == nil {
		e.key = newDigestKey()
		return e.key, nil
	}
	key, err := e.loadDigestKey(ctx, create)
	if err != nil || key == nil {
		return e.processKey(), err
	}
	e.key = key
	return key, nil
}

// processKey is the key of this process, for plans before the first sync.
func (e *Engine) processKey() []byte {
	if e.localKey == nil {
		e.localKey = newDigestKey()
	}
	return e.localKey
}

// loadDigestKey reads DigestKeySecret, creating it when create is set; nil without
// error when it does not exist and may not be created.
func (e *Engine) loadDigestKey(ctx context.Context, create bool) ([]byte, error) {
	ns := e.namespace()
	var s corev1.Secret
	err := e.cluster.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: DigestKeySecret}, &s)
	switch {
	case apierrors.IsNotFound(err) && create:
		return e.createDigestKey(ctx, ns)
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to read the digest key Secret %s/%s: %w", ns, DigestKeySecret, err)
	}
	if key := s.Data[digestKeyField]; len(key) >= digestKeyBytes {
		return key, nil
	}
	return nil, fmt.Errorf("the digest key Secret %s/%s has no %d-byte %q key: delete it and cairn makes a new one",
		ns, DigestKeySecret, digestKeyBytes, digestKeyField)
}

func (e *Engine) createDigestKey(ctx context.Context, ns string) ([]byte, error) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: DigestKeySecret,
			Labels: map[string]string{"app.kubernetes.io/part-of": "cairn"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{digestKeyField: newDigestKey()},
	}
	err := e.cluster.client.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) { // another sync made it first
		return e.loadDigestKey(ctx, false)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to create the digest key Secret %s/%s: %w", ns, DigestKeySecret, err)
	}
	return s.Data[digestKeyField], nil
}

// keyedDigest is "hmac-sha256:<hex>" of the render's plain digest under key: it
// changes whenever the render does, and cannot be recomputed from guessed objects
// without the key.
func keyedDigest(res *render.Result, key []byte) *render.Result {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(res.Digest))
	keyed := *res
	keyed.Digest = "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil))
	return &keyed
}

// offlineKey is the digest key of renders without a cluster: random, one per process.
var offlineKey = sync.OnceValue(newDigestKey)
