package giteaharness_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/gitea"
	giteaharness "cairn.dev/cairn/test/forge"
)

// server is the Gitea all tests of this package share.
var server *giteaharness.Gitea

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cairn-gitea-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	server, err = giteaharness.StartGitea(ctx, dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "failed to start gitea (the forge tests need it; they never skip): %v\n", err)
		return 1
	}
	defer server.Stop()
	fmt.Fprintf(os.Stderr, "gitea %s ready at %s: web start %s, total setup %s\n", giteaharness.Version, server.URL,
		server.Started.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	return m.Run()
}

func client(t *testing.T) *gitea.Client {
	t.Helper()
	c, err := gitea.New(gitea.Options{BaseURL: server.URL, Token: server.Token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newRepo(t *testing.T, ctx context.Context) forge.RepoRef {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	repo, err := server.CreateRepo(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

func TestSetStatusAndReadItBack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newRepo(t, ctx)
	sha, err := server.BranchSHA(ctx, repo, "main")
	g.Expect(err).NotTo(HaveOccurred())
	c := client(t)

	g.Expect(c.SetStatus(ctx, repo, sha, forge.Status{Context: "cairn/sync", State: forge.StatePending,
		Description: "syncing"})).To(Succeed())
	g.Expect(c.SetStatus(ctx, repo, sha, forge.Status{Context: "cairn/apps/web", State: forge.StateFailure,
		Description: "apply failed:\ntoken " + server.Token + " " + strings.Repeat("long reason ", 40),
		TargetURL:   "http://127.0.0.1/cairn/apps/web"})).To(Succeed())
	g.Expect(c.SetStatus(ctx, repo, sha, forge.Status{Context: "cairn/sync", State: forge.StateSuccess,
		Description: "applied, pruned and healthy"})).To(Succeed())

	statuses, err := server.Statuses(ctx, repo, sha)
	g.Expect(err).NotTo(HaveOccurred())
	latest := map[string]giteaharness.CommitStatus{}
	for _, st := range statuses { // the newest (highest id) of each context wins
		if st.ID > latest[st.Context].ID {
			latest[st.Context] = st
		}
	}
	g.Expect(latest["cairn/sync"].State).To(Equal("success"))
	g.Expect(latest["cairn/sync"].Description).To(Equal("applied, pruned and healthy"))
	web := latest["cairn/apps/web"]
	g.Expect(web.State).To(Equal("failure"))
	g.Expect(web.TargetURL).To(Equal("http://127.0.0.1/cairn/apps/web"))
	g.Expect(web.Description).To(HavePrefix("apply failed: token [REDACTED] long reason"))
	g.Expect(web.Description).NotTo(ContainSubstring(server.Token))
	g.Expect(len(web.Description)).To(BeNumerically("<=", gitea.DescriptionLimit))
}

// openPR pushes a branch through the contents API and opens a pull request.
func openPR(t *testing.T, ctx context.Context, repo forge.RepoRef, branch string) int {
	t.Helper()
	if _, err := server.PutFile(ctx, repo, branch, "main", "apps/web.yaml", "replicas: 2\n"); err != nil {
		t.Fatal(err)
	}
	number, err := server.CreatePullRequest(ctx, repo, branch, "main", "scale web")
	if err != nil {
		t.Fatal(err)
	}
	return number
}

func TestPullRequestShas(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newRepo(t, ctx)
	number := openPR(t, ctx, repo, "scale-web")
	base, err := server.BranchSHA(ctx, repo, "main")
	g.Expect(err).NotTo(HaveOccurred())
	head, err := server.BranchSHA(ctx, repo, "scale-web")
	g.Expect(err).NotTo(HaveOccurred())

	pr, err := client(t).PullRequest(ctx, repo, number)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr).To(Equal(forge.PR{Number: number, BaseSHA: base, HeadSHA: head, BaseRef: "main", HeadRef: "scale-web",
		HeadRepoFullName: repo.String(), State: forge.PROpen}))
	g.Expect(head).NotTo(Equal(base))
}

// TestPlanCommentIsUpdatedInPlace: two upserts leave one comment holding the
// second plan; a comment by another user that carries the marker is left
// alone.
func TestPlanCommentIsUpdatedInPlace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newRepo(t, ctx)
	number := openPR(t, ctx, repo, "plan")
	c := client(t)

	otherToken, err := server.CreateUser(ctx, "mallory")
	g.Expect(err).NotTo(HaveOccurred())
	other, err := gitea.New(gitea.Options{BaseURL: server.URL, Token: otherToken})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other.UpsertPlanComment(ctx, repo, number, "forged plan")).To(Succeed())

	g.Expect(c.UpsertPlanComment(ctx, repo, number, "## plan\n\n| instance | create |\n|---|---|\n| apps/web | 1 |\n")).To(Succeed())
	g.Expect(c.UpsertPlanComment(ctx, repo, number, "## plan\n\n| instance | create |\n|---|---|\n| apps/web | 2 |\n")).To(Succeed())
	g.Expect(c.UpsertPlanComment(ctx, repo, number, "## plan\n\n| instance | create |\n|---|---|\n| apps/web | 2 |\n")).To(Succeed())

	comments, err := server.Comments(ctx, repo, number)
	g.Expect(err).NotTo(HaveOccurred())
	var mine []giteaharness.Comment
	for _, cm := range comments {
		if cm.User.Login == server.AdminUser {
			mine = append(mine, cm)
		}
	}
	g.Expect(mine).To(HaveLen(1))
	g.Expect(mine[0].Body).To(Equal(forge.PlanMarker + "\n## plan\n\n| instance | create |\n|---|---|\n| apps/web | 2 |\n"))
	g.Expect(comments).To(ContainElement(HaveField("Body", forge.PlanMarker+"\nforged plan")))
}

func TestPlanCommentIsCutToTheLimit(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newRepo(t, ctx)
	number := openPR(t, ctx, repo, "big")
	var body strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&body, "<details><summary>apps/app-%d</summary>\n\n```diff\n%s```\n</details>\n", i, strings.Repeat("+ replicas: 3\n", 100))
	}
	g.Expect(client(t).UpsertPlanComment(ctx, repo, number, body.String())).To(Succeed())
	comments, err := server.Comments(ctx, repo, number)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(comments).To(HaveLen(1))
	g.Expect(len(comments[0].Body)).To(BeNumerically("<=", gitea.CommentLimit))
	g.Expect(comments[0].Body).To(ContainSubstring("Cut to fit the forge's comment limit"))
}

