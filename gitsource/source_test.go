package gitsource

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func newTestSource(t *testing.T, url, cacheDir string) *Source {
	t.Helper()
	s, err := New(Options{URL: url, CacheDir: cacheDir, Timeout: 10 * time.Second, AllowHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSourceFileHappyPath(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newFixture(t)
	first := repo.commit(map[string]string{
		"platform.yaml":          "kind: Platform\n",
		"instances/a.yaml":       "kind: ModuleInstance\n",
		"modules/podinfo/x.cue":  "x: 1\n",
		"modules/podinfo/y.cue":  "y: 1\n",
		"modules/other/main.cue": "z: 1\n",
	})
	second := repo.commit(map[string]string{
		"platform.yaml":          "kind: Platform\n",
		"instances/b.yaml":       "kind: ModuleInstance\n",
		"modules/podinfo/x.cue":  "x: 2\n",
		"modules/podinfo/y.cue":  "y: 1\n",
		"modules/other/main.cue": "z: 1\n",
	})
	s := newTestSource(t, repo.url(), t.TempDir())

	head, err := s.Head(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(head).To(Equal(second))
	g.Expect(s.HasCommit(second)).To(BeFalse())

	g.Expect(s.Fetch(ctx, second)).To(Succeed())
	g.Expect(s.HasCommit(second)).To(BeTrue())
	g.Expect(s.HasCommit(first)).To(BeTrue(), "full branch history is fetched")

	tree, err := s.Tree(ctx, second, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tree.Files()).To(Equal([]string{
		"instances/b.yaml", "modules/other/main.cue", "modules/podinfo/x.cue",
		"modules/podinfo/y.cue", "platform.yaml",
	}))
	content, ok := tree.Bytes("modules/podinfo/x.cue")
	g.Expect(ok).To(BeTrue())
	g.Expect(string(content)).To(Equal("x: 2\n"))

	sub, err := s.Tree(ctx, second, "modules/podinfo")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sub.Files()).To(Equal([]string{"x.cue", "y.cue"}))
	g.Expect(sub.Digest()).To(Equal(tree.DigestDir("modules/podinfo")))

	_, err = s.Tree(ctx, second, "modules/missing")
	g.Expect(err).To(MatchError(fs.ErrNotExist))

	changed, err := s.Diff(ctx, first, second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(Equal([]string{"instances/a.yaml", "instances/b.yaml", "modules/podinfo/x.cue"}))

	same, err := s.Diff(ctx, second, second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same).To(BeEmpty())

	info, err := s.Commit(ctx, second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.SHA).To(Equal(second))
	g.Expect(info.Author).To(Equal("Ada <ada@example.com>"))
	g.Expect(info.Message).To(HavePrefix("commit "))
	g.Expect(info.Time.IsZero()).To(BeFalse())
}

func TestSourceDefaults(t *testing.T) {
	g := NewWithT(t)
	s, err := New(Options{URL: "https://git.example.com/org/repo.git", CacheDir: t.TempDir()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.opts.Branch).To(Equal("main"))
	g.Expect(s.opts.Timeout).To(Equal(60 * time.Second))
	g.Expect(s.opts.Limits).To(Equal(DefaultLimits()))
	g.Expect(DefaultLimits()).To(Equal(Limits{MaxFileBytes: 16 << 20, MaxTotalBytes: 512 << 20, MaxFiles: 50_000}))

	_, err = New(Options{URL: "https://git.example.com/r.git", Branch: "bad..name", CacheDir: t.TempDir()})
	g.Expect(err).To(MatchError(ErrRefNotFound))
}

func TestSourceBranchDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newFixture(t)
	sha := repo.commit(map[string]string{"a.yaml": "a\n"})
	s := newTestSource(t, repo.url(), t.TempDir())
	g.Expect(s.Fetch(ctx, sha)).To(Succeed())

	repo.deleteBranch()
	_, err := s.Head(ctx)
	g.Expect(err).To(MatchError(ErrRefNotFound))
	g.Expect(Reason(err)).To(Equal("RefNotFound"))
	g.Expect(err.Error()).To(ContainSubstring(repo.url()))

	other := "0123456789abcdef0123456789abcdef01234567"
	g.Expect(s.Fetch(ctx, other)).To(MatchError(ErrRefNotFound))

	// The cache still serves the last fetched commit.
	tree, err := s.Tree(ctx, sha, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tree.Files()).To(Equal([]string{"a.yaml"}))
}

func TestSourceEmptyRepositoryIsRefNotFound(t *testing.T) {
	g := NewWithT(t)
	repo := newFixture(t)
	s := newTestSource(t, repo.url(), t.TempDir())
	_, err := s.Head(context.Background())
	g.Expect(err).To(MatchError(ErrRefNotFound))
}

func TestSourceForcePush(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newFixture(t)
	base := repo.commit(map[string]string{"a.yaml": "a\n"})
	old := repo.commit(map[string]string{"a.yaml": "a\n", "old.yaml": "old\n"})
	cacheDir := t.TempDir()
	s := newTestSource(t, repo.url(), cacheDir)
	g.Expect(s.Fetch(ctx, old)).To(Succeed())

	repo.resetTo(base)
	rewritten := repo.commit(map[string]string{"a.yaml": "a\n", "new.yaml": "new\n"})
	repo.prune()

	// A new cache never saw the old commit: the caller must treat everything
	// as changed.
	fresh := newTestSource(t, repo.url(), t.TempDir())
	g.Expect(fresh.Fetch(ctx, rewritten)).To(Succeed())
	_, err := fresh.Diff(ctx, old, rewritten)
	g.Expect(err).To(MatchError(ErrUnknownRevision))
	g.Expect(Reason(err)).To(Equal("UnknownRevision"))
	g.Expect(err.Error()).To(ContainSubstring(old))
	g.Expect(fresh.Fetch(ctx, old)).To(MatchError(ErrUnknownRevision), "old sha is not on the branch any more")

	// The cache that saw the old commit still has it; a tree diff is exact.
	g.Expect(s.Fetch(ctx, rewritten)).To(Succeed())
	changed, err := s.Diff(ctx, old, rewritten)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(Equal([]string{"new.yaml", "old.yaml"}))
}

func TestSourceFetchVerifiesBranchContainsSHA(t *testing.T) {
	g := NewWithT(t)
	repo := newFixture(t)
	repo.commit(map[string]string{"a.yaml": "a\n"})
	s := newTestSource(t, repo.url(), t.TempDir())
	err := s.Fetch(context.Background(), "0123456789abcdef0123456789abcdef01234567")
	g.Expect(err).To(MatchError(ErrUnknownRevision))
	g.Expect(s.Fetch(context.Background(), "HEAD")).To(MatchError(ErrUnknownRevision))
	g.Expect(s.HasCommit("not-a-sha")).To(BeFalse())
}

func TestSourceSharedCacheDir(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newFixture(t)
	sha := repo.commit(map[string]string{"a.yaml": "a\n"})
	cacheDir := t.TempDir()
	g.Expect(newTestSource(t, repo.url(), cacheDir).Fetch(ctx, sha)).To(Succeed())

	// Another Source on the same URL and CacheDir reuses the clone, even when
	// the remote is gone.
	g.Expect(os.RemoveAll(repo.dir)).To(Succeed())
	second := newTestSource(t, repo.url(), cacheDir)
	g.Expect(second.HasCommit(sha)).To(BeTrue())
	g.Expect(second.Fetch(ctx, sha)).To(Succeed())
	_, err := second.Tree(ctx, sha, "")
	g.Expect(err).NotTo(HaveOccurred())
}

func TestSourceCorruptedCacheIsRecloned(t *testing.T) {
	ctx := context.Background()
	repo := newFixture(t)
	sha := repo.commit(map[string]string{"a.yaml": "a\n"})
	for name, corrupt := range map[string]func(dir string) error{
		"not a directory": func(dir string) error {
			return os.WriteFile(dir, []byte("garbage"), 0o600)
		},
		"garbage config": func(dir string) error {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "config"), []byte("[[[\x00"), 0o600)
		},
		"ref to a missing commit": func(dir string) error {
			if err := os.MkdirAll(filepath.Join(dir, "refs", "heads"), 0o700); err != nil {
				return err
			}
			_ = os.WriteFile(filepath.Join(dir, "HEAD"), []byte("ref: refs/heads/main\n"), 0o600)
			_ = os.WriteFile(filepath.Join(dir, "config"), []byte("[core]\n\tbare = true\n"), 0o600)
			return os.WriteFile(filepath.Join(dir, "refs", "heads", "main"), []byte(sha+"\n"), 0o600)
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			cacheDir := t.TempDir()
			s := newTestSource(t, repo.url(), cacheDir)
			g.Expect(corrupt(s.cache.dir)).To(Succeed())
			g.Expect(s.Fetch(ctx, sha)).To(Succeed())
			_, err := s.Tree(ctx, sha, "")
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}

func TestSourceTooManyPacksStartsOver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	saved := maxPacks
	maxPacks = 2
	t.Cleanup(func() { maxPacks = saved })

	repo := newFixture(t)
	s := newTestSource(t, repo.url(), t.TempDir())
	var shas []string
	for i := range 5 {
		sha := repo.commit(map[string]string{"a.yaml": string(rune('a' + i))})
		g.Expect(s.Fetch(ctx, sha)).To(Succeed())
		shas = append(shas, sha)
		packs, err := s.cache.sto.ObjectPacks()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(len(packs)).To(BeNumerically("<=", maxPacks+1))
	}
	changed, err := s.Diff(ctx, shas[0], shas[4])
	g.Expect(err).NotTo(HaveOccurred(), "history survives the fresh clone")
	g.Expect(changed).To(Equal([]string{"a.yaml"}))
}

func TestSourceFetchRespectsByteCap(t *testing.T) {
	g := NewWithT(t)
	repo := newFixture(t)
	sha := repo.commit(map[string]string{"big.bin": string(randomBytes(256 << 10))})
	s, err := New(Options{URL: repo.url(), CacheDir: t.TempDir(), Limits: Limits{MaxTotalBytes: 64 << 10}})
	g.Expect(err).NotTo(HaveOccurred())
	err = s.Fetch(context.Background(), sha)
	g.Expect(err).To(MatchError(ErrTooLarge))
	g.Expect(Reason(err)).To(Equal("SourceTooLarge"))
	g.Expect(s.HasCommit(sha)).To(BeFalse())
}

func TestSourceConcurrentUse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newFixture(t)
	var shas []string
	for i := range 4 {
		shas = append(shas, repo.commit(map[string]string{"a.yaml": string(rune('a' + i)), "b.yaml": "b"}))
	}
	cacheDir := t.TempDir()
	errs := make(chan error, 16)
	for i := range 8 {
		s := newTestSource(t, repo.url(), cacheDir)
		go func() {
			sha := shas[i%len(shas)]
			if err := s.Fetch(ctx, sha); err != nil {
				errs <- err
				return
			}
			_, err := s.Tree(ctx, sha, "")
			errs <- err
		}()
	}
	for range 8 {
		g.Expect(<-errs).NotTo(HaveOccurred())
	}
}
