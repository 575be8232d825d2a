package github_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/github"
	"cairn.dev/cairn/gitsource/forge/internal/contract"
)

const (
	token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	sha   = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
)

var repo = forge.RepoRef{Owner: "octocat", Name: "Hello-World"}

// headers are what every GitHub request must carry.
var headers = http.Header{
	"Authorization":        {"Bearer " + token},
	"Accept":               {"application/vnd.github+json"},
	"X-Github-Api-Version": {"2022-11-28"},
	"User-Agent":           {"cairn"},
}

func recorded(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func newClient(t *testing.T, srv *contract.Server, login string) *github.Client {
	t.Helper()
	c, err := github.New(github.Options{BaseURL: srv.URL, Token: token, Login: login})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSetStatus(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t, contract.Exchange{
		Method: http.MethodPost, Path: "/repos/octocat/Hello-World/statuses/" + sha, Header: headers,
		Body: `{"state":"failure","context":"cairn/apps/web","target_url":"https://cairn.example.com/web",
			"description":"apply failed: Deployment/apps/web: admission webhook denied the request: image [REDACTED] is not signed by the platform key…"}`,
		Status: http.StatusCreated, Response: recorded(t, "status_created.json"),
	})
	c := newClient(t, srv, "")
	err := c.SetStatus(context.Background(), repo, sha, forge.Status{
		Context: "cairn/apps/web", State: forge.StateFailure, TargetURL: "https://cairn.example.com/web",
		Description: "apply failed:\nDeployment/apps/web: admission webhook denied the request: image " + token + " is not signed by the platform key cairn-platform-2026",
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(`apply failed: Deployment/apps/web: admission webhook denied the request: image [REDACTED] is not signed by the platform key…`)).To(BeNumerically("<=", github.DescriptionLimit))
}

func TestSetStatusRejectsInvalidInput(t *testing.T) {
	srv := contract.New(t)
	c := newClient(t, srv, "")
	for name, call := range map[string]func() error{
		"short sha": func() error {
			return c.SetStatus(context.Background(), repo, "6dcb09b", forge.Status{Context: "c", State: forge.StatePending})
		},
		"path in sha": func() error {
			return c.SetStatus(context.Background(), repo, "../../../../user/repos/aaaaaaaaaaaaaaaaaaaa", forge.Status{Context: "c", State: forge.StatePending})
		},
		"unknown state": func() error {
			return c.SetStatus(context.Background(), repo, sha, forge.Status{Context: "c", State: "green"})
		},
		"no context": func() error {
			return c.SetStatus(context.Background(), repo, sha, forge.Status{State: forge.StateSuccess})
		},
		"dotdot repo": func() error {
			return c.SetStatus(context.Background(), forge.RepoRef{Owner: "..", Name: "x"}, sha, forge.Status{Context: "c", State: forge.StatePending})
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := call()
			g.Expect(errors.Is(err, forge.ErrInvalid)).To(BeTrue(), "%v", err)
			retry, _ := forge.Retryable(err)
			g.Expect(retry).To(BeFalse())
		})
	}
}

func TestUpsertPlanCommentEditsOwnCommentOnly(t *testing.T) {
	g := NewWithT(t)
	next := http.Header{"Link": {`<https://api.github.com/repositories/1296269/issues/1347/comments?per_page=100&page=2>; rel="next", <https://api.github.com/repositories/1296269/issues/1347/comments?per_page=100&page=2>; rel="last"`}}
	srv := contract.New(t,
		contract.Exchange{Method: http.MethodGet, Path: "/user", Header: headers, Response: recorded(t, "user.json")},
		contract.Exchange{Method: http.MethodGet, Path: "/repos/octocat/Hello-World/issues/1347/comments", Header: headers,
			Query: url.Values{"per_page": {"100"}, "page": {"1"}}, RespHeader: next, Response: recorded(t, "comments_page1.json")},
		contract.Exchange{Method: http.MethodGet, Path: "/repos/octocat/Hello-World/issues/1347/comments", Header: headers,
			Query: url.Values{"per_page": {"100"}, "page": {"2"}}, Response: recorded(t, "comments_page2.json")},
		contract.Exchange{Method: http.MethodPatch, Path: "/repos/octocat/Hello-World/issues/comments/3", Header: headers,
			Body: `{"body":"<!-- cairn-plan -->\nnew plan"}`, Response: recorded(t, "comment.json")},
	)
	c := newClient(t, srv, "")
	g.Expect(c.UpsertPlanComment(context.Background(), repo, 1347, "new plan")).To(Succeed())
}

func TestUpsertPlanCommentCreatesWhenNone(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t,
		contract.Exchange{Method: http.MethodGet, Path: "/repos/octocat/Hello-World/issues/1347/comments", Header: headers,
			Query: url.Values{"page": {"1"}}, Response: recorded(t, "comments_page1.json")},
		contract.Exchange{Method: http.MethodPost, Path: "/repos/octocat/Hello-World/issues/1347/comments", Header: headers,
			Body: `{"body":"<!-- cairn-plan -->\nnew plan"}`, Status: http.StatusCreated, Response: recorded(t, "comment.json")},
	)
	c := newClient(t, srv, "octocat")
	g.Expect(c.UpsertPlanComment(context.Background(), repo, 1347, "new plan")).To(Succeed())
}

