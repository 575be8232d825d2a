package gitsource

import (
	"crypto/rand"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// fixtureRepo is a bare repository built object by object with go-git, so
// tests can craft any tree entry (symlinks, gitlinks, hostile names).
type fixtureRepo struct {
	t    *testing.T
	dir  string
	sto  *filesystem.Storage
	head plumbing.Hash
	n    int
}

// fileSpec is one file of a fixture commit.
type fileSpec struct {
	mode    filemode.FileMode
	content string
}

func newFixture(t *testing.T) *fixtureRepo {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo.git")
	if _, err := git.PlainInit(dir, true); err != nil {
		t.Fatal(err)
	}
	sto := filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRUDefault())
	head := plumbing.NewSymbolicReference(plumbing.HEAD, "refs/heads/main")
	if err := sto.SetReference(head); err != nil {
		t.Fatal(err)
	}
	return &fixtureRepo{t: t, dir: dir, sto: sto}
}

func (f *fixtureRepo) url() string { return "file://" + f.dir }

func (f *fixtureRepo) store(o interface {
	Encode(plumbing.EncodedObject) error
}) plumbing.Hash {
	f.t.Helper()
	obj := f.sto.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		f.t.Fatal(err)
	}
	h, err := f.sto.SetEncodedObject(obj)
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

func (f *fixtureRepo) blob(content string) plumbing.Hash {
	f.t.Helper()
	obj := f.sto.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, _ := obj.Writer()
	_, _ = w.Write([]byte(content))
	_ = w.Close()
	h, err := f.sto.SetEncodedObject(obj)
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// rawTree stores a tree with entries exactly as given (sorted the Git way).
func (f *fixtureRepo) rawTree(entries []object.TreeEntry) plumbing.Hash {
	sort.Sort(object.TreeEntrySorter(entries))
	return f.store(&object.Tree{Entries: entries})
}

// buildTree stores nested trees for a path -> file map.
func (f *fixtureRepo) buildTree(files map[string]fileSpec) plumbing.Hash {
	children := map[string]map[string]fileSpec{}
	var entries []object.TreeEntry
	for p, spec := range files {
		head, rest, nested := strings.Cut(p, "/")
		if !nested {
			entries = append(entries, f.entry(head, spec))
			continue
		}
		if children[head] == nil {
			children[head] = map[string]fileSpec{}
		}
		children[head][rest] = spec
	}
	for name, sub := range children {
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: f.buildTree(sub)})
	}
	return f.rawTree(entries)
}

func (f *fixtureRepo) entry(name string, spec fileSpec) object.TreeEntry {
	mode := spec.mode
	if mode == 0 {
		mode = filemode.Regular
	}
	if mode == filemode.Submodule {
		return object.TreeEntry{Name: name, Mode: mode, Hash: plumbing.NewHash(spec.content)}
	}
	return object.TreeEntry{Name: name, Mode: mode, Hash: f.blob(spec.content)}
}

// commitTree commits a root tree on main, with the current head as parent.
func (f *fixtureRepo) commitTree(tree plumbing.Hash) string {
	f.t.Helper()
	f.n++
	sig := object.Signature{Name: "Ada", Email: "ada@example.com", When: time.Unix(1700000000+int64(f.n), 0).UTC()}
	c := &object.Commit{Author: sig, Committer: sig, Message: "commit " + string(rune('0'+f.n%10)) + "\n", TreeHash: tree}
	if !f.head.IsZero() {
		c.ParentHashes = []plumbing.Hash{f.head}
	}
	f.setBranch(f.store(c))
	return f.head.String()
}

// commit commits regular files.
func (f *fixtureRepo) commit(files map[string]string) string {
	specs := map[string]fileSpec{}
	for p, c := range files {
		specs[p] = fileSpec{content: c}
	}
	return f.commitTree(f.buildTree(specs))
}

func (f *fixtureRepo) setBranch(h plumbing.Hash) {
	f.t.Helper()
	f.head = h
	if err := f.sto.SetReference(plumbing.NewHashReference("refs/heads/main", h)); err != nil {
		f.t.Fatal(err)
	}
}

// resetTo rewinds main to an earlier commit (the first step of a force-push).
func (f *fixtureRepo) resetTo(sha string) { f.setBranch(plumbing.NewHash(sha)) }

func (f *fixtureRepo) deleteBranch() {
	f.t.Helper()
	if err := f.sto.RemoveReference("refs/heads/main"); err != nil {
		f.t.Fatal(err)
	}
}

// prune deletes every loose object not reachable from main, like git gc.
func (f *fixtureRepo) prune() {
	f.t.Helper()
	repo, err := git.Open(f.sto, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	err = repo.Prune(git.PruneOptions{Handler: repo.DeleteObject, OnlyObjectsOlderThan: time.Now().Add(time.Hour)})
	if err != nil {
		f.t.Fatal(err)
	}
}

var _ storer.EncodedObjectStorer = (*filesystem.Storage)(nil)

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return b
}
