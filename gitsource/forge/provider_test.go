package forge_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/gitea"
	"cairn.dev/cairn/gitsource/forge/github"
	"cairn.dev/cairn/gitsource/forge/gitlab"
)

// fakeForge is a fourth forge written as a new forge's package would write
// it: one Provider type, using only the exported helpers of package forge.
// Its deliveries carry a shared token in X-Fake-Token and a JSON body
// {"repo": "owner/name", "ref": "refs/heads/...", "head": SHA}.
type fakeForge struct{}

func (fakeForge) Name() string      { return "fakeforge" }
func (fakeForge) CommentLimit() int { return 1000 }

func (fakeForge) NewForge(opts forge.ClientOptions) (forge.Forge, error) {
	return &fakeClient{token: opts.Token}, nil
}

func (fakeForge) Signed(h http.Header) bool { return h.Get("X-Fake-Token") != "" }

func (fakeForge) Verify(secret string, h http.Header, _ []byte) error {
	return forge.VerifyToken(secret, h.Get("X-Fake-Token"))
}

func (fakeForge) EventType(h http.Header) string  { return h.Get("X-Fake-Event") }
func (fakeForge) DeliveryID(h http.Header) string { return h.Get("X-Fake-Delivery") }

func (fakeForge) Parse(event string, body []byte) (forge.Event, error) {
	if event != "branch-moved" {
		return nil, forge.Ignore("event", event)
	}
	var p struct{ Repo, Ref, Head string }
	if err := forge.DecodePayload(body, &p); err != nil {
		return nil, err
	}
	return forge.NewPush("fakeforge", p.Ref, p.Repo, p.Head)
}

// fakeClient is the fourth forge's API client.
type fakeClient struct {
	token    string
	statuses []forge.Status
}

func (c *fakeClient) SetStatus(_ context.Context, _ forge.RepoRef, _ string, st forge.Status) error {
	c.statuses = append(c.statuses, st)
	return nil
}

func (c *fakeClient) UpsertPlanComment(context.Context, forge.RepoRef, int, string) error { return nil }

func (c *fakeClient) PullRequest(_ context.Context, _ forge.RepoRef, pr int) (forge.PR, error) {
	return forge.PR{Number: pr}, nil
}

const fakeHead = "0123456789abcdef0123456789abcdef01234567"

func fakeDelivery(token, event, id string) *http.Request {
	body := `{"repo":"cairn/platform","ref":"refs/heads/main","head":"` + fakeHead + `"}`
	req := httptest.NewRequest(http.MethodPost, "/hooks/fakeforge", bytes.NewReader([]byte(body)))
	req.Header.Set("X-Fake-Token", token)
	req.Header.Set("X-Fake-Event", event)
	req.Header.Set("X-Fake-Delivery", id)
	return req
}

// TestFourthForgeIsOneProvider: a forge the shared code has never heard of
// is registered next to the three cairn ships; the registry builds its
// client by name and the real Receiver serves its webhooks at
// /hooks/fakeforge, verifying them with its Verify and parsing them with its
// Parse into a Push. No shared file names it.
func TestFourthForgeIsOneProvider(t *testing.T) {
	g := NewWithT(t)
	reg, err := forge.NewRegistry(gitea.Provider{}, github.Provider{}, gitlab.Provider{}, fakeForge{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reg.Names()).To(Equal([]string{"fakeforge", "gitea", "github", "gitlab"}))

	p, err := reg.Lookup("fakeforge")
	g.Expect(err).NotTo(HaveOccurred())
	client, err := p.NewForge(forge.ClientOptions{Token: "api-token"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(client.SetStatus(context.Background(), forge.RepoRef{Owner: "o", Name: "r"}, fakeHead,
		forge.Status{Context: "cairn/sync", State: forge.StateSuccess})).To(Succeed())
	g.Expect(client.(*fakeClient).statuses).To(HaveLen(1))

	opts := forge.DefaultReceiverOptions()
	opts.Hooks, opts.Branch = reg.Hooks(secret), "main"
	rec := &recorder{}
	r, err := forge.NewReceiver(opts, rec.emit)
	g.Expect(err).NotTo(HaveOccurred())

	code, body := serve(r, fakeDelivery("wrong-token", "branch-moved", "fake-1"))
	g.Expect(code).To(Equal(http.StatusUnauthorized), body)
	code, body = serve(r, fakeDelivery(secret, "tag-created", "fake-2"))
	g.Expect([]any{code, body}).To(Equal([]any{http.StatusAccepted, "ignored: event \"tag-created\"\n"}))
	g.Expect(rec.events).To(BeEmpty())

	code, body = serve(r, fakeDelivery(secret, "branch-moved", "fake-3"))
	g.Expect(code).To(Equal(http.StatusAccepted), body)
	g.Expect(rec.events).To(Equal([]forge.Event{forge.Push{Source: "fakeforge",
		Repo: forge.RepoRef{Owner: "cairn", Name: "platform"}, Branch: "main", SHAHint: fakeHead, Delivery: "fake-3"}}))

	code, _ = serve(r, delivery(gitea.Name, "push", fixture(t, "gitea_push.json"), secret))
	g.Expect(code).To(Equal(http.StatusAccepted), "the shipped forges are still served beside it")
	g.Expect(rec.events).To(HaveLen(2))
}
