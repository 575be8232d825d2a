package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/graph"
)

// widgetCRD is, in a module's objects, the CustomResourceDefinition of Widget in
// the group of values.group, whose schema keeps any field.
const widgetCRD = `	crd: {
		apiVersion: "apiextensions.k8s.io/v1"
		kind:       "CustomResourceDefinition"
		metadata: name: "widgets.\(values.group)"
		spec: {
			group: values.group
			names: {kind: "Widget", plural: "widgets", singular: "widget", listKind: "WidgetList"}
			scope: "Namespaced"
			versions: [{name: "v1", served: true, storage: true,
				schema: openAPIV3Schema: {type: "object", "x-kubernetes-preserve-unknown-fields": true}}]
		}
	}
`

// providerModule renders the CRD of Widget in the group of values.group, and a
// ConfigMap standing for its controller.
const providerModule = `package provider

instance: {name: string, namespace: string}
values: group: string
objects: {
` + widgetCRD + `	controller: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "\(instance.name)-controller"}
}
`

// providerWithoutCRD is providerModule once its CRD is dropped.
const providerWithoutCRD = `package provider

instance: {name: string, namespace: string}
values: group: string
objects: controller: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "\(instance.name)-controller"}
`

// requirerModule renders a Widget of values.group.
const requirerModule = `package requirer

instance: {name: string, namespace: string}
values: group: string
objects: widget: {apiVersion: "\(values.group)/v1", kind: "Widget", metadata: name: instance.name, spec: size: 3}
`

// contractRepo is a repository with a provider of Widget.<group> and, when
// requirer is set, an instance that renders a Widget (the extra lines go under
// its spec).
func contractRepo(ns, group string, requirer bool, extra string) map[string]string {
	files := appRepo("")
	files["modules/provider/provider.cue"] = providerModule
	files["modules/requirer/requirer.cue"] = requirerModule
	files["instances/widgets.yaml"] = contractInstance(ns, "widgets", "provider", group, "")
	if requirer {
		files["instances/user.yaml"] = contractInstance(ns, "user", "requirer", group, extra)
	}
	return files
}

// requirerFirstRepo is contractRepo with the requirer, which names no dependsOn,
// in a file before its provider's.
func requirerFirstRepo(ns, group string) map[string]string {
	files := contractRepo(ns, group, true, "")
	files["instances/a-user.yaml"] = files["instances/user.yaml"]
	delete(files, "instances/user.yaml")
	return files
}

func contractInstance(ns, name, module, group, extra string) string {
	return fmt.Sprintf("apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: %s\n  namespace: %s\n"+
		"spec:\n  module:\n    local:\n      path: ./modules/%s\n  timeout: 1m\n  values:\n    group: %s\n%s", name, ns, module, group, extra)
}

// TestContractsAreRecordedOnTheInstances: an instance that renders a CRD records
// the kind it provides, and an instance that renders objects of that kind records
// the provider it requires, with nothing authored but the renders.
func TestContractsAreRecordedOnTheInstances(t *testing.T) {
	e := newEnv(t)
	group := e.ns + ".example.com"
	kind := "Widget." + group
	repo := newGitRepo(t, contractRepo(e.ns, group, false, ""))
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "widgets").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.instance(e.ns, "widgets").Status.Provides).To(Equal([]string{kind}))
	e.g.Expect(e.instance(e.ns, "widgets").Status.Requires).To(BeEmpty())

	// The requirer arrives in a later commit: the provider is not rendered again,
	// and its recorded kinds are what the requirer is matched with.
	files := contractRepo(e.ns, group, true, "")
	repo.commit("a widget", map[string]string{"instances/user.yaml": files["instances/user.yaml"]})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "widgets").Action).To(BeEquivalentTo("Unchanged"), "%+v", res)
	e.g.Expect(result(res, e.ns, "user").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.instance(e.ns, "user").Status.Requires).To(Equal([]cairnv1.ContractRequirement{
		{Instance: e.ns + "/widgets", Kinds: []string{kind}}}))
	e.g.Expect(e.instance(e.ns, "user").Status.Provides).To(BeEmpty())
	e.g.Expect(e.get(group+"/v1", "Widget", e.ns, "user")).NotTo(BeNil())
}

