package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// TestHistoryTable: one line per render, newest first as the status lists them,
// digests cut to 12 hex digits, "-" where a render was not published.
func TestHistoryTable(t *testing.T) {
	g := NewWithT(t)
	at := metav1.NewTime(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
	history := []cairnv1.HistoryEntry{
		{Revision: "0123456789abcdef0123", Time: at, Result: cairnv1.HistoryFailed, Reason: cairnv1.ReasonHealthCheckFailed,
			RenderDigest: "hmac-sha256:aaaaaaaaaaaaaaaaaaaa", Objects: 3,
			Published: &cairnv1.PublishedArtifact{Ref: "r/x:sha256-aaaa", Digest: "sha256:bbbbbbbbbbbbbbbbbbbb", KeyID: "0f1e2d3c4b5a"}},
		{Revision: "dir:fedcba9876543210", Time: at, Result: cairnv1.HistoryReady, Reason: cairnv1.ReasonSucceeded,
			RenderDigest: "hmac-sha256:cccccccccccccccccccc", Objects: 2},
	}
	var out bytes.Buffer
	g.Expect(printHistoryTable(&out, history)).To(Succeed())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	g.Expect(lines).To(HaveLen(3))
	g.Expect(strings.Fields(lines[0])).To(Equal([]string{"REVISION", "APPLIED", "RESULT", "REASON", "OBJECTS", "RENDER", "ARTIFACT", "KEY"}))
	g.Expect(strings.Fields(lines[1])).To(Equal([]string{"0123456789ab", "2026-12-05T10:00:00Z", "Failed", "HealthCheckFailed", "3",
		"hmac-sha256:aaaaaaaaaaaa", "sha256:bbbbbbbbbbbb", "0f1e2d3c4b5a"}))
	g.Expect(strings.Fields(lines[2])).To(Equal([]string{"dir:fedcba98", "2026-12-05T10:00:00Z", "Ready", "Succeeded", "2",
		"hmac-sha256:cccccccccccc", "-", "-"}))
}

// TestHistoryCommand: `cairn history NS/NAME` lists the renders a sync applied,
// newest first, and a sync that changes nothing adds none; a missing instance
// or a malformed name is a clear error.
func TestHistoryCommand(t *testing.T) {
	g := NewWithT(t)
	cc := newCLICluster(t)
	files := cliRepo(map[string]string{"web": cliInstance(cc.ns, "web", "app", "{replicas: 1}")})
	dir := writeRepoDir(t, files)
	r := cc.run(t, "sync", "--once", "-q", "--repo", dir)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stdout+r.stderr)
	files["instances/web.yaml"] = cliInstance(cc.ns, "web", "app", "{replicas: 2}")
	dir = writeRepoDir(t, files)
	for range 2 { // the second sync renders nothing new
		r = cc.run(t, "sync", "--once", "-q", "--repo", dir)
		g.Expect(r.err).NotTo(HaveOccurred(), r.stdout+r.stderr)
	}

	r = execCairn(t, "history", cc.ns+"/web", "-o", "json", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	var history []cairnv1.HistoryEntry
	g.Expect(json.Unmarshal([]byte(r.stdout), &history)).To(Succeed(), r.stdout)
	g.Expect(history).To(HaveLen(2), "one entry per render applied")
	g.Expect(history[0].Revision).NotTo(Equal(history[1].Revision), "two revisions (dir digests)")
	for _, h := range history {
		g.Expect(h.Result).To(Equal(cairnv1.HistoryReady))
		g.Expect(h.RenderDigest).To(HavePrefix("hmac-sha256:"))
		g.Expect(h.Objects).To(Equal(int32(2)))
		g.Expect(h.Published).To(BeNil(), "the Platform publishes nothing")
	}
	g.Expect(history[0].Time.Time).NotTo(BeTemporally("<", history[1].Time.Time), "newest first")

	r = execCairn(t, "history", cc.ns+"/web", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(strings.Split(strings.TrimSpace(r.stdout), "\n")).To(HaveLen(3))
	g.Expect(r.stdout).To(ContainSubstring(history[0].Revision[:12]))

	r = execCairn(t, "history", cc.ns+"/nope", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.err).To(MatchError("ModuleInstance " + cc.ns + "/nope not found"))
	r = execCairn(t, "history", "web", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.err).To(MatchError(`give the instance as NAMESPACE/NAME, not "web"`))
}
