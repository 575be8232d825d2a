package gitea_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/gitea"
	"cairn.dev/cairn/gitsource/forge/internal/contract"
)

// The real Gitea runs in test/forge; these exchanges, shaped after Gitea
// 1.26's API answers, pin the request format without it.

const (
	token = "6d2b8ff5a0a6e1f36b2f1bd6e8d4bb0c5aa4e5c1"
	sha   = "3153ce8b7b0c301f48e57b84fa67cabb22e7dc8b"
)

var (
	repo    = forge.RepoRef{Owner: "cairn", Name: "platform"}
	headers = http.Header{"Authorization": {"token " + token}}
)

func newClient(t *testing.T, srv *contract.Server) *gitea.Client {
	t.Helper()
	c, err := gitea.New(gitea.Options{BaseURL: srv.URL + "/", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSetStatus(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t, contract.Exchange{Method: http.MethodPost, Path: "/api/v1/repos/cairn/platform/statuses/" + sha, Header: headers,
		Body:   `{"state":"pending","context":"cairn/sync","description":"syncing","target_url":""}`,
		Status: http.StatusCreated, Response: `{"id":1,"status":"pending","context":"cairn/sync","description":"syncing","target_url":""}`})
	g.Expect(newClient(t, srv).SetStatus(context.Background(), repo, sha,
		forge.Status{Context: "cairn/sync", State: forge.StatePending, Description: "syncing"})).To(Succeed())
}

func TestUpsertAndPullRequest(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t,
		contract.Exchange{Method: http.MethodGet, Path: "/api/v1/user", Header: headers, Response: `{"id":1,"login":"cairn","is_admin":true}`},
		contract.Exchange{Method: http.MethodGet, Path: "/api/v1/repos/cairn/platform/issues/1/comments", Header: headers,
			Response: `[{"id":5,"body":"LGTM","user":{"login":"cairn"}},{"id":6,"body":"<!-- cairn-plan -->\nold","user":{"login":"cairn"}}]`},
		contract.Exchange{Method: http.MethodPatch, Path: "/api/v1/repos/cairn/platform/issues/comments/6", Header: headers,
			Body: `{"body":"<!-- cairn-plan -->\nnew"}`, Response: `{"id":6}`},
		contract.Exchange{Method: http.MethodGet, Path: "/api/v1/repos/cairn/platform/pulls/1", Header: headers,
			Response: `{"number":1,"base":{"ref":"main","sha":"` + sha + `","repo":{"full_name":"cairn/platform"}},` +
				`"head":{"ref":"feature","sha":"` + strings.Repeat("2", 40) + `","repo":{"full_name":"cairn/platform"}}}`},
	)
	c := newClient(t, srv)
	g.Expect(c.UpsertPlanComment(context.Background(), repo, 1, "new")).To(Succeed())
	pr, err := c.PullRequest(context.Background(), repo, 1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr).To(Equal(forge.PR{Number: 1, BaseSHA: sha, HeadSHA: strings.Repeat("2", 40), BaseRef: "main", HeadRef: "feature",
		HeadRepoFullName: "cairn/platform", State: forge.PROpen}))
}

func TestTokenNeverInErrors(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t, contract.Exchange{Method: http.MethodGet, Path: "/api/v1/repos/cairn/platform/pulls/1",
		Status: http.StatusForbidden, Response: `{"message":"token ` + token + ` does not have at least one of required scope(s)","url":"http://x/api/swagger"}`})
	_, err := newClient(t, srv).PullRequest(context.Background(), repo, 1)
	g.Expect(err).To(MatchError(ContainSubstring("403 Forbidden: token [REDACTED] does not have")))
	g.Expect(err.Error()).NotTo(ContainSubstring(token))
}