// TestARequirerWaitsForItsProviderWithoutDependsOn: a provider (its CRD and a
// stand-in controller) and an instance that renders a resource of its kind, new in
// one commit, the requirer first in file order and naming no dependsOn, are both
// Ready after one sync: the requirer is applied once the provider is.
func TestARequirerWaitsForItsProviderWithoutDependsOn(t *testing.T) {
	e := newEnv(t)
	group := e.ns + ".example.com"
	repo := newGitRepo(t, requirerFirstRepo(e.ns, group))

	// The plan shows the contract, and draws the requirer after its provider,
	// waiting for it.
	plan := e.plan(repo)
	for _, ip := range plan.Instances {
		switch ip.Name {
		case "widgets":
			e.g.Expect(ip.Provides).To(Equal([]string{"Widget." + group}))
		case "user":
			e.g.Expect(ip.Requires).To(Equal([]cairnv1.ContractRequirement{{Instance: e.ns + "/widgets", Kinds: []string{"Widget." + group}}}))
		}
	}
	md := plan.Markdown()
	e.g.Expect(md).To(ContainSubstring("```mermaid\nflowchart LR\n"))
	e.g.Expect(md).To(MatchRegexp(`n\d+ -\.->\|"Widget\.%s"\| n\d+`, regexp.QuoteMeta(group)))
	e.g.Expect(md).To(ContainSubstring("waiting"))

	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "widgets").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(result(res, e.ns, "user").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.get(group+"/v1", "Widget", e.ns, "user")).NotTo(BeNil())
	e.g.Expect(e.instance(e.ns, "user").Status.Requires).To(HaveLen(1))
}

// TestAKindNobodyProvidesIsNotServed: an instance that renders a kind the cluster
// does not serve and no instance provides fails with KindNotServed, naming the
// kind, before anything of it is applied; the other instance syncs.
func TestAKindNobodyProvidesIsNotServed(t *testing.T) {
	e := newEnv(t)
	group := e.ns + ".example.com"
	files := contractRepo(e.ns, group, false, "")
	files["instances/user.yaml"] = contractInstance(e.ns, "user", "requirer", "nobody."+group, "")
	res := e.sync(newGitRepo(t, files))
	e.g.Expect(result(res, e.ns, "widgets").Ready).To(BeTrue(), "%+v", res)
	user := result(res, e.ns, "user")
	e.g.Expect(user.Ready).To(BeFalse())
	e.g.Expect(user.Reason).To(Equal(cairnv1.ReasonKindNotServed), "%+v", user)
	e.g.Expect(user.Message).To(ContainSubstring("Widget"))
	e.g.Expect(user.Message).To(ContainSubstring("nobody." + group))
	e.g.Expect(user.Applied).To(BeZero())
}

// TestAProviderIsNotRemovedWhileRequirersRemain: a commit that removes a provider
// while an instance still uses its kind is refused for the provider
// (DependentsRemain, naming the requirer), nothing of it is deleted and the
// requirer stays Ready; a commit that removes both removes the requirer first and
// then the provider.
func TestAProviderIsNotRemovedWhileRequirersRemain(t *testing.T) {
	e := newEnv(t)
	group := e.ns + ".example.com"
	repo := newGitRepo(t, contractRepo(e.ns, group, true, ""))
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "user").Ready).To(BeTrue(), "%+v", res)

	repo.commit("drop the provider\n\ncairn-allow-prune: 100", map[string]string{"instances/widgets.yaml": ""})
	res = e.sync(repo)
	widgets := result(res, e.ns, "widgets")
	e.g.Expect(widgets.Action).To(BeEquivalentTo("Failed"), "%+v", res)
	e.g.Expect(widgets.Reason).To(Equal(cairnv1.ReasonDependentsRemain))
	e.g.Expect(widgets.Message).To(ContainSubstring(e.ns + "/user"))
	e.g.Expect(widgets.Message).To(ContainSubstring("1 instance(s)"))
	e.g.Expect(e.instance(e.ns, "widgets")).NotTo(BeNil(), "the provider's CR stays")
	e.g.Expect(e.configMap(e.ns, "widgets-controller")).NotTo(BeNil(), "nothing of the provider is deleted")
	e.g.Expect(e.get(group+"/v1", "Widget", e.ns, "user")).NotTo(BeNil())
	e.g.Expect(isTrue(e.instance(e.ns, "user"), "Ready")).To(BeTrue())

	repo.commit("drop both\n\ncairn-allow-prune: 100", map[string]string{"instances/user.yaml": ""})
	res = e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	var order []string
	for _, r := range res.Instances {
		order = append(order, r.Name)
	}
	e.g.Expect(order).To(Equal([]string{"user", "widgets"}), "the requirer is removed first")
	e.g.Expect(e.instance(e.ns, "widgets")).To(BeNil())
	e.g.Expect(e.configMap(e.ns, "widgets-controller")).To(BeNil())
}

