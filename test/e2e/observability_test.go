package e2e

import (
	"bufio"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/report"
)

// eventsAbout lists the events.k8s.io events in ns regarding the object with uid.
func (e *env) eventsAbout(ns string, uid types.UID) []eventsv1.Event {
	e.t.Helper()
	var list eventsv1.EventList
	e.g.Expect(e.c.List(e.ctx, &list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Regarding.UID == uid {
			out = append(out, ev)
		}
	}
	return out
}

// eventWith returns the event of evs with reason (nil when none).
func eventWith(evs []eventsv1.Event, reason string) *eventsv1.Event {
	for i := range evs {
		if evs[i].Reason == reason {
			return &evs[i]
		}
	}
	return nil
}

// jsonLogLines parses the lines of out that are JSON objects (the log on stderr).
func jsonLogLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "{") {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("a log line is not JSON: %v\n%s", err, sc.Text())
		}
		lines = append(lines, m)
	}
	return lines
}

// TestEventsAndJSONLogsOfASync: `cairn sync --once --log-format json` records an
// events.k8s.io event on each transition of an instance's Ready condition (reason and
// message as in its status, Secret values masked, the revision in an annotation), on
// the Platform's, and on the removal of an instance; all are written before the
// process exits. Each JSON log line about an instance carries its instance and
// revision keys, and no Secret value.
func TestEventsAndJSONLogsOfASync(t *testing.T) {
	e := newEnv(t)
	repo := e.dbRepo("password: hunterhunter\n")
	cli := cairnSync{bin: buildCairn(t), repoURL: repo.url(), kubeconfig: e.cluster.Kubeconfig, cacheDir: t.TempDir()}
	run := func() (string, error) { return cli.runWith(e.ctx, "--log-format", "json") }
	out, err := run()
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	head, err := repo.r.Head()
	e.g.Expect(err).NotTo(HaveOccurred())
	sha1 := head.Hash().String()

	mi := e.instance(e.ns, "db")
	ev := eventWith(e.eventsAbout(e.ns, mi.UID), cairnv1.ReasonSucceeded)
	e.g.Expect(ev).NotTo(BeNil(), "written before the process exited: %v", e.eventsAbout(e.ns, mi.UID))
	e.g.Expect(ev.Type).To(Equal("Normal"))
	e.g.Expect(ev.Note).To(Equal(conditions.GetMessage(mi, "Ready")))
	e.g.Expect(ev.Annotations).To(HaveKeyWithValue(report.RevisionAnnotation, sha1))
	e.g.Expect(ev.Action).To(Equal("Sync"))
	e.g.Expect(ev.ReportingController).To(Equal(report.EventReportingController))
	p := e.platformCR()
	e.g.Expect(eventWith(e.eventsAbout("default", p.UID), cairnv1.ReasonSucceeded)).NotTo(BeNil(), "the Platform's, in default")

	cm := e.configMap(e.ns, "db-cfg")
	cm.Data["user"] = "someone-else"
	e.g.Expect(e.c.Update(e.ctx, cm)).To(Succeed())
	out, err = cli.runWith(e.ctx, "--log-format", "json", "--drift-interval", "1s")
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	e.g.Expect(e.configMap(e.ns, "db-cfg").Data).To(HaveKeyWithValue("user", "admin"))
	ev = eventWith(e.eventsAbout(e.ns, mi.UID), "DriftCorrected")
	e.g.Expect(ev).NotTo(BeNil(), "a drift correction is an event")
	e.g.Expect(ev.Note).To(ContainSubstring("ConfigMap/" + e.ns + "/db-cfg"))
	e.g.Expect(ev.Action).To(Equal("DriftCheck"))

	e.putValuesSecret("password: Hunter-Hunter-42\n")
	sha2 := repo.commit("retry", map[string]string{"instances/db.yaml": dbInstance(e.ns, "  wait: true\n")})
	out, err = run()
	e.g.Expect(err).To(HaveOccurred(), "the instance fails")
	mi = e.instance(e.ns, "db")
	reason := conditions.GetReason(mi, "Ready")
	ev = eventWith(e.eventsAbout(e.ns, mi.UID), reason)
	e.g.Expect(ev).NotTo(BeNil(), "%v", e.eventsAbout(e.ns, mi.UID))
	e.g.Expect(ev.Type).To(Equal("Warning"))
	e.g.Expect(ev.Note).To(ContainSubstring("***"))
	e.g.Expect(ev.Note).NotTo(ContainSubstring("Hunter-Hunter-42"))
	e.g.Expect(ev.Annotations).To(HaveKeyWithValue(report.RevisionAnnotation, sha2))
	e.g.Expect(eventWith(e.eventsAbout("default", p.UID), "InstancesFailed")).To(HaveField("Type", "Warning"))

	e.g.Expect(out).NotTo(ContainSubstring("Hunter-Hunter-42"), "no Secret value in any log line")
	var failed map[string]any
	lines := expectInstanceKeys(t, out)
	e.g.Expect(lines).To(ContainElement(And(HaveKeyWithValue("msg", "progress"), HaveKeyWithValue("instance", e.ns+"/db"),
		HaveKeyWithValue("step", HavePrefix("render "+e.ns+"/db")))), "progress lines carry the keys too")
	for _, l := range lines {
		if l["msg"] == "instance failed" {
			failed = l
		}
	}
	e.g.Expect(failed).NotTo(BeNil(), out)
	e.g.Expect(failed).To(HaveKeyWithValue("instance", e.ns+"/db"))
	e.g.Expect(failed).To(HaveKeyWithValue("revision", sha2))
	e.g.Expect(failed).To(HaveKeyWithValue("reason", reason))
	e.g.Expect(failed).To(HaveKeyWithValue("level", "ERROR"))

	repo.commit("remove db", map[string]string{"instances/db.yaml": ""})
	_, _ = run() // refused: the commit removes the only instance
	e.g.Expect(eventWith(e.eventsAbout(e.ns, mi.UID), cairnv1.ReasonPruneGuard)).To(HaveField("Type", "Warning"))
	repo.commit("remove db\n\ncairn-allow-prune: 10", nil)
	out, err = run()
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	e.g.Expect(e.instance(e.ns, "db")).To(BeNil())
	ev = eventWith(e.eventsAbout(e.ns, mi.UID), "Removed")
	e.g.Expect(ev).NotTo(BeNil())
	e.g.Expect(ev.Action).To(Equal("Remove"))
	e.g.Expect(ev.Note).To(ContainSubstring("removed from Git"))
}

