package gitlab_test

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/internal/contract"
)

// TestProposeChange: one commit on a new branch started at the base SHA (the
// commits API's start_sha), with an update and a delete, then the merge request,
// as GitLab's API documents them.
func TestProposeChange(t *testing.T) {
	g := NewWithT(t)
	srv := contract.New(t,
		contract.Exchange{Method: http.MethodPost, Path: project + "/repository/commits", Header: headers,
			Body: `{"branch":"cairn/revert-apps-web","start_sha":"` + sha + `","commit_message":"Revert apps/web","actions":[
				{"action":"update","file_path":"instances/web.yaml","content":"a2luZDogTW9kdWxlSW5zdGFuY2UK","encoding":"base64"},
				{"action":"delete","file_path":"instances/old.yaml"}]}`,
			Status: http.StatusCreated, Response: `{"id":"ed899a2f4b50b4370feeea94676502b42383c746"}`},
		contract.Exchange{Method: http.MethodPost, Path: project + "/merge_requests", Header: headers,
			Body: `{"source_branch":"cairn/revert-apps-web","target_branch":"main","title":"Revert apps/web",
				"description":"held at hmac-sha256:ab","remove_source_branch":true}`,
			Status: http.StatusCreated, Response: `{"iid":12,"web_url":"https://gitlab.example.com/group/sub/project/-/merge_requests/12"}`},
	)
	got, err := newClient(t, srv, "").ProposeChange(context.Background(), repo, forge.Change{
		Base: "main", BaseSHA: sha, Branch: "cairn/revert-apps-web", Message: "Revert apps/web", Title: "Revert apps/web",
		Body: "held at hmac-sha256:ab", Files: []forge.FileChange{
			{Path: "instances/web.yaml", Content: []byte("kind: ModuleInstance\n"), Existed: true},
			{Path: "instances/old.yaml", Delete: true, Existed: true},
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(forge.Proposal{Number: 12, URL: "https://gitlab.example.com/group/sub/project/-/merge_requests/12"}))
}