// crdOf is the CustomResourceDefinition of Widget in group, nil when absent.
func (e *env) crdOf(group string) *unstructured.Unstructured {
	return e.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets."+group)
}

// TestAWithdrawnCRDStillInUseIsKept: a provider whose render drops the CRD of a
// kind another instance still uses keeps that CRD (even with pruneProtected: true,
// which would let it be pruned), says so (Ready, reason ContractWithdrawn, naming
// the CRD, the kind and the user) and goes on providing the kind; once nothing
// uses it, the provider's next sync prunes it, as the CRD stayed in its inventory.
func TestAWithdrawnCRDStillInUseIsKept(t *testing.T) {
	e := newEnv(t)
	group := e.ns + ".example.com"
	kind := "Widget." + group
	files := contractRepo(e.ns, group, true, "")
	files["platform.yaml"] = platformYAML("  limits: {allowPruneProtected: true}\n")
	files["instances/widgets.yaml"] = contractInstance(e.ns, "widgets", "provider", group, "  pruneProtected: true\n")
	repo := newGitRepo(t, files)
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "user").Ready).To(BeTrue(), "%+v", res)

	repo.commit("the provider drops its CRD\n\ncairn-allow-prune: 100", map[string]string{"modules/provider/provider.cue": providerWithoutCRD})
	plan := e.plan(repo)
	var warned []string
	for _, ip := range plan.Instances {
		if ip.Name == "widgets" {
			warned = ip.Warnings
		}
	}
	e.g.Expect(warned).To(ContainElement(ContainSubstring(cairnv1.ReasonContractWithdrawn)), "%+v", plan)
	e.g.Expect(plan.Graph.Edges).To(ContainElement(graph.Edge{From: e.ns + "/user", To: e.ns + "/widgets", Kind: graph.Contract, Label: kind}),
		"the requirer, not rendered, is drawn with the provider its status records")

	res = e.sync(repo)
	widgets := result(res, e.ns, "widgets")
	e.g.Expect(widgets.Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(widgets.Reason).To(Equal(cairnv1.ReasonContractWithdrawn), "%+v", widgets)
	e.g.Expect(widgets.Pruned).To(BeZero())
	e.g.Expect(widgets.Warnings).To(ContainElement(And(ContainSubstring("widgets."+group), ContainSubstring(kind), ContainSubstring(e.ns+"/user"))))
	e.g.Expect(e.crdOf(group)).NotTo(BeNil(), "a CRD still in use is not pruned")
	live := e.instance(e.ns, "widgets")
	e.g.Expect(live.Status.Provides).To(Equal([]string{kind}))
	e.g.Expect(conditions.GetReason(live, "Ready")).To(Equal(cairnv1.ReasonContractWithdrawn))
	e.g.Expect(e.get(group+"/v1", "Widget", e.ns, "user")).NotTo(BeNil())

	// The user goes; the provider's next sync finds the CRD unused and, as it is
	// still in its inventory, prunes it.
	repo.commit("drop the user\n\ncairn-allow-prune: 100", map[string]string{"instances/user.yaml": ""})
	res = e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.g.Expect(e.crdOf(group)).NotTo(BeNil(), "an unaffected provider is not synced")
	repo.commit("touch the provider\n\ncairn-allow-prune: 100", map[string]string{"instances/widgets.yaml": contractInstance(e.ns, "widgets", "provider", group, "  pruneProtected: true\n  wait: false\n")})
	res = e.sync(repo)
	widgets = result(res, e.ns, "widgets")
	e.g.Expect(widgets.Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(widgets.Reason).To(Equal(cairnv1.ReasonSucceeded), "%+v", widgets)
	e.g.Expect(widgets.Pruned).To(Equal(1), "%+v", widgets)
	e.g.Eventually(func() bool {
		return e.gone("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets."+group)
	}, 30*time.Second).Should(BeTrue())
	e.g.Expect(e.instance(e.ns, "widgets").Status.Provides).To(BeEmpty())
}

// TestTwoProvidersOfOneKindAreRefused: an instance that renders the CRD of a kind
// another instance provides fails with ContractConflict naming both, and the
// first provider and its CRD are untouched; two new instances rendering one CRD
// both fail, and the CRD is not created.
func TestTwoProvidersOfOneKindAreRefused(t *testing.T) {
	e := newEnv(t)
	group := e.ns + ".example.com"
	repo := newGitRepo(t, contractRepo(e.ns, group, false, ""))
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "widgets").Ready).To(BeTrue(), "%+v", res)
	before := e.crdOf(group).GetResourceVersion()

	repo.commit("a second provider", map[string]string{"instances/more.yaml": contractInstance(e.ns, "more", "provider", group, "")})
	res = e.sync(repo)
	more := result(res, e.ns, "more")
	e.g.Expect(more.Ready).To(BeFalse(), "%+v", res)
	e.g.Expect(more.Reason).To(Equal(cairnv1.ReasonContractConflict), "%+v", more)
	e.g.Expect(more.Message).To(And(ContainSubstring("Widget."+group), ContainSubstring(e.ns+"/widgets"), ContainSubstring(e.ns+"/more")))
	e.g.Expect(more.Applied).To(BeZero())
	e.g.Expect(e.configMap(e.ns, "more-controller")).To(BeNil(), "nothing of the second provider is applied")
	e.g.Expect(isTrue(e.instance(e.ns, "widgets"), "Ready")).To(BeTrue())
	e.g.Expect(e.crdOf(group).GetResourceVersion()).To(Equal(before), "the first provider's CRD is untouched")

	other := "new." + group
	repo.commit("two new providers of one kind", map[string]string{
		"instances/more.yaml": "",
		"instances/one.yaml":  contractInstance(e.ns, "one", "provider", other, ""),
		"instances/two.yaml":  contractInstance(e.ns, "two", "provider", other, ""),
	})
	res = e.sync(repo)
	for _, name := range []string{"one", "two"} {
		r := result(res, e.ns, name)
		e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonContractConflict), "%+v", r)
		e.g.Expect(r.Message).To(And(ContainSubstring(e.ns+"/one"), ContainSubstring(e.ns+"/two")))
	}
	e.g.Expect(e.crdOf(other)).To(BeNil())
}

