package rendercache

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cairn.dev/cairn/reconciler/hooks"
	"cairn.dev/cairn/render"
)

// memEntries bounds the renders kept in memory only (without a directory, or holding
// a Secret, which never lands on disk); memEntriesOnDisk bounds those a directory
// keeps too, from which a render is read back at the cost of a decode, not of a
// render. Every render kept stays in the heap of a process at rest, and a drift check,
// which reads every instance's render in turn, reads a fleet larger than the bound
// from disk anyway.
const (
	memEntries       = 256
	memEntriesOnDisk = 64
)

// Cache remembers renders by everything that determines them: the instance's
// identity, the module's digest, the values, the Platform inputs and cairn's version.
// It lives in memory and, when a directory is given, on disk across restarts.
type Cache struct {
	dir string
	mu  sync.Mutex
	mem map[string]*render.Result
	// onDisk and memOnly are the keys in mem, oldest first: those the directory
	// keeps too, and the others.
	onDisk, memOnly []string
}

// New returns a cache in memory and, when dir is not "", on disk in dir.
func New(dir string) *Cache {
	return &Cache{dir: dir, mem: map[string]*render.Result{}}
}

// Key digests the whole render request, with cairn's version (a new cairn never
// reuses an older one's renders), so that a field added to it is part of
// the key without anyone remembering to add it; moduleID is the digest of a local
// module's files, the path@version of a registry module or a chart's digest, and stands
// for the module's content. Left out: the repository tree (moduleID covers what a render
// reads of it), where modules are cached, and the registry's credentials, verifier and
// timeout, which decide whether a module can be fetched, not what it renders (the
// verification policy is in VerifyID); credentials must not be guessable from a key.
// The tenant decides when a render runs, not what it renders.
func Key(version string, req render.Request, moduleID string) string {
	req.Source, req.CacheDir, req.Tenant = nil, "", ""
	if req.Registry != nil {
		reg := *req.Registry
		reg.Username, reg.Password, reg.Verifier, reg.Timeout = "", "", nil, 0
		req.Registry = &reg
	}
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(struct {
		Version, Module string
		Request         render.Request
	}{version, moduleID, req})
	return hex.EncodeToString(h.Sum(nil))
}

// Get returns a copy of a cached render, or nil.
func (c *Cache) Get(key string) *render.Result {
	c.mu.Lock()
	res, ok := c.mem[key]
	c.mu.Unlock()
	if !ok {
		if res = c.load(key); res == nil {
			return nil
		}
		c.remember(key, res, true)
	}
	return copyResult(res)
}

// Put keeps a copy of res under key.
func (c *Cache) Put(key string, res *render.Result) {
	res = copyResult(res)
	onDisk := c.storable(res)
	c.remember(key, res, onDisk)
	if onDisk {
		c.store(key, res)
	}
}

// remember keeps res in memory under key; onDisk: the directory keeps it too.
func (c *Cache) remember(key string, res *render.Result, onDisk bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, had := c.mem[key]
	c.mem[key] = res
	if had {
		return
	}
	order, bound := &c.memOnly, memEntries
	if onDisk {
		order, bound = &c.onDisk, memEntriesOnDisk
	}
	*order = append(*order, key)
	for len(*order) > bound {
		delete(c.mem, (*order)[0])
		*order = (*order)[1:]
	}
}

// storable tells whether the directory keeps res (see store).
func (c *Cache) storable(res *render.Result) bool {
	return c.dir != "" && !holdsSecret(res.Objects) && !holdsSecret(hooks.Objects(res.Hooks))
}

func (c *Cache) path(key string) string { return filepath.Join(c.dir, key[:2], key+".json.gz") }

func (c *Cache) load(key string) *render.Result {
	if c.dir == "" {
		return nil
	}
	f, err := os.Open(c.path(key))
	if err != nil {
		return nil
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil
	}
	var res render.Result
	if json.NewDecoder(io.LimitReader(zr, 512<<20)).Decode(&res) != nil {
		return nil
	}
	return &res
}

// store writes the render, storable (a render that holds a Secret stays in memory
// only: its data never lands on disk in the clear), atomically; a failure only
// costs a future render.
func (c *Cache) store(key string, res *render.Result) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // the cache is written on the sync path
	if json.NewEncoder(zw).Encode(res) != nil || zw.Close() != nil {
		return
	}
	p := c.path(key)
	if os.MkdirAll(filepath.Dir(p), 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(buf.Bytes())
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), p) != nil {
		_ = os.Remove(tmp.Name())
	}
}

func holdsSecret(objects []*unstructured.Unstructured) bool {
	for _, u := range objects {
		if u.GetKind() == "Secret" && u.GroupVersionKind().Group == "" {
			return true
		}
	}
	return false
}

func copyResult(res *render.Result) *render.Result {
	out := *res
	out.Objects = make([]*unstructured.Unstructured, len(res.Objects))
	for i, u := range res.Objects {
		out.Objects[i] = u.DeepCopy()
	}
	out.Warnings = append([]string(nil), res.Warnings...)
	out.Hooks = nil
	for _, h := range res.Hooks {
		h.Object = h.Object.DeepCopy()
		out.Hooks = append(out.Hooks, h)
	}
	return &out
}

// Through returns the result cache holds for key, or runs renderFn (which
// pulls what it needs: nothing is pulled for a hit) and keeps its result unless
// reuse says it may not be reused. A nil cache renders every time.
func Through(cache *Cache, key string, renderFn func() (*render.Result, error),
	reuse func(*render.Result) bool) (*render.Result, bool, error) {
	if cache != nil {
		if res := cache.Get(key); res != nil {
			return res, true, nil
		}
	}
	res, err := renderFn()
	if err != nil {
		return nil, false, err
	}
	if cache != nil && (reuse == nil || reuse(res)) {
		cache.Put(key, res) // a copy: the caller's result is its own
	}
	return res, false, nil
}
