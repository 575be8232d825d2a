package bench

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cairn.dev/cairn/reconciler"
)

// B7: cairn's own requests per instance, by verb and resource, counted and
// traced by a RoundTripper on the in-process engine's clients (the B2
// profile's), against the minimum of issue 24: a cold instance of the 4-object
// app in a namespace the sync creates, a second one in a namespace that
// exists, one object changed, and a commit that changes no instance.

// requestStep is one sync of B7 and the minimum it is measured against.
type requestStep struct {
	name     string
	minimum  int
	minWhat  string // what the minimum is made of
	noCR     bool   // the minimum holds no apply of the CR
	nsExists bool   // the namespace exists before the sync: creating it is beyond the minimum
	target   func(instance requestCounts, minimum int) string
	prof     profiled
	trace    []tracedRequest
}

func TestB7Requests(t *testing.T) {
	g := NewWithT(t)
	p := newFleetProfile(t, 1, 0)
	p.pprof, p.pprofOne = "", "" // no CPU profile
	p.rc.tracing = true
	steps := []*requestStep{
		{name: "cold: one instance, its namespace created by the sync", minimum: 7,
			minWhat: "POST of the namespace, apply of the CR, 4 applies, 1 status write", target: withinCold},
		{name: "cold: a second instance, its namespace already there", minimum: 6, nsExists: true,
			minWhat: "apply of the CR, 4 applies, 1 status write", target: withinCold},
		{name: "one object changed (the image of instance 1)", minimum: 2, noCR: true,
			minWhat: "1 apply, 1 status write", target: withinChange},
		{name: "no-op commit (a README, no instance's input)", minimum: 0,
			minWhat: "nothing", target: noWrites},
	}

	steps[0].prof = p.cold()
	steps[0].trace = p.rc.trace()

	ns, _ := fleetName(2)
	g.Expect(p.c.admin.Create(p.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	writeFiles(t, p.dir, map[string]string{fleetFile(2): fleetInstance(2, "6.7.0")})
	steps[1].prof = p.sync("")
	steps[1].trace = p.rc.trace()
	expectActions(g, steps[1].prof, "Unchanged", "Created")

	steps[2].prof = p.changeOne()
	steps[2].trace = p.rc.trace()

	writeFiles(t, p.dir, map[string]string{"README.md": "The fleet of B7.\n"})
	steps[3].prof = p.sync("")
	steps[3].trace = p.rc.trace()
	expectActions(g, steps[3].prof, "Unchanged", "Unchanged")

	existing := beyondMinimum(steps[1].trace, steps[1].noCR, steps[1].nsExists)
	g.Expect(existing).NotTo(ContainSubstring("ownership read"), "the validation's dry-run tells which objects exist")
	g.Expect(existing).NotTo(ContainSubstring("left inventory"), "one LIST per sync tells which inventory Secrets exist")
	change, _ := splitTrace(steps[2].trace)
	g.Expect(change.byResource).NotTo(HaveKey("GET namespaces"), "the namespace of an instance whose CR exists is not read")
	g.Expect(change.byResource).NotTo(HaveKey("GET deployments"), "the health watch tells when the Deployment is Current")
	g.Expect(change.total()).To(BeNumerically("<=", 3), "one change: %s", change.resources())
	noop, _ := splitTrace(steps[3].trace)
	g.Expect(writeRequests(noop)).To(BeZero(), "a no-op commit must write nothing of any instance; it sent: %s", noop.resources())

	reportTables(t, "B7", requestsTable(t, steps), requestOrderTable(steps))
}

// expectActions checks each instance's action in a sync (instance 1 first)
// and that every instance is Ready.
func expectActions(g *WithT, prof profiled, actions ...string) {
	g.Expect(prof.res.Instances).To(HaveLen(len(actions)))
	for i, want := range actions {
		_, name := fleetName(i + 1)
		idx := slices.IndexFunc(prof.res.Instances, func(r reconciler.InstanceResult) bool { return r.Name == name })
		g.Expect(idx).NotTo(Equal(-1), "no result for %s", name)
		r := prof.res.Instances[idx]
		g.Expect(r.Action).To(BeEquivalentTo(want), "%s: %s", name, r.Message)
		g.Expect(r.Ready).To(BeTrue(), "%s: %s", name, r.Message)
	}
}

// splitTrace counts a step's requests in two groups: those of the instances
// (every request naming an instance's namespace, its inventory Secret or
// creating its namespace) and those sent once per sync whatever the number of
// instances (the Platform CR, the LISTs, the digest key, discovery).
func splitTrace(trace []tracedRequest) (instance, perSync requestCounts) {
	instance, perSync = newRequestCounts(), newRequestCounts()
	for _, r := range trace {
		if strings.Contains(r.path, "fleet-") || r.verb == "POST" && r.resource == "namespaces" {
			instance.add(r.verb, r.resource, 1)
		} else {
			perSync.add(r.verb, r.resource, 1)
		}
	}
	return instance, perSync
}

// writeRequests counts the requests that change something (dry-runs excluded).
func writeRequests(rc requestCounts) int {
	n := 0
	for _, v := range []string{"POST", "PUT", "PATCH-apply", "PATCH-other", "DELETE", "DELETECOLLECTION"} {
		n += rc.verb(v)
	}
	return n
}

// withinCold is the cold target: at most 1.5× the minimum.
func withinCold(instance requestCounts, minimum int) string {
	ok := float64(instance.total()) <= 1.5*float64(minimum)
	return fmt.Sprintf("≤ 1.5× the minimum (%.1f): %s", 1.5*float64(minimum), verdict(ok))
}

// withinChange is the target of one change: at most 3 requests.
func withinChange(instance requestCounts, _ int) string {
	return "≤ 3 requests: " + verdict(instance.total() <= 3)
}

// noWrites is the no-op target: no write (asserted).
func noWrites(instance requestCounts, _ int) string {
	return "0 writes (asserted): " + verdict(writeRequests(instance) == 0)
}

func requestsTable(t *testing.T, steps []*requestStep) *table {
	tb := newTable("B7 requests: cairn's own requests per instance of the 4-object app (in-process engine, RoundTripper), against the minimum",
		"step", "the instance's requests by verb", "by resource", "total (writes)", "minimum", "ratio", "target", "beyond the minimum, by purpose",
		"once per sync, by resource", "sync total (writes)")
	for _, s := range steps {
		instance, perSync := splitTrace(s.trace)
		ratio := "n/a"
		if s.minimum > 0 {
			ratio = fmt.Sprintf("%.2f×", float64(instance.total())/float64(s.minimum))
		}
		target := s.target(instance, s.minimum)
		all := s.prof.client
		tb.add(s.name, instance, orNone(instance.resources()),
			fmt.Sprintf("%d (%d)", instance.total(), writeRequests(instance)),
			fmt.Sprintf("%d: %s", s.minimum, s.minWhat), ratio, target, beyondMinimum(s.trace, s.noCR, s.nsExists),
			perSyncSummary(perSync),
			fmt.Sprintf("%d (%d), %s", all.total(), writeRequests(all), secs(s.prof.wall)))
	}
	tb.note("one fresh cluster (kube-controller-manager for the Deployment's availability); the engine in-process as in the B2 profile (reconciler.DefaultOptions), its client, its REST mapper and discovery, and the impersonating clients of Cluster.Manager (copies of its config) all wrapped by one counting RoundTripper; the cluster's other clients are not counted; every request is also traced in order (next table)")
	tb.note("steps, each a sync of the directory (no Git): the Platform and instance 1 (fleet-0001, which the sync creates); instance 2 added in fleet-0002, created by the test beforehand so that its objects' ownership is read; instance 1's image changed; a README added")
	tb.note("the instance's requests: those naming its namespace, its inventory Secret, or creating its namespace; once per sync: the rest (the Platform CR and its status, the LISTs of ModuleInstances and Registries, the digest key Secret, the LISTs of cairn's labelled objects of 20 kinds and of the Secrets of cairn's namespace (which tells the inventories deleted CRs left) sent once per sync when an instance has no CR yet, discovery, not in the totals)")
	tb.note("beyond the minimum: the instance's requests the minimum does not hold, told by their order in the trace (a GET of a rendered object before its apply is an ownership read, after it a health poll)")
	tb.note("minimum (issue 24): cold, one apply per object, the CR, one status write, plus the namespace where the sync creates it; one change, one apply and one status write (the CR, whose values changed, is applied too: counted beyond the minimum); no-op, nothing; the targets are on the instance's requests: cold ≤ 1.5× the minimum with the validation (dry-run) and the ownership check, one change ≤ 3 requests, no-op 0 writes")
	tb.note("engine: %s", engineRevision(t))
	return tb
}

// beyondMinimum names the instance requests of a trace that the minimum does
// not hold, by purpose, told from the order they were sent in: a GET of a
// rendered object before it is applied is an ownership read, after it a
// health poll; every status write after the first is one more; so is the
// apply of the CR when noCR, and the creation of a namespace that exists
// when nsExists.
func beyondMinimum(trace []tracedRequest, noCR, nsExists bool) string {
	var purposes []string
	count := map[string]int{}
	applied := map[string]bool{}
	statusWrites := 0
	add := func(p string) {
		if count[p] == 0 {
			purposes = append(purposes, p)
		}
		count[p]++
	}
	for _, r := range trace {
		if !strings.Contains(r.path, "fleet-") {
			continue
		}
		switch {
		case r.verb == "dry-run PATCH-apply":
			add("validation (dry-run apply)")
		case r.verb == "PATCH-apply" && r.resource == "moduleinstances":
			if noCR {
				add("apply of the CR")
			}
		case r.verb == "PATCH-apply":
			applied[r.path] = true
		case r.verb == "PATCH-other" && r.resource == "moduleinstances/status":
			if statusWrites++; statusWrites > 1 {
				add("status write beyond one")
			}
		case r.verb == "GET" && r.resource == "namespaces":
			add("GET of the namespace")
		case r.verb == "POST" && r.resource == "namespaces" && nsExists:
			add("POST of the namespace, which exists")
		case r.verb == "GET" && r.resource == "secrets":
			add("GET of a left inventory Secret")
		case r.verb == "GET" && applied[r.path]:
			add("health poll")
		case r.verb == "GET":
			add("ownership read")
		case r.verb == "POST" || r.verb == "PUT" || r.verb == "PATCH-other" || r.verb == "DELETE":
		default:
			add(r.verb + " " + r.resource)
		}
	}
	parts := make([]string, len(purposes))
	for i, p := range purposes {
		parts[i] = fmt.Sprintf("%s %d", p, count[p])
	}
	return orNone(strings.Join(parts, ", "))
}

func requestOrderTable(steps []*requestStep) *table {
	tb := newTable("B7 request order: every request of each step, in the order sent (consecutive requests of one verb grouped)", "step", "requests")
	for _, s := range steps {
		tb.add(s.name, compactTrace(s.trace))
	}
	tb.note("secrets: the digest key (cairn-system/cairn-digest-key) and the instance's inventory (cairn-system/cairn-inventory-<namespace>.<name>); `as <user>` marks an impersonated request (none here: no instance names a ServiceAccount)")
	return tb
}

// compactTrace lists a trace's requests, consecutive ones of a verb grouped:
// "GET platforms → LIST ×20 (serviceaccounts … customresourcedefinitions)".
func compactTrace(trace []tracedRequest) string {
	var groups []string
	for i := 0; i < len(trace); {
		j := i
		var labels []string
		for ; j < len(trace) && trace[j].verb == trace[i].verb && trace[j].user == trace[i].user; j++ {
			labels = append(labels, traceLabel(trace[j]))
		}
		s := trace[i].verb + " "
		if len(labels) > 4 {
			s += fmt.Sprintf("×%d (%s … %s)", len(labels), labels[0], labels[len(labels)-1])
		} else {
			s += strings.Join(labels, ", ")
		}
		if trace[i].user != "" {
			s += " as " + trace[i].user
		}
		groups = append(groups, s)
		i = j
	}
	if len(groups) == 0 {
		return "none"
	}
	return strings.Join(groups, " → ")
}

// perSyncSummary lists the requests sent once per sync by resource, the LISTs
// of cairn's labelled objects (adoptionLists) counted as one entry.
func perSyncSummary(rc requestCounts) string {
	rest, sweep := newRequestCounts(), 0
	for k, n := range rc.byResource {
		verb, resource, _ := strings.Cut(k, " ")
		if adoptionList(verb, resource) {
			sweep += n
			continue
		}
		rest.add(verb, resource, n)
	}
	s := rest.resources()
	if sweep > 0 {
		s += fmt.Sprintf(", LIST of cairn's labelled objects %d (one per kind)", sweep)
	}
	if d := rc.byVerb["discovery"]; d > 0 {
		s += fmt.Sprintf(", discovery %d", d)
	}
	return strings.TrimPrefix(s, ", ")
}

// adoptionList tells the LISTs of cairn's labelled objects, which a sync sends
// once per kind when an instance has no CR, from its LISTs of cairn's CRs and of
// the Secrets of its namespace (the left inventories).
func adoptionList(verb, resource string) bool {
	return verb == "LIST" && resource != "moduleinstances" && resource != "registries" && resource != "secrets"
}

// traceLabel names a request's target: its resource, and which Secret.
func traceLabel(r tracedRequest) string {
	if r.verb == "discovery" {
		return "/" + r.path
	}
	if r.resource != "secrets" || !strings.Contains(r.path, "secrets/") {
		return r.resource
	}
	name := r.path[strings.LastIndex(r.path, "/")+1:]
	switch {
	case strings.HasPrefix(name, "cairn-inventory-"):
		return "secrets (inventory)"
	case name == "cairn-digest-key":
		return "secrets (digest key)"
	}
	return "secrets"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
