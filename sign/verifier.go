package sign

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"
)

// maxCachedResults bounds the Verifier cache; past it, an arbitrary entry goes.
const maxCachedResults = 4096

// Verifier caches successful verifications, keyed by host, repository, digest and
// the set of trusted keys. A digest names immutable content, so a signature that
// verified once for a key set keeps verifying; failures are not cached and are
// checked again on the next call. The zero value is ready to use and safe for
// concurrent use. A signature removed from the registry after it verified stays
// trusted by the cache until the process restarts.
type Verifier struct {
	mu      sync.Mutex
	results map[verifierKey]Result
}

type verifierKey struct {
	host, repo string
	digest     digest.Digest
	keys       string
}

// VerifyCached is c.Verify through the cache; cached reports whether the result
// came from the cache (no registry request was made).
func (v *Verifier) VerifyCached(ctx context.Context, c *Client, repo string, dgst digest.Digest, keys []*PublicKey) (Result, bool, error) {
	k := verifierKey{host: c.Host(), repo: repo, digest: dgst, keys: keySetFingerprint(keys)}
	if res, ok := v.lookup(k); ok {
		return res, true, nil
	}
	res, err := c.Verify(ctx, repo, dgst, keys)
	if err == nil && res.Verified {
		v.store(k, res)
	}
	return res, false, err
}

func (v *Verifier) lookup(k verifierKey) (Result, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	res, ok := v.results[k]
	return res, ok
}

func (v *Verifier) store(k verifierKey, res Result) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.results == nil {
		v.results = map[verifierKey]Result{}
	}
	if len(v.results) >= maxCachedResults {
		for old := range v.results {
			delete(v.results, old)
			break
		}
	}
	v.results[k] = res
}

// keySetFingerprint identifies a set of keys whatever their order: the SHA-256 of
// the sorted SHA-256 sums of their DER encodings.
func keySetFingerprint(keys []*PublicKey) string {
	sums := make([]string, 0, len(keys))
	for _, k := range keys {
		if k == nil {
			continue
		}
		sum := sha256.Sum256(k.der)
		sums = append(sums, hex.EncodeToString(sum[:]))
	}
	slices.Sort(sums)
	sums = slices.Compact(sums)
	all := sha256.Sum256([]byte(strings.Join(sums, ",")))
	return hex.EncodeToString(all[:])
}