// TestARequirerWaitsForItsProviderUnderTheController: the same repository as
// TestARequirerWaitsForItsProviderWithoutDependsOn, under the controller (which
// reconciles each instance on its own): both become Ready, the requirer once its
// provider is.
func TestARequirerWaitsForItsProviderUnderTheController(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	group := e.ns + ".example.com"
	repo := newGitRepo(t, requirerFirstRepo(e.ns, group))
	ctrl := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-0"}, e.slowController(t, repo)...)
	ready := func(name string) func() bool {
		return func() bool { mi := e.instance(e.ns, name); return mi != nil && isTrue(mi, "Ready") }
	}
	e.g.Eventually(ready("user"), 2*time.Minute, 200*time.Millisecond).Should(BeTrue(), ctrl.String)
	e.g.Expect(ready("widgets")()).To(BeTrue())
	e.g.Expect(e.get(group+"/v1", "Widget", e.ns, "user")).NotTo(BeNil())
	e.g.Expect(e.instance(e.ns, "user").Status.Requires).To(Equal([]cairnv1.ContractRequirement{
		{Instance: e.ns + "/widgets", Kinds: []string{"Widget." + group}}}))
	for _, h := range e.instance(e.ns, "user").Status.History {
		e.g.Expect(h.Result).To(Equal(cairnv1.HistoryReady),
			"the requirer waited for its provider, and was never applied before it: %+v", h)
	}
}

