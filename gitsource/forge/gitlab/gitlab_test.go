package gitlab_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/gitlab"
	"cairn.dev/cairn/gitsource/forge/internal/contract"
)

const (
	token = "glpat-xxxxxxxxxxxxxxxxxxxx"
	sha   = "18f3e63d05582537db6d183d9d557be09e1f90c8"
	// project is the URL-encoded path of group/sub/project.
	project = "/api/v4/projects/group%2Fsub%2Fproject"
)

var (
	repo    = forge.RepoRef{Owner: "group/sub", Name: "project"}
	headers = http.Header{"Private-Token": {token}}
)

func recorded(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func newClient(t *testing.T, srv *contract.Server, login string) *gitlab.Client {
	t.Helper()
	c, err := gitlab.New(gitlab.Options{BaseURL: srv.URL, Token: token, Login: login})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSetStatusMapsStates(t *testing.T) {
	tests := []struct {
		state forge.State
		want  string
	}{
		{forge.StatePending, "pending"},
		{forge.StateSuccess, "success"},
		{forge.StateFailure, "failed"},
		{forge.StateError, "failed"},
	}
	for _, tt := range tests {
		t.Run(string(tt.state), func(t *testing.T) {
			g := NewWithT(t)
			srv := contract.New(t, contract.Exchange{
				Method: http.MethodPost, Path: project + "/statuses/" + sha, Header: headers,
				Body:   `{"state":"` + tt.want + `","name":"cairn/sync","description":"render failed","target_url":"https://cairn.example.com/s"}`,
				Status: http.StatusCreated, Response: recorded(t, "status_created.json"),
			})
			err := newClient(t, srv, "").SetStatus(context.Background(), repo, sha, forge.Status{
				Context: "cairn/sync", State: tt.state, Description: "render failed", TargetURL: "https://cairn.example.com/s"})
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}

func TestSetStatusCutsDescriptionAndDropsLongTargetURL(t *testing.T) {
	g := NewWithT(t)
	long := ""
	for i := 0; i < 60; i++ {
		long += "word "
	}
	srv := contract.New(t, contract.Exchange{Method: http.MethodPost, Path: project + "/statuses/" + sha,
		Status: http.StatusCreated, Response: recorded(t, "status_created.json")})
	err := newClient(t, srv, "").SetStatus(context.Background(), repo, sha, forge.Status{
		Context: "cairn/sync", State: forge.StateFailure, Description: long,
		TargetURL: "https://cairn.example.com/" + long[:250]})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(srv.Bodies[0]).NotTo(ContainSubstring("target_url"))
	g.Expect(srv.Bodies[0]).To(ContainSubstring("word…"))
}

// TestSetStatusSameStateIsSuccess: GitLab answers 400 "Cannot transition
// status" when a status already has the posted state.
func TestSetStatusSameStateIsSuccess(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t, contract.Exchange{Method: http.MethodPost, Path: project + "/statuses/" + sha,
		Status: http.StatusBadRequest, Response: recorded(t, "transition.json")})
	g.Expect(newClient(t, srv, "").SetStatus(context.Background(), repo, sha,
		forge.Status{Context: "cairn/sync", State: forge.StatePending})).To(Succeed())
}

func TestSetStatusRateLimited(t *testing.T) {
	g := NewWithT(t)
	reset := time.Now().Add(30 * time.Second).Unix()
	srv := contract.New(t, contract.Exchange{Method: http.MethodPost, Path: project + "/statuses/" + sha,
		Status: http.StatusTooManyRequests, Response: recorded(t, "rate_limited.json"),
		RespHeader: http.Header{"Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {strconv.FormatInt(reset, 10)}, "Content-Type": {"text/plain"}}})
	err := newClient(t, srv, "").SetStatus(context.Background(), repo, sha, forge.Status{Context: "cairn/sync", State: forge.StatePending})
	var apiErr *forge.APIError
	g.Expect(errors.As(err, &apiErr)).To(BeTrue())
	g.Expect(apiErr.RateLimited).To(BeTrue())
	g.Expect(apiErr.Reason()).To(Equal(forge.ReasonRateLimited))
	g.Expect(apiErr.RetryAfter).To(BeNumerically("~", 30*time.Second, 2*time.Second))
}

func TestUpsertPlanNoteEditsOwnNote(t *testing.T) {
	g := NewWithT(t)
	query := func(page string) url.Values {
		return url.Values{"per_page": {"100"}, "page": {page}, "sort": {"asc"}, "order_by": {"created_at"}}
	}
	srv := contract.New(t,
		contract.Exchange{Method: http.MethodGet, Path: "/api/v4/user", Header: headers, Response: recorded(t, "user.json")},
		contract.Exchange{Method: http.MethodGet, Path: project + "/merge_requests/2/notes", Header: headers, Query: query("1"),
			RespHeader: http.Header{"X-Next-Page": {"2"}, "X-Page": {"1"}}, Response: recorded(t, "notes_page1.json")},
		contract.Exchange{Method: http.MethodGet, Path: project + "/merge_requests/2/notes", Header: headers, Query: query("2"),
			RespHeader: http.Header{"X-Next-Page": {""}, "X-Page": {"2"}}, Response: recorded(t, "notes_page2.json")},
		contract.Exchange{Method: http.MethodPut, Path: project + "/merge_requests/2/notes/305", Header: headers,
			Body: `{"body":"<!-- cairn-plan -->\nnew plan"}`, Response: recorded(t, "note.json")},
	)
	g.Expect(newClient(t, srv, "").UpsertPlanComment(context.Background(), repo, 2, "new plan")).To(Succeed())
}

func TestUpsertPlanNoteCreatesWhenOnlyOthersCarryTheMarker(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t,
		contract.Exchange{Method: http.MethodGet, Path: project + "/merge_requests/2/notes", Response: recorded(t, "notes_page1.json")},
		contract.Exchange{Method: http.MethodPost, Path: project + "/merge_requests/2/notes", Header: headers,
			Body: `{"body":"<!-- cairn-plan -->\nnew plan"}`, Status: http.StatusCreated, Response: recorded(t, "note.json")},
	)
	g.Expect(newClient(t, srv, "cairn-bot").UpsertPlanComment(context.Background(), repo, 2, "new plan")).To(Succeed())
}

func TestMergeRequest(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t, contract.Exchange{Method: http.MethodGet, Path: project + "/merge_requests/133", Header: headers,
		Response: recorded(t, "merge_request.json")})
	pr, err := newClient(t, srv, "").PullRequest(context.Background(), repo, 133)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr).To(Equal(forge.PR{Number: 133, BaseSHA: "c380d3acebd181f13629a25d2e2acca46ffe1e00",
		HeadSHA: "e82eb4a098e32c796079ca3915e07487fc4db24c", BaseRef: "main", HeadRef: "manual-job-rules",
		HeadRepoFullName: "group/sub/project", State: forge.PROpen}))
}

func TestMergeRequestFromFork(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t,
		contract.Exchange{Method: http.MethodGet, Path: project + "/merge_requests/134", Response: recorded(t, "merge_request_fork.json")},
		contract.Exchange{Method: http.MethodGet, Path: "/api/v4/projects/99", Header: headers, Response: recorded(t, "project_fork.json")},
	)
	pr, err := newClient(t, srv, "").PullRequest(context.Background(), repo, 134)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr).To(Equal(forge.PR{Number: 134, HeadSHA: "f82eb4a098e32c796079ca3915e07487fc4db24c", BaseRef: "main",
		HeadRef: "patch-1", HeadRepoFullName: "mallory/project", Fork: true, State: forge.PROpen}))
}

func TestTokenNeverInErrors(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t, contract.Exchange{Method: http.MethodGet, Path: project + "/merge_requests/1",
		Status: http.StatusUnauthorized, Response: `{"message":"401 Unauthorized: token ` + token + ` expired"}`})
	_, err := newClient(t, srv, "").PullRequest(context.Background(), repo, 1)
	g.Expect(err).To(MatchError(ContainSubstring("401 Unauthorized")))
	g.Expect(err.Error()).NotTo(ContainSubstring(token))
	retry, _ := forge.Retryable(err)
	g.Expect(retry).To(BeFalse())
}