// receiver runs a forge.Receiver on 127.0.0.1 and collects its events.
type receiver struct {
	url    string
	mu     sync.Mutex
	events []forge.Event
}

func startReceiver(t *testing.T, opts forge.ReceiverOptions) *receiver {
	t.Helper()
	r := &receiver{}
	h, err := forge.NewReceiver(opts, func(ev forge.Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := forge.NewServer(l.Addr().String(), h)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.url = "http://" + l.Addr().String()
	return r
}

func (r *receiver) received() []forge.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]forge.Event(nil), r.events...)
}

// TestWebhookPushReachesReceiver: a git push over HTTP makes Gitea deliver a
// signed push webhook that the receiver accepts; a pull request opened
// delivers a pull_request event.
func TestWebhookPushReachesReceiver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newRepo(t, ctx)
	const secret = "webhook-secret-for-tests"
	opts := forge.DefaultReceiverOptions()
	opts.Hooks = []forge.Hook{{Provider: gitea.Provider{}, Secret: secret}}
	opts.Branch, opts.Repos = "main", []string{repo.String()}
	r := startReceiver(t, opts)
	g.Expect(server.AddWebhook(ctx, repo, r.url+"/hooks/gitea", secret, "push", "pull_request")).To(Succeed())

	sha := pushCommit(t, repo)
	g.Eventually(r.received, 30*time.Second, 100*time.Millisecond).Should(ContainElement(And(
		BeAssignableToTypeOf(forge.Push{}), HaveField("Source", gitea.Name), HaveField("Repo", repo),
		HaveField("Branch", "main"), HaveField("SHAHint", sha), HaveField("Delivery", Not(BeEmpty())))))

	number := openPR(t, ctx, repo, "feature")
	g.Eventually(func() []forge.PullRequest {
		var prs []forge.PullRequest
		for _, ev := range r.received() {
			if pr, ok := ev.(forge.PullRequest); ok {
				prs = append(prs, pr)
			}
		}
		return prs
	}, 30*time.Second, 100*time.Millisecond).Should(ContainElement(And(
		HaveField("Number", number), HaveField("Action", forge.PROpened), HaveField("Repo", repo))))
	for _, ev := range r.received() {
		if p, ok := ev.(forge.Push); ok {
			g.Expect(p.Branch).To(Equal("main"), "pushes to other branches are ignored")
		}
	}
}

// TestWebhookWithWrongSecretIsRefused: deliveries signed with another
// secret never reach the sync loop.
func TestWebhookWithWrongSecretIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newRepo(t, ctx)
	opts := forge.DefaultReceiverOptions()
	opts.Hooks = []forge.Hook{{Provider: gitea.Provider{}, Secret: "the-right-secret"}}
	r := startReceiver(t, opts)
	g.Expect(server.AddWebhook(ctx, repo, r.url+"/hooks/gitea", "a-wrong-secret", "push")).To(Succeed())
	pushCommit(t, repo)
	g.Consistently(r.received, 3*time.Second, 100*time.Millisecond).Should(BeEmpty())
}