// TestAnActivatedProviderDoesNotBlockItsRequirers: once a provider has served
// its kind, a later failure of the provider (its render breaks) does not hold
// back a change of its requirer: activation latches.
func TestAnActivatedProviderDoesNotBlockItsRequirers(t *testing.T) {
	e := newEnv(t)
	group := e.ns + ".example.com"
	repo := newGitRepo(t, contractRepo(e.ns, group, true, ""))
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "user").Ready).To(BeTrue(), "%+v", res)

	broken := contractInstance(e.ns, "widgets", "provider", "42", "")
	repo.commit("break the provider, change the widget", map[string]string{
		"instances/widgets.yaml":        broken,
		"modules/requirer/requirer.cue": strings.Replace(requirerModule, "size: 3", "size: 4", 1),
	})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "widgets").Reason).To(Equal(cairnv1.ReasonRenderFailed), "%+v", res)
	user := result(res, e.ns, "user")
	e.g.Expect(user.Ready).To(BeTrue(), "%+v", user)
	e.g.Expect(user.Action).To(BeEquivalentTo("Updated"))
	widget := e.get(group+"/v1", "Widget", e.ns, "user")
	e.g.Expect(widget.Object["spec"]).To(HaveKeyWithValue("size", BeNumerically("==", 4)))
	e.g.Expect(e.crdOf(group)).NotTo(BeNil(), "the failed provider's CRD is left as it was")
}

// TestACycleThroughDependsOnAndAContractFailsBoth: a provider that dependsOn its
// own requirer makes a cycle of a dependsOn edge and a contract edge: both fail
// with DependencyCycle naming the cycle, and nothing of either is applied.
func TestACycleThroughDependsOnAndAContractFailsBoth(t *testing.T) {
	e := newEnv(t)
	group := e.ns + ".example.com"
	files := contractRepo(e.ns, group, true, "")
	files["instances/widgets.yaml"] = contractInstance(e.ns, "widgets", "provider", group, "  dependsOn: [{name: user}]\n")
	res := e.sync(newGitRepo(t, files))
	cycle := e.ns + "/user -> " + e.ns + "/widgets -> " + e.ns + "/user"
	for _, name := range []string{"user", "widgets"} {
		r := result(res, e.ns, name)
		e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonDependencyCycle), "%+v", res)
		e.g.Expect(r.Message).To(ContainSubstring(cycle))
		e.g.Expect(r.Applied).To(BeZero())
	}
	e.g.Expect(e.crdOf(group)).To(BeNil())
	e.g.Expect(e.configMap(e.ns, "widgets-controller")).To(BeNil())
}