// expectInstanceKeys parses the JSON log lines of out and checks that each one
// about an instance names it (namespace/name) and its revision.
func expectInstanceKeys(t *testing.T, out string) []map[string]any {
	t.Helper()
	lines := jsonLogLines(t, out)
	for _, l := range lines {
		if instance, ok := l["instance"]; ok {
			NewWithT(t).Expect(instance).To(MatchRegexp(`^[a-z0-9-]+/[a-z0-9-]+$`), "%v", l)
			NewWithT(t).Expect(l).To(HaveKeyWithValue("revision", MatchRegexp(`^[0-9a-f]{40}$`)), "%v", l)
		}
	}
	return lines
}

// metricValue is the value of one series in a Prometheus text scrape (series: the
// name with its labels, in the order they are scraped).
func metricValue(scrape, series string) (float64, bool) {
	for _, line := range strings.Split(scrape, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// expectObservedInstance checks what a controller that created the instance name
// (a local module, Ready) reports of it: cairn's metrics, with sane values, the event
// of its Ready transition, and its JSON log line.
func (e *env) expectObservedInstance(t *testing.T, scrape, log, name string) {
	t.Helper()
	lines := expectInstanceKeys(t, log)
	e.g.Expect(lines).To(ContainElement(And(HaveKeyWithValue("msg", "instance synced"), HaveKeyWithValue("instance", e.ns+"/"+name),
		HaveKeyWithValue("action", "Created"))), log)
	for series, bounds := range map[string][2]float64{
		`cairn_reconcile_duration_seconds_count{kind="ModuleInstance",result="Created"}`: {1, 1},
		`cairn_reconcile_duration_seconds_sum{kind="ModuleInstance",result="Created"}`:   {0.001, 60},
		`cairn_reconcile_duration_seconds_count{kind="Platform",result="succeeded"}`:     {1, 100},
		`cairn_render_duration_seconds_count{result="rendered",type="local"}`:            {1, 1},
		`cairn_render_duration_seconds_sum{result="rendered",type="local"}`:              {0.0001, 60},
		`cairn_push_to_ready_seconds_count`:                                              {1, 1},
		`cairn_push_to_ready_seconds_sum`:                                                {0, 120},
		`cairn_git_fetch_duration_seconds_count`:                                         {1, 100},
		`cairn_git_fetch_duration_seconds_sum`:                                           {0.0001, 60},
		`cairn_objects_total{action="created"}`:                                          {1, 10},
		`cairn_objects_total{action="configured"}`:                                       {0, 0},
		`cairn_prune_refusals_total{limit="maxDeletions"}`:                               {0, 0},
		`cairn_prune_refusals_total{limit="emptyRender"}`:                                {0, 0},
	} {
		v, ok := metricValue(scrape, series)
		e.g.Expect(ok).To(BeTrue(), "%s is scraped", series)
		e.g.Expect(v).To(BeNumerically(">=", bounds[0]), series)
		e.g.Expect(v).To(BeNumerically("<=", bounds[1]), series)
	}
	figure := func(series string) float64 { v, _ := metricValue(scrape, series); return v }
	t.Logf("push to Ready %.2fs, instance reconcile %.3fs, render %.3fs, Git fetch %.3fs (sum of %v)",
		figure(`cairn_push_to_ready_seconds_sum`), figure(`cairn_reconcile_duration_seconds_sum{kind="ModuleInstance",result="Created"}`),
		figure(`cairn_render_duration_seconds_sum{result="rendered",type="local"}`), figure(`cairn_git_fetch_duration_seconds_sum`),
		figure(`cairn_git_fetch_duration_seconds_count`))
	mi := e.instance(e.ns, name)
	var ev *eventsv1.Event
	e.g.Eventually(func() *eventsv1.Event {
		ev = eventWith(e.eventsAbout(e.ns, mi.UID), conditions.GetReason(mi, "Ready"))
		return ev
	}, 10*time.Second, 100*time.Millisecond).ShouldNot(BeNil(), "an event of the instance's Ready transition")
	e.g.Expect(ev.Type).To(Equal("Normal"))
	e.g.Expect(ev.Annotations).To(HaveKeyWithValue(report.RevisionAnnotation, mi.Status.LastAppliedRevision))
}
