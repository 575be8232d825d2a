package gitsource

import (
	"context"
	"encoding/base64"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const testPassword = "s3cr3t-Pa55word-never-logged"

func TestHTTPHeadFetchIncremental(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newFixture(t)
	big := string(randomBytes(200 << 10))
	first := repo.commit(map[string]string{"big.bin": big, "a.yaml": "a: 1\n"})
	srv := newGitHTTPServer(t, repo.dir, "", "")
	s := newTestSource(t, srv.repoURL(repo.dir), t.TempDir())

	head, err := s.Head(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(head).To(Equal(first))
	g.Expect(srv.requests.Load()).To(Equal(int64(1)), "Head is one ls-remote round trip")

	g.Expect(s.Fetch(ctx, first)).To(Succeed())
	g.Expect(srv.packBytes.Load()).To(BeNumerically(">", 200<<10))

	// Unchanged branch: Head is one request, Fetch of a present sha none.
	srv.requests.Store(0)
	head, err = s.Head(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(head).To(Equal(first))
	g.Expect(s.Fetch(ctx, head)).To(Succeed())
	g.Expect(srv.requests.Load()).To(Equal(int64(1)))

	// A new commit is fetched incrementally: the big blob is not sent again.
	second := repo.commit(map[string]string{"big.bin": big, "a.yaml": "a: 2\n"})
	head, err = s.Head(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(head).To(Equal(second))
	g.Expect(s.Fetch(ctx, second)).To(Succeed())
	g.Expect(srv.packBytes.Load()).To(BeNumerically("<", 4<<10))

	changed, err := s.Diff(ctx, first, second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(Equal([]string{"a.yaml"}))
	tree, err := s.Tree(ctx, second, "")
	g.Expect(err).NotTo(HaveOccurred())
	content, _ := tree.Bytes("a.yaml")
	g.Expect(string(content)).To(Equal("a: 2\n"))
}

func TestHTTPBasicAuth(t *testing.T) {
	ctx := context.Background()
	repo := newFixture(t)
	sha := repo.commit(map[string]string{"a.yaml": "a\n"})
	srv := newGitHTTPServer(t, repo.dir, "cairn", testPassword)
	url := srv.repoURL(repo.dir)

	t.Run("no credentials", func(t *testing.T) {
		g := NewWithT(t)
		s := newTestSource(t, url, t.TempDir())
		_, err := s.Head(ctx)
		g.Expect(err).To(MatchError(ErrAuth))
		g.Expect(Reason(err)).To(Equal("AuthFailed"))
		g.Expect(s.Fetch(ctx, sha)).To(MatchError(ErrAuth))
	})
	t.Run("wrong password", func(t *testing.T) {
		g := NewWithT(t)
		s, err := New(Options{URL: url, CacheDir: t.TempDir(), AllowHTTP: true,
			Auth: &Auth{Username: "cairn", Password: testPassword + "-wrong"}})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = s.Head(ctx)
		g.Expect(err).To(MatchError(ErrAuth))
		g.Expect(err.Error()).NotTo(ContainSubstring(testPassword))
	})
	t.Run("basic auth", func(t *testing.T) {
		g := NewWithT(t)
		s, err := New(Options{URL: url, CacheDir: t.TempDir(), AllowHTTP: true,
			Auth: &Auth{Username: "cairn", Password: testPassword}})
		g.Expect(err).NotTo(HaveOccurred())
		head, err := s.Head(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(head).To(Equal(sha))
		g.Expect(s.Fetch(ctx, sha)).To(Succeed())
	})
	t.Run("credentials in the URL", func(t *testing.T) {
		g := NewWithT(t)
		withCreds := strings.Replace(url, "http://", "http://cairn:"+testPassword+"@", 1)
		s := newTestSource(t, withCreds, t.TempDir())
		g.Expect(s.Fetch(ctx, sha)).To(Succeed())
		_, err := s.Tree(ctx, strings.Repeat("f", 40), "")
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring(url))
		g.Expect(err.Error()).NotTo(ContainSubstring(testPassword))
	})
}

func TestHTTPTokenOnly(t *testing.T) {
	g := NewWithT(t)
	repo := newFixture(t)
	repo.commit(map[string]string{"a.yaml": "a\n"})
	srv := newGitHTTPServer(t, repo.dir, tokenUsername, testPassword)
	s, err := New(Options{URL: srv.repoURL(repo.dir), CacheDir: t.TempDir(), AllowHTTP: true,
		Auth: &Auth{Password: testPassword}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.Head(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
}

// redirector sends every request to target, keeping path and query.
func redirector(t *testing.T, target string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.RequestURI(), http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPRedirects(t *testing.T) {
	ctx := context.Background()
	repo := newFixture(t)
	sha := repo.commit(map[string]string{"a.yaml": "a\n"})
	other := newGitHTTPServer(t, repo.dir, "", "")
	front := redirector(t, other.URL)
	url := front.URL + "/" + "repo.git"

	t.Run("anonymous redirect to another host is followed", func(t *testing.T) {
		g := NewWithT(t)
		s := newTestSource(t, url, t.TempDir())
		g.Expect(s.Fetch(ctx, sha)).To(Succeed())
	})
	t.Run("credentials are never sent to another host", func(t *testing.T) {
		g := NewWithT(t)
		other.requests.Store(0)
		s, err := New(Options{URL: url, CacheDir: t.TempDir(), AllowHTTP: true,
			Auth: &Auth{Username: "cairn", Password: testPassword}})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = s.Head(ctx)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("refusing redirect"))
		g.Expect(err.Error()).NotTo(ContainSubstring(testPassword))
		g.Expect(other.requests.Load()).To(BeZero())
		encoded := base64.StdEncoding.EncodeToString([]byte("cairn:" + testPassword))
		for _, h := range other.seenAuth() {
			g.Expect(h).NotTo(ContainSubstring(encoded))
		}
	})
}

func TestTimeoutOnHangingServer(t *testing.T) {
	addr := hangingListener(t)
	for _, url := range []string{"http://" + addr + "/repo.git", "https://" + addr + "/repo.git"} {
		t.Run(url, func(t *testing.T) {
			g := NewWithT(t)
			const timeout = 300 * time.Millisecond
			s, err := New(Options{URL: url, CacheDir: t.TempDir(), AllowHTTP: true, Timeout: timeout,
				Auth: &Auth{Username: "cairn", Password: testPassword}})
			g.Expect(err).NotTo(HaveOccurred())

			start := time.Now()
			_, err = s.Head(context.Background())
			g.Expect(time.Since(start)).To(BeNumerically("<", timeout+time.Second))
			g.Expect(err).To(MatchError(ErrTimeout))
			g.Expect(Reason(err)).To(Equal("Timeout"))
			g.Expect(err.Error()).NotTo(ContainSubstring(testPassword))

			start = time.Now()
			err = s.Fetch(context.Background(), strings.Repeat("a", 40))
			g.Expect(time.Since(start)).To(BeNumerically("<", timeout+time.Second))
			g.Expect(err).To(MatchError(ErrTimeout))
		})
	}
}

func TestCredentialsNeverInErrors(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newFixture(t)
	sha := repo.commitTree(repo.buildTree(map[string]fileSpec{"vendor/lib": {mode: filemode.Submodule, content: "0123456789abcdef0123456789abcdef01234567"}}))
	srv := newGitHTTPServer(t, repo.dir, "cairn", testPassword)
	hanging := hangingListener(t)
	front := redirector(t, srv.URL)
	encoded := base64.StdEncoding.EncodeToString([]byte("cairn:" + testPassword))
	userinfo := "cairn:" + testPassword + "@"

	var errs []error
	record := func(err error) {
		g.Expect(err).To(HaveOccurred())
		errs = append(errs, err)
	}
	newSource := func(url string, auth *Auth, timeout time.Duration) *Source {
		s, err := New(Options{URL: url, Auth: auth, CacheDir: t.TempDir(), AllowHTTP: true, Timeout: timeout})
		g.Expect(err).NotTo(HaveOccurred())
		return s
	}
	good := &Auth{Username: "cairn", Password: testPassword}
	bad := &Auth{Username: "cairn", Password: testPassword + "x"}

	_, err := New(Options{URL: "ftp://" + userinfo + "example.com/r.git"})
	record(err)
	_, err = New(Options{URL: "https://" + userinfo + "example.com/r.git", Auth: good})
	record(err)
	_, err = newSource(srv.repoURL(repo.dir), bad, time.Second).Head(ctx)
	record(err)
	record(newSource("http://"+userinfo+strings.TrimPrefix(srv.repoURL(repo.dir), "http://")+"x", nil, time.Second).Fetch(ctx, sha))
	_, err = newSource("http://"+hanging+"/r.git", good, 200*time.Millisecond).Head(ctx)
	record(err)
	_, err = newSource(front.URL+"/repo.git", good, time.Second).Head(ctx)
	record(err)
	s := newSource(srv.repoURL(repo.dir), good, time.Second)
	g.Expect(s.Fetch(ctx, sha)).To(Succeed())
	_, err = s.Tree(ctx, sha, "")
	record(err)
	_, err = s.Diff(ctx, strings.Repeat("1", 40), sha)
	record(err)
	record(s.Fetch(ctx, strings.Repeat("2", 40)))

	for _, err := range errs {
		t.Log(err)
		g.Expect(err.Error()).NotTo(ContainSubstring(testPassword))
		g.Expect(err.Error()).NotTo(ContainSubstring(encoded))
		g.Expect(err.Error()).NotTo(ContainSubstring("/etc/passwd"))
	}
}
