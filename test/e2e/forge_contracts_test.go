package e2e

import (
	"regexp"
	"testing"

	. "github.com/onsi/gomega"
)

// TestAPullRequestPlanDrawsTheOrderInMermaid: a pull request that adds an
// instance using a kind another instance provides gets a plan comment on the
// real Gitea with a Mermaid diagram of the order: the new requirer after its
// provider, the edge labelled with the kind, the requirer marked affected; and
// Gitea renders the block as a Mermaid diagram.
func TestAPullRequestPlanDrawsTheOrderInMermaid(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	group := e.ns + ".example.com"
	files := contractRepo(e.ns, group, true, "")
	user := files["instances/user.yaml"]
	delete(files, "instances/user.yaml")
	f, first := newForgeEnv(t, e, files)
	f.startCairn(bin)
	f.waitState(first, "cairn/sync", "success")

	head := f.putFile("a-widget", "main", "instances/user.yaml", user)
	number, err := f.gitea.CreatePullRequest(f.ctx, f.repo, "a-widget", "main", "a widget")
	f.g.Expect(err).NotTo(HaveOccurred())
	c := f.waitPlanComment(number, head)
	f.t.Logf("plan comment on #%d:\n%s", number, c.Body)
	f.g.Expect(c.Body).To(ContainSubstring("### Order\n\n```mermaid\nflowchart LR\n"))
	mermaid := regexp.MustCompile("(?s)```mermaid\n(.*?)```").FindStringSubmatch(c.Body)
	f.g.Expect(mermaid).To(HaveLen(2))
	ids := map[string]string{}
	for _, m := range regexp.MustCompile(`(n\d+)\["([^"]+)"\]`).FindAllStringSubmatch(mermaid[1], -1) {
		ids[m[2]] = m[1]
	}
	f.g.Expect(ids).To(HaveKey(e.ns+"/user"), mermaid[1])
	f.g.Expect(ids).To(HaveKey(e.ns+"/widgets"), mermaid[1])
	f.g.Expect(mermaid[1]).To(ContainSubstring(ids[e.ns+"/widgets"]+` -.->|"Widget.`+group+`"| `+ids[e.ns+"/user"]),
		"the provider comes before the requirer, the edge labelled with the kind")
	f.g.Expect(mermaid[1]).To(ContainSubstring("class " + ids[e.ns+"/user"] + " affected"))
	f.g.Expect(f.configMap(e.ns, "user")).To(BeNil())
	f.g.Expect(e.get(group+"/v1", "Widget", e.ns, "user")).To(BeNil(), "a plan changes nothing in the cluster")

	html, err := f.gitea.RenderMarkdown(f.ctx, f.repo, c.Body)
	f.g.Expect(err).NotTo(HaveOccurred())
	f.g.Expect(html).To(MatchRegexp(`<code class="[^"]*language-mermaid`), "Gitea renders the block as Mermaid:\n%s", html)
}