func TestUpsertPlanCommentUnchangedIsNoOp(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t,
		contract.Exchange{Method: http.MethodGet, Path: "/repos/octocat/Hello-World/issues/1347/comments", Header: headers,
			Response: recorded(t, "comments_page2.json")},
	)
	c := newClient(t, srv, "octocat")
	g.Expect(c.UpsertPlanComment(context.Background(), repo, 1347, "old plan")).To(Succeed())
}

func TestUpsertPlanCommentCutsToLimit(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t,
		contract.Exchange{Method: http.MethodGet, Path: "/repos/octocat/Hello-World/issues/1347/comments", Response: "[]"},
		contract.Exchange{Method: http.MethodPost, Path: "/repos/octocat/Hello-World/issues/1347/comments", Status: http.StatusCreated, Response: recorded(t, "comment.json")},
	)
	c := newClient(t, srv, "octocat")
	var body strings.Builder
	body.WriteString("| instance | create |\n|---|---|\n")
	for i := 0; i < 200; i++ {
		body.WriteString("<details><summary>apps/web-" + strings.Repeat("x", 3) + "</summary>\n\n```diff\n" + strings.Repeat("+ line\n", 100) + "```\n</details>\n")
	}
	g.Expect(c.UpsertPlanComment(context.Background(), repo, 1347, body.String())).To(Succeed())
	var sent struct{ Body string }
	g.Expect(json.Unmarshal([]byte(srv.Bodies[1]), &sent)).To(Succeed())
	g.Expect(len(sent.Body)).To(BeNumerically("<=", github.CommentLimit))
	g.Expect(sent.Body).To(HavePrefix(forge.PlanMarker + "\n| instance | create |"))
	g.Expect(sent.Body).To(ContainSubstring("Cut to fit the forge's comment limit"))
}

func TestPullRequest(t *testing.T) {
	tests := []struct {
		name, file string
		number     int
		want       forge.PR
	}{
		{"same repository", "pull.json", 1347, forge.PR{Number: 1347, BaseSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5f", HeadSHA: sha,
			BaseRef: "master", HeadRef: "new-topic", HeadRepoFullName: "octocat/Hello-World", State: forge.PROpen}},
		{"fork", "pull_fork.json", 1348, forge.PR{Number: 1348, BaseSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5f", HeadSHA: strings.Repeat("a", 40),
			BaseRef: "master", HeadRef: "patch-1", HeadRepoFullName: "mallory/Hello-World", Fork: true, State: forge.PROpen}},
		{"deleted fork", "pull_deleted_fork.json", 1349, forge.PR{Number: 1349, BaseSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5f", HeadSHA: strings.Repeat("b", 40),
			BaseRef: "master", HeadRef: "patch-2", Fork: true, State: forge.PROpen}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := contract.New(t, contract.Exchange{Method: http.MethodGet, Path: "/repos/octocat/Hello-World/pulls/" + strconv.Itoa(tt.number),
				Header: headers, Response: recorded(t, tt.file)})
			pr, err := newClient(t, srv, "").PullRequest(context.Background(), repo, tt.number)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pr).To(Equal(tt.want))
		})
	}
}

