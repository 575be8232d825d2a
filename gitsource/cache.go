package gitsource

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// maxPacks is how many packs (one per incremental fetch) the cache may hold
// before the next fetch starts over with a fresh clone in a single pack.
var maxPacks = 64

// largeObjectThreshold: bigger blobs are read from disk lazily, not cached.
const largeObjectThreshold = 1 << 20

// cacheClone is the on-disk bare clone of one URL. All Sources of a process
// that use the same directory share one cacheClone and its lock: go-git's
// filesystem storage caches pack indexes and must not be written by two
// storages at once. Separate processes must not share a CacheDir.
type cacheClone struct {
	mu  sync.Mutex
	dir string
	sto *filesystem.Storage // nil until opened; guarded by mu
}

var cacheClones sync.Map // dir -> *cacheClone

func cacheFor(cacheDir, safeURL string) *cacheClone {
	if abs, err := filepath.Abs(cacheDir); err == nil {
		cacheDir = abs
	}
	sum := sha256.Sum256([]byte(safeURL))
	dir := filepath.Join(cacheDir, hex.EncodeToString(sum[:12]))
	c, _ := cacheClones.LoadOrStore(dir, &cacheClone{dir: dir})
	return c.(*cacheClone)
}

// storage returns the opened cache clone, creating it when missing and
// recreating it when it cannot be read. The caller holds c.mu.
func (c *cacheClone) storage() (*filesystem.Storage, error) {
	if c.sto != nil {
		return c.sto, nil
	}
	sto, err := openClone(c.dir)
	if err != nil {
		return c.reset()
	}
	c.sto = sto
	return sto, nil
}

// reset removes the cache clone and starts an empty one. The caller holds c.mu.
func (c *cacheClone) reset() (*filesystem.Storage, error) {
	c.sto = nil
	if err := os.RemoveAll(c.dir); err != nil {
		return nil, fmt.Errorf("failed to remove cache clone: %w", err)
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create cache clone: %w", err)
	}
	sto := newStorage(c.dir)
	if _, err := git.Init(sto, nil); err != nil {
		return nil, fmt.Errorf("failed to create cache clone: %w", err)
	}
	c.sto = sto
	return sto, nil
}

func newStorage(dir string) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRUDefault(),
		filesystem.Options{LargeObjectThreshold: largeObjectThreshold})
}

// openClone opens an existing cache clone and checks that it is a bare
// repository whose branch tips are readable commits.
func openClone(dir string) (*filesystem.Storage, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("failed to open cache clone: not a directory")
	}
	sto := newStorage(dir)
	repo, err := git.Open(sto, nil)
	if err != nil {
		return nil, fmt.Errorf("failed to open cache clone: %w", err)
	}
	if cfg, err := repo.Config(); err != nil || !cfg.Core.IsBare {
		return nil, fmt.Errorf("failed to open cache clone: not a bare repository")
	}
	if err := checkTips(sto); err != nil {
		return nil, err
	}
	return sto, nil
}

func checkTips(sto *filesystem.Storage) error {
	refs, err := sto.IterReferences()
	if err != nil {
		return fmt.Errorf("failed to read cache refs: %w", err)
	}
	return refs.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() != plumbing.HashReference {
			return nil
		}
		if _, err := object.GetCommit(sto, ref.Hash()); err != nil {
			return fmt.Errorf("failed to read cache ref %s: %w", ref.Name(), err)
		}
		return nil
	})
}

// tooManyPacks reports whether the next fetch should start a fresh clone.
func tooManyPacks(sto *filesystem.Storage) bool {
	packs, err := sto.ObjectPacks()
	return err == nil && len(packs) > maxPacks
}

func hasCommit(sto *filesystem.Storage, h plumbing.Hash) bool {
	_, err := object.GetCommit(sto, h)
	return err == nil
}