// pushCommit clones repo over HTTP with go-git, commits a file on main and
// pushes it; it returns the new commit's SHA.
func pushCommit(t *testing.T, repo forge.RepoRef) string {
	t.Helper()
	auth := &githttp.BasicAuth{Username: server.AdminUser, Password: server.Token}
	url := server.URL + "/" + repo.String() + ".git"
	fs := memfs.New()
	r, err := git.Clone(memory.NewStorage(), fs, &git.CloneOptions{URL: url, Auth: auth})
	if err != nil {
		t.Fatalf("failed to clone %s: %v", url, err)
	}
	f, err := fs.Create("apps/web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte("replicas: 3\n"))
	_ = f.Close()
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Add("apps/web.yaml"); err != nil {
		t.Fatal(err)
	}
	hash, err := wt.Commit("scale web", &git.CommitOptions{Author: &object.Signature{Name: "cairn", Email: "cairn@example.invalid", When: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Push(&git.PushOptions{Auth: auth}); err != nil {
		t.Fatalf("failed to push: %v", err)
	}
	return hash.String()
}

// TestCloneURLCarriesCredentials: the helper's URL works for go-git as is.
func TestCloneURLCarriesCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newRepo(t, ctx)
	_, err := git.Clone(memory.NewStorage(), nil, &git.CloneOptions{URL: server.CloneURL(repo)})
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := http.Get(server.URL + "/api/v1/version")
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
}

// TestFindGiteaFailsLoudly: a missing build is an error naming what is
// missing, never a skip.
func TestFindGiteaFailsLoudly(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("CAIRN_GITEA_DIR", t.TempDir())
	_, err := giteaharness.FindGitea(context.Background())
	g.Expect(err).To(MatchError(ContainSubstring("failed to find gitea in")))
}

// TestProposeChange: one commit on a new branch (an update, a delete and a
// create) and a pull request into main, read back from Gitea; a change computed
// against a file that moved on since is refused.
func TestProposeChange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newRepo(t, ctx)
	_, err := server.PutFile(ctx, repo, "main", "", "instances/web.yaml", "replicas: 3\n")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = server.PutFile(ctx, repo, "main", "", "instances/old.yaml", "old\n")
	g.Expect(err).NotTo(HaveOccurred())
	base, err := server.BranchSHA(ctx, repo, "main")
	g.Expect(err).NotTo(HaveOccurred())
	c := client(t)
	ch := forge.Change{Base: "main", BaseSHA: base, Branch: "cairn/revert-web", Message: "Revert web", Title: "Revert web",
		Body: "held", Files: []forge.FileChange{
			{Path: "instances/web.yaml", Content: []byte("replicas: 1\n"), Existed: true, Before: []byte("replicas: 3\n")},
			{Path: "instances/old.yaml", Delete: true, Existed: true, Before: []byte("old\n")},
			{Path: "instances/new.yaml", Content: []byte("new\n")},
		}}
	got, err := c.ProposeChange(ctx, repo, ch)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.URL).To(HaveSuffix(fmt.Sprintf("/%s/pulls/%d", repo, got.Number)))
	pr, err := c.PullRequest(ctx, repo, got.Number)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.HeadRef).To(Equal("cairn/revert-web"))
	g.Expect(pr.BaseRef).To(Equal("main"))
	for path, want := range map[string]string{"instances/web.yaml": "replicas: 1\n", "instances/new.yaml": "new\n"} {
		content, ok, err := server.FileAt(ctx, repo, "cairn/revert-web", path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeTrue(), path)
		g.Expect(content).To(Equal(want), path)
	}
	_, ok, err := server.FileAt(ctx, repo, "cairn/revert-web", "instances/old.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "deleted")

	stale := ch
	stale.Branch, stale.Files = "cairn/revert-web-2", ch.Files[:1]
	stale.Files[0].Before = []byte("replicas: 2\n") // not what main holds
	_, err = c.ProposeChange(ctx, repo, stale)
	g.Expect(err).To(HaveOccurred())
}

// TestMergedPullRequest: a merged pull request reads as merged, with the merge
// commit that is now the base branch's head.
func TestMergedPullRequest(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newRepo(t, ctx)
	number := openPR(t, ctx, repo, "scale-web")
	pr, err := client(t).PullRequest(ctx, repo, number)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.State).To(Equal(forge.PROpen))
	g.Expect(pr.MergeSHA).To(BeEmpty())
	g.Expect(server.MergePullRequest(ctx, repo, number)).To(Succeed())
	pr, err = client(t).PullRequest(ctx, repo, number)
	g.Expect(err).NotTo(HaveOccurred())
	main, err := server.BranchSHA(ctx, repo, "main")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.State).To(Equal(forge.PRMerged))
	g.Expect(pr.MergeSHA).To(Equal(main))
}