func TestRateLimitAnswers(t *testing.T) {
	reset := time.Now().Add(90 * time.Second).Unix()
	tests := []struct {
		name      string
		status    int
		header    http.Header
		limited   bool
		wantAfter time.Duration
	}{
		{"primary 403 with reset", http.StatusForbidden, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.Itoa(int(reset))}}, true, 90 * time.Second},
		{"secondary 403 with retry-after", http.StatusForbidden, http.Header{"Retry-After": {"60"}}, true, time.Minute},
		{"429 with retry-after", http.StatusTooManyRequests, http.Header{"Retry-After": {"3"}}, true, 3 * time.Second},
		{"403 permission denied", http.StatusForbidden, http.Header{"X-Ratelimit-Remaining": {"4999"}}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := contract.New(t, contract.Exchange{Method: http.MethodPost, Path: "/repos/octocat/Hello-World/statuses/" + sha,
				Status: tt.status, RespHeader: tt.header, Response: recorded(t, "rate_limited.json")})
			err := newClient(t, srv, "").SetStatus(context.Background(), repo, sha, forge.Status{Context: "cairn/sync", State: forge.StatePending})
			var apiErr *forge.APIError
			g.Expect(errors.As(err, &apiErr)).To(BeTrue())
			g.Expect(apiErr.RateLimited).To(Equal(tt.limited))
			g.Expect(apiErr.RetryAfter).To(BeNumerically("~", tt.wantAfter, 2*time.Second))
			retry, _ := forge.Retryable(err)
			g.Expect(retry).To(Equal(tt.limited))
		})
	}
}

func TestValidationFailureIsPermanent(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t, contract.Exchange{Method: http.MethodPost, Path: "/repos/octocat/Hello-World/statuses/" + sha,
		Status: http.StatusUnprocessableEntity, Response: recorded(t, "validation_failed.json")})
	err := newClient(t, srv, "").SetStatus(context.Background(), repo, sha, forge.Status{Context: "cairn/sync", State: forge.StatePending})
	g.Expect(err).To(MatchError(ContainSubstring("422 Unprocessable Entity: Validation Failed")))
	retry, _ := forge.Retryable(err)
	g.Expect(retry).To(BeFalse())
}

// TestTokenNeverInErrors: a server that echoes the request (headers
// included) into its error body, and a transport failure, must not leak the
// token through the error.
func TestTokenNeverInErrors(t *testing.T) {
	g := NewWithT(t)
	echo := contract.New(t, contract.Exchange{Method: http.MethodPost, Path: "/repos/octocat/Hello-World/statuses/" + sha,
		Status: http.StatusUnauthorized, Response: `{"message":"Bad credentials: Bearer ` + token + `"}`})
	err := newClient(t, echo, "").SetStatus(context.Background(), repo, sha, forge.Status{Context: "cairn/sync", State: forge.StatePending})
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).NotTo(ContainSubstring(token))
	g.Expect(err.Error()).To(ContainSubstring("[REDACTED]"))

	c, err := github.New(github.Options{BaseURL: "http://127.0.0.1:1", Token: token})
	g.Expect(err).NotTo(HaveOccurred())
	err = c.SetStatus(context.Background(), repo, sha, forge.Status{Context: "cairn/sync", State: forge.StatePending})
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).NotTo(ContainSubstring(token))
	retry, _ := forge.Retryable(err)
	g.Expect(retry).To(BeTrue(), "a refused connection is worth retrying")
}

func TestBaseURLWithCredentialsIsRefused(t *testing.T) {
	g := NewWithT(t)
	_, err := github.New(github.Options{BaseURL: "https://user:" + token + "@api.github.com", Token: token})
	g.Expect(err).To(MatchError(ContainSubstring("must not hold credentials")))
	g.Expect(err.Error()).NotTo(ContainSubstring(token))
	_, err = github.New(github.Options{BaseURL: "https://api.github.com"})
	g.Expect(errors.Is(err, forge.ErrInvalid)).To(BeTrue())
}

// TestRedirectToAnotherHostIsRefused: the token is never sent to another
// origin.
func TestRedirectToAnotherHostIsRefused(t *testing.T) {
	g := NewWithT(t)
	other := contract.New(t) // any request here fails the test
	srv := contract.New(t, contract.Exchange{Method: http.MethodGet, Path: "/repos/octocat/Hello-World/pulls/1",
		Status: http.StatusMovedPermanently, RespHeader: http.Header{"Location": {other.URL + "/steal"}}})
	_, err := newClient(t, srv, "").PullRequest(context.Background(), repo, 1)
	g.Expect(err).To(MatchError(ContainSubstring("refused a redirect to another origin")))
}
