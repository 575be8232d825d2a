package placement

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/hooks"
	"cairn.dev/cairn/reconciler/outcome"
)

// Placement decides where one instance's rendered objects may go. Whatever the
// policy, no render may hold an object of cairn's own API group or an object in
// cairn's namespace. Namespaced objects go to the instance's own namespace, or, when
// the Platform grants more, to the namespaces of its tenant (a tenant's instance) or
// of the Platform's explicit namespaces.allow (any other instance); the Platform's
// deny list always wins. Cluster-scoped objects are accepted from a tenant's
// instance when the tenant lists the kind, from any other instance when it applies
// as a ServiceAccount (whose RBAC then decides) or when the Platform lists the kind.
type Placement struct {
	own      string // the instance's namespace
	cairnNS  string // cairn's own namespace
	policy   cairnv1.NamespacePolicy
	tenant   *cairnv1.Tenant
	identity string // the ServiceAccount applied as; "" is cairn itself
	cluster  []cairnv1.GroupKind
}

// New returns the placement of mi's objects under Platform p; tenant is mi's
// tenant (nil: none), cairnNS cairn's own namespace.
func New(p *cairnv1.Platform, tenant *cairnv1.Tenant, mi *cairnv1.ModuleInstance, cairnNS string) Placement {
	return Placement{
		own: mi.Namespace, cairnNS: cairnNS, policy: p.Spec.Namespaces, tenant: tenant,
		identity: ServiceAccount(p, tenant, mi), cluster: p.Spec.ClusterResources,
	}
}

// ServiceAccount is what mi applies, prunes and deletes as: its tenant's
// ServiceAccount, else its own serviceAccountName, else the Platform's default ("" is
// cairn itself).
func ServiceAccount(p *cairnv1.Platform, tenant *cairnv1.Tenant, mi *cairnv1.ModuleInstance) string {
	switch {
	case tenant != nil:
		return tenant.ServiceAccount
	case mi.Spec.ServiceAccountName != "":
		return mi.Spec.ServiceAccountName
	}
	return p.Spec.DefaultServiceAccount
}

// Check says why u may not be rendered by the instance (nil: it may), an error
// of reason ObjectForbidden or NamespaceDenied; namespaced is the scope of u's kind.
func (p Placement) Check(u *unstructured.Unstructured, namespaced bool) error {
	gvk := u.GroupVersionKind()
	if gvk.Group == cairnv1.GroupVersion.Group || strings.HasSuffix(gvk.Group, "."+cairnv1.GroupVersion.Group) {
		return p.refuse(u, "objects of cairn's own API group %s are refused from any render", cairnv1.GroupVersion.Group)
	}
	for _, prefix := range []string{apply.InventorySecretPrefix, hooks.SecretPrefix} {
		if gvk.Group == "" && gvk.Kind == "Secret" && strings.HasPrefix(u.GetName(), prefix) {
			return p.refuse(u, "Secret names starting with %q are reserved for cairn's inventories and hook records", prefix)
		}
	}
	if namespaced {
		return p.checkNamespace(u, u.GetNamespace())
	}
	if gvk.Group == "" && gvk.Kind == "Namespace" {
		if err := p.checkNamespace(u, u.GetName()); err != nil {
			return err
		}
	}
	return p.checkClusterKind(u, gvk.Group, gvk.Kind)
}

// CheckObjects checks objects whose scope is known only by their namespace (offline).
func (p Placement) CheckObjects(objects []*unstructured.Unstructured) error {
	for _, u := range objects {
		if err := p.Check(u, u.GetNamespace() != ""); err != nil {
			return err
		}
	}
	return nil
}

func (p Placement) checkNamespace(u *unstructured.Unstructured, ns string) error {
	switch {
	case ns == p.cairnNS:
		return p.deny(u, "namespace %q is cairn's own namespace, refused from any render", ns)
	case cairnv1.MatchAnyPattern(p.policy.Deny, ns):
		return p.deny(u, "namespace %q is denied by the Platform's namespaces.deny %v", ns, p.policy.Deny)
	case ns == p.own:
		return nil
	case p.tenant != nil:
		if cairnv1.MatchAnyPattern(p.tenant.Namespaces, ns) {
			return nil
		}
		return p.deny(u, "namespace %q is not one of tenant %s's namespaces %v", ns, p.tenant.Name, p.tenant.Namespaces)
	case len(p.policy.Allow) == 0:
		return p.deny(u, "namespace %q is not the instance's own (%s) and the Platform's namespaces.allow grants no other", ns, p.own)
	case !cairnv1.MatchAnyPattern(p.policy.Allow, ns):
		return p.deny(u, "namespace %q is not allowed by the Platform's namespaces.allow %v", ns, p.policy.Allow)
	}
	return nil
}

func (p Placement) checkClusterKind(u *unstructured.Unstructured, group, kind string) error {
	switch {
	case p.tenant != nil:
		if cairnv1.MatchesGroupKind(p.tenant.ClusterResources, group, kind) {
			return nil
		}
		return p.refuse(u, "cluster-scoped kind %s is not in tenant %s's clusterResources", groupKind(group, kind), p.tenant.Name)
	case p.identity != "", cairnv1.MatchesGroupKind(p.cluster, group, kind):
		return nil
	}
	return p.refuse(u, "cluster-scoped kind %s needs spec.serviceAccountName (its RBAC then decides) "+
		"or the Platform's clusterResources to list it", groupKind(group, kind))
}

// refuse is ObjectForbidden: the object may not be rendered at all.
func (p Placement) refuse(u *unstructured.Unstructured, format string, args ...any) error {
	return outcome.NewStalled(cairnv1.ReasonObjectForbidden, fmt.Errorf("%s: %s", apply.Describe(u), fmt.Sprintf(format, args...)))
}

// deny is NamespaceDenied: the object may not go to that namespace.
func (p Placement) deny(u *unstructured.Unstructured, format string, args ...any) error {
	return outcome.NewStalled(cairnv1.ReasonNamespaceDenied, fmt.Errorf("%s: %s", apply.Describe(u), fmt.Sprintf(format, args...)))
}

func groupKind(group, kind string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}
