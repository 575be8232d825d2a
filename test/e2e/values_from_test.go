package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
)

// dbModule renders a ConfigMap from a user (from spec.values) and a password (from a
// Secret through spec.valuesFrom) that must be lower-case letters.
const dbModule = `package db

instance: {name: string, namespace: string}
values: {
	user:     *"app" | string
	password: string & =~"^[a-z]+$"
	pool:     {size: *1 | int, idle: *0 | int}
}
objects: cm: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: "\(instance.name)-cfg"
	data: {user: values.user, password: values.password, pool: "\(values.pool.size)/\(values.pool.idle)"}
}
`

func dbInstance(ns, extra string) string {
	return fmt.Sprintf("apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: db\n  namespace: %s\n"+
		"spec:\n  module:\n    local:\n      path: ./modules/db\n  timeout: 1m\n"+
		"  valuesFrom:\n    - secretRef: {name: db-values, key: values.yaml}\n"+
		"  values:\n    user: admin\n    pool: {idle: 2}\n%s", ns, extra)
}

func (e *env) putValuesSecret(values string) {
	e.t.Helper()
	e.ensureNamespace(e.ns)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "db-values"}}
	_ = e.c.Delete(e.ctx, s)
	s.StringData = map[string]string{"values.yaml": values}
	e.g.Expect(e.c.Create(e.ctx, s)).To(Succeed())
}

// dbRepo is a repository with the db instance, its values Secret holding values.
func (e *env) dbRepo(values string) *gitRepo {
	e.putValuesSecret(values)
	files := appRepo("")
	files["modules/db/db.cue"] = dbModule
	files["instances/db.yaml"] = dbInstance(e.ns, "")
	return newGitRepo(e.t, files)
}

// TestValuesFromSecret: spec.valuesFrom reads values from a Secret in the instance's
// namespace, merged under spec.values; the values reach the render, never the CR, its
// status or a message (a render error that quotes one shows *** instead), and the
// Secret is read as the instance's identity.
func TestValuesFromSecret(t *testing.T) {
	e := newEnv(t)
	repo := e.dbRepo("password: hunterhunter\npool: {size: 5}\nuser: ignored\n")
	res := e.sync(repo)
	got := result(res, e.ns, "db")
	e.g.Expect(got.Ready).To(BeTrue(), got.Message)
	e.g.Expect(e.configMap(e.ns, "db-cfg").Data).To(Equal(map[string]string{"user": "admin", "password": "hunterhunter", "pool": "5/2"}))
	mi := e.instance(e.ns, "db")
	b, _ := json.Marshal(mi)
	e.g.Expect(string(b)).NotTo(ContainSubstring("hunterhunter"), "neither in the CR's spec nor in its status")

	e.putValuesSecret("password: Hunter-Hunter-42\n")
	repo.commit("retry", map[string]string{"instances/db.yaml": dbInstance(e.ns, "  wait: true\n")})
	res = e.sync(repo)
	got = result(res, e.ns, "db")
	e.g.Expect(got.Action).To(BeEquivalentTo("Failed"), got.Message)
	e.g.Expect(got.Message).To(ContainSubstring("***"))
	e.g.Expect(got.Message).NotTo(ContainSubstring("Hunter-Hunter-42"))
	b, _ = json.Marshal(e.instance(e.ns, "db"))
	e.g.Expect(string(b)).NotTo(ContainSubstring("Hunter-Hunter-42"))
	e.g.Expect(e.configMap(e.ns, "db-cfg").Data).To(HaveKeyWithValue("password", "hunterhunter"), "the last good state stays")

	viewer(e)
	repo.commit("as viewer", map[string]string{"instances/db.yaml": dbInstance(e.ns, "  serviceAccountName: viewer\n")})
	res = e.sync(repo)
	e.expectFailure(res, wantFailure{name: "db", reason: cairnv1.ReasonValuesFromFailed,
		contains: []string{"spec.valuesFrom[0]: Secret {ns}/db-values", "forbidden"}})
}

// namedModule names a ConfigMap after values.suffix, which comes from a Secret.
const namedModule = `package named

instance: {name: string, namespace: string}
values: suffix: string & =~"^[a-z0-9-]+$"
objects: {
	named: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "\(instance.name)-\(values.suffix)", data: v: "1"}
	plain: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "\(instance.name)-plain", data: v: "1"}
}
`

// TestSecretDerivedNameIsMaskedInTheInventory: an object named after a value of a
// valuesFrom Secret is applied, but its name shows nowhere in the CR (its inventory
// entry is masked), the sync's result or progress; when the Secret's value changes,
// the object of the old name leaves the render and is pruned all the same.
func TestSecretDerivedNameIsMaskedInTheInventory(t *testing.T) {
	e := newEnv(t)
	e.putValuesSecret("suffix: topsecretname\n")
	files := appRepo("")
	files["modules/named/named.cue"] = namedModule
	files["instances/db.yaml"] = strings.Replace(dbInstance(e.ns, ""), "./modules/db", "./modules/named", 1)
	repo := newGitRepo(t, files)
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "db").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.configMap(e.ns, "db-topsecretname")).NotTo(BeNil())
	e.expectNameHidden("topsecretname", res)
	mi := e.instance(e.ns, "db")
	e.g.Expect(mi.Status.Inventory.Entries).To(ContainElement(HaveField("ID", e.ns+"_db-***__ConfigMap")), "masked, still counted")
	e.g.Expect(mi.Status.Inventory.Count).To(BeEquivalentTo(2))

	e.putValuesSecret("suffix: othersecretname\n")
	repo.commit("read the Secret again", map[string]string{"instances/db.yaml": strings.Replace(dbInstance(e.ns, "  wait: false\n"), "./modules/db", "./modules/named", 1)})
	res = e.sync(repo)
	r := result(res, e.ns, "db")
	e.g.Expect(r.Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(r.Pruned).To(Equal(1))
	e.g.Expect(e.gone("v1", "ConfigMap", e.ns, "db-topsecretname")).To(BeTrue(), "the old name is pruned from the real inventory")
	e.g.Expect(e.configMap(e.ns, "db-othersecretname")).NotTo(BeNil())
	e.g.Expect(e.configMap(e.ns, "db-plain")).NotTo(BeNil())
	e.expectNameHidden("othersecretname", res)
	e.expectNameHidden("topsecretname", res)
}

// expectNameHidden checks that s is in none of the ModuleInstances, the sync's result,
// its progress or the events of the test's namespace.
func (e *env) expectNameHidden(s string, res *reconciler.SyncResult) {
	e.t.Helper()
	var mis cairnv1.ModuleInstanceList
	e.g.Expect(e.c.List(e.ctx, &mis)).To(Succeed())
	var events corev1.EventList
	e.g.Expect(e.c.List(e.ctx, &events, client.InNamespace(e.ns))).To(Succeed())
	for what, v := range map[string]any{"the CRs": mis, "the result": res, "the events": events} {
		b, _ := json.Marshal(v)
		e.g.Expect(string(b)).NotTo(ContainSubstring(s), "in %s", what)
	}
	e.g.Expect(e.progress.String()).NotTo(ContainSubstring(s), "in the progress")
}