// TestATenantsCRDCannotRescopeAnotherInstancesKind: a tenant (who may render no
// cluster-scoped object) renders the CRD of a kind the platform team's provider
// provides, declared cluster-scoped. The tenant's instance fails on its CRD; the
// provider and its requirer, new in the same commit, are Ready, and the
// requirer's Widget is placed in its namespace as the provider's CRD says.
func TestATenantsCRDCannotRescopeAnotherInstancesKind(t *testing.T) {
	e := newEnv(t)
	group := e.ns + ".example.com"
	e.grantNamespace(e.ns+"-a", "*")
	files := contractRepo(e.ns, group, true, "")
	files["platform.yaml"] = platformYAML(tenantsPlatform(e.ns))
	files["modules/rescope/rescope.cue"] = strings.Replace(providerModule, `scope: "Namespaced"`, `scope: "Cluster"`, 1)
	e.g.Expect(files["modules/rescope/rescope.cue"]).To(ContainSubstring(`scope: "Cluster"`))
	files["tenants/a/rescope.yaml"] = contractInstance(e.ns+"-a", "rescope", "rescope", group, "  serviceAccountName: deployer\n")
	res := e.sync(newGitRepo(t, files))

	evil := result(res, e.ns+"-a", "rescope")
	e.g.Expect(evil.Ready).To(BeFalse(), "%+v", res)
	e.g.Expect(evil.Message).To(ContainSubstring("CustomResourceDefinition"))
	e.g.Expect(result(res, e.ns, "widgets").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(result(res, e.ns, "user").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.get(group+"/v1", "Widget", e.ns, "user")).NotTo(BeNil(), "the Widget is namespaced, in its instance's namespace")
	e.g.Expect(e.crdOf(group).Object["spec"]).To(HaveKeyWithValue("scope", "Namespaced"))
}

// TestACRDCannotRescopeAServedKind: an instance that may render CRDs but no
// ClusterRoleBinding renders a CRD declaring ClusterRoleBinding namespaced, and a
// ClusterRoleBinding: the cluster's scope of a kind it serves wins, so the
// binding is refused by the Platform's clusterResources and nothing is applied.
func TestACRDCannotRescopeAServedKind(t *testing.T) {
	e := newEnv(t)
	name := e.ns + "-escalate"
	module := `package rescope

instance: {name: string, namespace: string}
values: {}
objects: {
	crd: {
		apiVersion: "apiextensions.k8s.io/v1"
		kind:       "CustomResourceDefinition"
		metadata: {name: "clusterrolebindings.rbac.authorization.k8s.io", annotations: "api-approved.kubernetes.io": "unapproved, test"}
		spec: {
			group: "rbac.authorization.k8s.io"
			names: {kind: "ClusterRoleBinding", plural: "clusterrolebindings", singular: "clusterrolebinding", listKind: "ClusterRoleBindingList"}
			scope: "Namespaced"
			versions: [{name: "v1", served: true, storage: true, schema: openAPIV3Schema: {type: "object", "x-kubernetes-preserve-unknown-fields": true}}]
		}
	}
	binding: {
		apiVersion: "rbac.authorization.k8s.io/v1"
		kind:       "ClusterRoleBinding"
		metadata: name: "` + name + `"
		roleRef: {apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin"}
		subjects: [{kind: "ServiceAccount", name: "default", namespace: instance.namespace}]
	}
}
`
	files := appRepo("")
	files["modules/rescope/rescope.cue"] = module
	files["instances/rescope.yaml"] = fmt.Sprintf("apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: rescope\n  namespace: %s\n"+
		"spec:\n  module:\n    local:\n      path: ./modules/rescope\n  timeout: 1m\n", e.ns)
	res := e.sync(newGitRepo(t, files))
	r := result(res, e.ns, "rescope")
	e.g.Expect(r.Ready).To(BeFalse(), "%+v", res)
	e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonObjectForbidden), "%+v", r)
	e.g.Expect(r.Message).To(ContainSubstring("ClusterRoleBinding"))
	e.g.Expect(r.Applied).To(BeZero())
	e.g.Expect(e.get("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", name)).To(BeNil(), "no binding to cluster-admin")
}

// TestAWithdrawnCRDUsedByAnInvalidDeclarationIsKept: the provider drops its CRD
// in the commit that makes its requirer's declaration invalid: the requirer keeps
// its objects (its status says what it uses), so the CRD, and with it the
// requirer's Widget, stays.
func TestAWithdrawnCRDUsedByAnInvalidDeclarationIsKept(t *testing.T) {
	e := newEnv(t)
	group := e.ns + ".example.com"
	files := contractRepo(e.ns, group, true, "")
	files["platform.yaml"] = platformYAML("  limits: {allowPruneProtected: true}\n")
	files["instances/widgets.yaml"] = contractInstance(e.ns, "widgets", "provider", group, "  pruneProtected: true\n")
	repo := newGitRepo(t, files)
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "user").Ready).To(BeTrue(), "%+v", res)

	repo.commit("drop the CRD; break the user\n\ncairn-allow-prune: 100", map[string]string{
		"modules/provider/provider.cue": providerWithoutCRD,
		"instances/user.yaml":           contractInstance(e.ns, "user", "requirer", group, "  timeout: forever\n"),
	})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "user").Ready).To(BeFalse(), "%+v", res)
	widgets := result(res, e.ns, "widgets")
	e.g.Expect(widgets.Reason).To(Equal(cairnv1.ReasonContractWithdrawn), "%+v", res)
	e.g.Expect(widgets.Warnings).To(ContainElement(ContainSubstring(e.ns + "/user")))
	e.g.Expect(e.crdOf(group)).NotTo(BeNil())
	e.g.Expect(e.get(group+"/v1", "Widget", e.ns, "user")).NotTo(BeNil(), "the invalid instance keeps its objects")
}
