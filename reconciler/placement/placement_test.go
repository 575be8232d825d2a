package placement

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/testobj"
	"cairn.dev/cairn/reconciler/outcome"
)

func TestPlacement(t *testing.T) {
	tenant := &cairnv1.Tenant{Name: "team-a", Namespaces: []string{"team-a", "team-a-*"}, ServiceAccount: "deployer",
		ClusterResources: []cairnv1.GroupKind{{Group: "", Kind: "Namespace"}}}
	base := Placement{own: "team-a", cairnNS: "cairn-system", policy: cairnv1.NamespacePolicy{Deny: []string{"kube-*"}}}
	granted := base
	granted.policy.Allow = []string{"*"}
	withSA := base
	withSA.identity = "deployer"
	listed := base
	listed.cluster = []cairnv1.GroupKind{{Group: "rbac.authorization.k8s.io", Kind: "*"}}
	tenanted := base
	tenanted.tenant, tenanted.identity = tenant, "deployer"
	cm := func(ns string) *unstructured.Unstructured { return testobj.Object("v1", "ConfigMap", ns, "x") }
	crb := testobj.Object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "admin")
	ns := func(name string) *unstructured.Unstructured { return testobj.Object("v1", "Namespace", "", name) }
	cases := []struct {
		name       string
		pl         Placement
		obj        *unstructured.Unstructured
		namespaced bool
		reason     string
		err        string
	}{
		{name: "own namespace", pl: base, obj: cm("team-a"), namespaced: true},
		{name: "another namespace without a grant", pl: base, obj: cm("team-b"), namespaced: true,
			reason: cairnv1.ReasonNamespaceDenied, err: `namespace "team-b" is not the instance's own (team-a)`},
		{name: "another namespace granted", pl: granted, obj: cm("team-b"), namespaced: true},
		{name: "denied wins over the grant", pl: granted, obj: cm("kube-system"), namespaced: true,
			reason: cairnv1.ReasonNamespaceDenied, err: "namespaces.deny"},
		{name: "cairn's namespace under a permissive policy", pl: granted, obj: cm("cairn-system"), namespaced: true,
			reason: cairnv1.ReasonNamespaceDenied, err: "cairn's own namespace"},
		{name: "cairn's API group", pl: granted, obj: testobj.Object("cairn.dev/v1alpha1", "ModuleInstance", "team-a", "x"), namespaced: true,
			reason: cairnv1.ReasonObjectForbidden, err: "cairn's own API group"},
		{name: "a subgroup of cairn's", pl: granted, obj: testobj.Object("x.cairn.dev/v1", "Thing", "team-a", "x"), namespaced: true,
			reason: cairnv1.ReasonObjectForbidden, err: "cairn's own API group"},
		{name: "cluster-scoped as cairn", pl: base, obj: crb,
			reason: cairnv1.ReasonObjectForbidden, err: "cluster-scoped kind ClusterRoleBinding.rbac.authorization.k8s.io needs spec.serviceAccountName"},
		{name: "cluster-scoped as a ServiceAccount", pl: withSA, obj: crb},
		{name: "cluster-scoped kind listed by the Platform", pl: listed, obj: crb},
		{name: "tenant: listed kind", pl: tenanted, obj: ns("team-a-dev")},
		{name: "tenant: unlisted kind despite its ServiceAccount", pl: tenanted, obj: crb,
			reason: cairnv1.ReasonObjectForbidden, err: "not in tenant team-a's clusterResources"},
		{name: "tenant: another tenant's Namespace", pl: tenanted, obj: ns("team-b"),
			reason: cairnv1.ReasonNamespaceDenied, err: `namespace "team-b" is not one of tenant team-a's namespaces`},
		{name: "tenant: object in its second namespace", pl: tenanted, obj: cm("team-a-dev"), namespaced: true},
		{name: "tenant: cairn's namespace", pl: tenanted, obj: cm("cairn-system"), namespaced: true,
			reason: cairnv1.ReasonNamespaceDenied, err: "cairn's own namespace"},
		{name: "an inventory Secret's name", pl: granted, obj: testobj.Object("v1", "Secret", "team-a", "cairn-inventory-web"), namespaced: true,
			reason: cairnv1.ReasonObjectForbidden, err: "reserved for cairn's inventories"},
		{name: "a hook record Secret's name", pl: granted, obj: testobj.Object("v1", "Secret", "team-a", "cairn-hooks-team-a.web"), namespaced: true,
			reason: cairnv1.ReasonObjectForbidden, err: `names starting with "cairn-hooks-" are reserved`},
		{name: "Namespace object named cairn's", pl: withSA, obj: ns("cairn-system"),
			reason: cairnv1.ReasonNamespaceDenied, err: "cairn's own namespace"},
		{name: "Namespace as cairn, kind not listed", pl: granted, obj: ns("team-b"),
			reason: cairnv1.ReasonObjectForbidden, err: "cluster-scoped kind Namespace needs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.pl.Check(tc.obj, tc.namespaced)
			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
			g.Expect(outcome.Classify("", err).Reason).To(Equal(tc.reason))
		})
	}
}
