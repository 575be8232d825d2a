package github_test

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/internal/contract"
)

// change reverts one file and deletes another, on a new branch from sha.
var change = forge.Change{
	Base: "main", BaseSHA: sha, Branch: "cairn/revert-apps-web", Message: "Revert apps/web", Title: "Revert apps/web",
	Body: "held at hmac-sha256:ab", Files: []forge.FileChange{
		{Path: "instances/web.yaml", Content: []byte("kind: ModuleInstance\n"), Existed: true, Before: []byte("x\n")},
		{Path: "instances/old.yaml", Delete: true, Existed: true, Before: []byte("y\n")},
	},
}

// TestProposeChange: a blob of each file's bytes, a tree on the base commit's tree
// (a deleted path has a null sha), a commit whose parent is the base SHA, the branch, then the pull request,
// as GitHub's Git data and pulls APIs document them.
func TestProposeChange(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t,
		contract.Exchange{Method: http.MethodGet, Path: "/repos/octocat/Hello-World/git/commits/" + sha, Header: headers,
			Response: `{"sha":"` + sha + `","tree":{"sha":"9fb037999f264ba9a7fc6274d15fa3ae2ab98312"}}`},
		contract.Exchange{Method: http.MethodPost, Path: "/repos/octocat/Hello-World/git/blobs", Header: headers,
			Body:   `{"content":"a2luZDogTW9kdWxlSW5zdGFuY2UK","encoding":"base64"}`,
			Status: http.StatusCreated, Response: `{"sha":"3a0f86fb8db8eea7ccbb9a95f325ddbedfb25e15"}`},
		contract.Exchange{Method: http.MethodPost, Path: "/repos/octocat/Hello-World/git/trees", Header: headers,
			Body: `{"base_tree":"9fb037999f264ba9a7fc6274d15fa3ae2ab98312","tree":[
				{"path":"instances/web.yaml","mode":"100644","type":"blob","sha":"3a0f86fb8db8eea7ccbb9a95f325ddbedfb25e15"},
				{"path":"instances/old.yaml","mode":"100644","type":"blob","sha":null}]}`,
			Status: http.StatusCreated, Response: `{"sha":"cd8274d15fa3ae2ab983129fb037999f264ba9a7"}`},
		contract.Exchange{Method: http.MethodPost, Path: "/repos/octocat/Hello-World/git/commits", Header: headers,
			Body:   `{"message":"Revert apps/web","tree":"cd8274d15fa3ae2ab983129fb037999f264ba9a7","parents":["` + sha + `"]}`,
			Status: http.StatusCreated, Response: `{"sha":"7638417db6d59f3c431d3e1f261cc637155684cd"}`},
		contract.Exchange{Method: http.MethodPost, Path: "/repos/octocat/Hello-World/git/refs", Header: headers,
			Body:   `{"ref":"refs/heads/cairn/revert-apps-web","sha":"7638417db6d59f3c431d3e1f261cc637155684cd"}`,
			Status: http.StatusCreated, Response: `{"ref":"refs/heads/cairn/revert-apps-web"}`},
		contract.Exchange{Method: http.MethodPost, Path: "/repos/octocat/Hello-World/pulls", Header: headers,
			Body:   `{"title":"Revert apps/web","body":"held at hmac-sha256:ab","head":"cairn/revert-apps-web","base":"main"}`,
			Status: http.StatusCreated, Response: `{"number":1347,"html_url":"https://github.com/octocat/Hello-World/pull/1347"}`},
	)
	got, err := newClient(t, srv, "").ProposeChange(context.Background(), repo, change)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(forge.Proposal{Number: 1347, URL: "https://github.com/octocat/Hello-World/pull/1347"}))
}

// TestProposeChangeRefusesABadBranch: nothing is sent for a branch name Git refuses.
func TestProposeChangeRefusesABadBranch(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t)
	bad := change
	bad.Branch = "../main"
	_, err := newClient(t, srv, "").ProposeChange(context.Background(), repo, bad)
	g.Expect(err).To(MatchError(forge.ErrInvalid))
}
