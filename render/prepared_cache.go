package render

import (
	"container/list"
	"maps"
	"slices"
	"strings"
	"sync"
)

// preparedKey is everything a preparedModule depends on. A local module is
// named by its directory and the digest of its files, a registry module by
// path@version, which the registry cache never fetches twice. The pinned
// catalogs, the skew policy, the registry and the cache directory decide the
// dependencies and the warnings.
type preparedKey struct {
	module   string // "local:modules/app" or "registry:example.com/app@v0.1.0"
	digest   string // local: the digest of the module's files
	catalogs string // "example.com/catalog@v0=v0.3.1,..."
	refuse   bool
	registry ModuleRegistry
	cacheDir string
}

func newPreparedKey(module, digest string, req Request, pins *pinner) preparedKey {
	key := preparedKey{module: module, digest: digest, refuse: pins.refuse, cacheDir: req.CacheDir}
	if req.Registry != nil {
		key.registry = *req.Registry
		key.registry.Verifier = nil
	}
	var catalogs []string
	for _, mpath := range slices.Sorted(maps.Keys(pins.pins)) {
		catalogs = append(catalogs, mpath+"="+pins.pins[mpath])
	}
	key.catalogs = strings.Join(catalogs, ",")
	return key
}

// preparedCache keeps the most recently used prepared modules, bounded in
// number and in estimated bytes. It is safe for concurrent use.
type preparedCache struct {
	maxEntries int
	maxBytes   int64

	mu    sync.Mutex
	bytes int64
	lru   *list.List // of *preparedEntry, most recently used first
	byKey map[preparedKey]*list.Element
}

type preparedEntry struct {
	key preparedKey
	mod *preparedModule
}

func newPreparedCache(maxEntries int, maxBytes int64) *preparedCache {
	return &preparedCache{maxEntries: maxEntries, maxBytes: maxBytes, lru: list.New(), byKey: map[preparedKey]*list.Element{}}
}

// get returns the prepared module of key, or nil.
func (c *preparedCache) get(key preparedKey) *preparedModule {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(el)
	return el.Value.(*preparedEntry).mod
}

// add stores a prepared module, evicting the least recently used ones over
// the bounds. A module larger than the whole byte bound is not kept.
func (c *preparedCache) add(key preparedKey, mod *preparedModule) {
	if c.maxEntries <= 0 || mod.size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.remove(el)
	}
	c.byKey[key] = c.lru.PushFront(&preparedEntry{key: key, mod: mod})
	c.bytes += mod.size
	for c.lru.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.remove(c.lru.Back())
	}
}

// resize sets new bounds, evicting the least recently used modules over
// them.
func (c *preparedCache) resize(maxEntries int, maxBytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maxEntries, c.maxBytes = maxEntries, maxBytes
	for c.lru.Len() > 0 && (c.bytes > maxBytes || c.lru.Len() > max(maxEntries, 0)) {
		c.remove(c.lru.Back())
	}
}

func (c *preparedCache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*preparedEntry)
	delete(c.byKey, e.key)
	c.bytes -= e.mod.size
}

// stats returns the number of entries and their estimated bytes.
func (c *preparedCache) stats() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}
