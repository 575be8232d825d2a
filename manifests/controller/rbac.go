package controller

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ApplyAsControllerBinding names the ClusterRoleBinding of Options.AllowApplyAsController.
const ApplyAsControllerBinding = "cairn-controller-apply-as-controller"

var (
	readWrite    = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	statusWrite  = []string{"get", "update", "patch"}
	eventWrite   = []string{"create", "patch"}
	namespaceUse = []string{"get", "create"}
)

// clusterRules are what cairn does as itself across the cluster: its own CRs and their
// status, Events on them, the namespaces instances live in (created when missing,
// never deleted), impersonating the ServiceAccounts instances apply as, and, unless
// workloadWatch is false (Options.NoWorkloadWatch), listing and watching workloads for
// their health (apply.HealthWatch: the status of those it labels, instead of a GET per
// object per poll; without the rule the waits poll as before). Impersonating a
// ServiceAccount needs no group impersonation: the API server gives it its groups.
func clusterRules(workloadWatch bool) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"cairn.dev"}, Resources: []string{"moduleinstances", "platforms", "registries"}, Verbs: readWrite},
		{APIGroups: []string{"cairn.dev"}, Resources: []string{"moduleinstances/status", "platforms/status", "registries/status"},
			Verbs: statusWrite},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: eventWrite},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: namespaceUse},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}},
	}
	if workloadWatch {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"},
			Verbs: []string{"list", "watch"}})
	}
	return rules
}

// namespaceRules are what cairn does in its own namespace only: its render Jobs, the sync Lease and,
// with --shards, the shard and membership Leases (listed, and a replica's own deleted
// as it leaves), the
// Secrets and ConfigMaps Registries name (read and watched), and its own Secrets (the
// digest key, large inventories, the hook records of chart instances).
func namespaceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		// Render Jobs (render.mode: Job, docs/render-jobs.md): the RenderTasks, their
		// Jobs, and their pods' termination messages.
		{APIGroups: []string{"cairn.dev"}, Resources: []string{"rendertasks"}, Verbs: []string{"get", "create", "delete"}},
		{APIGroups: []string{"cairn.dev"}, Resources: []string{"rendertasks/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
	}
}

func clusterRole(workloadWatch bool) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
		ObjectMeta: meta("", Name), Rules: clusterRules(workloadWatch)}
}

func role(ns string) *rbacv1.Role {
	return &rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta(ns, Name), Rules: namespaceRules()}
}

func clusterRoleBinding(ns, name, roleName string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
		ObjectMeta: meta("", name),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		Subjects:   serviceAccountSubject(ns)}
}

func roleBinding(ns string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(ns, Name),
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: Name},
		Subjects: serviceAccountSubject(ns)}
}

func serviceAccountSubject(ns string) []rbacv1.Subject {
	return []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: Name, Namespace: ns}}
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// The ClusterRoles of the dashboard (docs/dashboard.md).
const (
	// DashboardRole is the controller's, bound to its ServiceAccount while the
	// dashboard is served: it checks users' tokens (TokenReview) and asks what they
	// may (SubjectAccessReview). It impersonates nobody: a user's requests and reads
	// are made with the token they logged in with.
	DashboardRole = "cairn-controller-dashboard"
	// DashboardViewRole and DashboardOperateRole are for users, bound by the cluster's
	// admins (a RoleBinding in a namespace shows that namespace's instances): view
	// reads the instances, the Platform and the Events (an instance's objects are
	// read as the user too, so their health shows where other roles let the user
	// read them); operate adds patch on ModuleInstances, the
	// verb of every request (reconcile, suspend, resume, hold, release, rollback).
	DashboardViewRole    = "cairn-dashboard-view"
	DashboardOperateRole = "cairn-dashboard-operate"
)

func dashboardRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectMeta: meta("", DashboardRole),
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		}}
}

// DashboardUserRoles are the ClusterRoles cairn-dashboard-view and cairn-dashboard-operate.
func DashboardUserRoles() []client.Object {
	read := []string{"get", "list", "watch"}
	view := []rbacv1.PolicyRule{
		{APIGroups: []string{"cairn.dev"}, Resources: []string{"moduleinstances", "platforms", "registries"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: read},
	}
	operate := append(slices.Clone(view),
		rbacv1.PolicyRule{APIGroups: []string{"cairn.dev"}, Resources: []string{"moduleinstances"}, Verbs: []string{"patch"}})
	role := func(name string, rules []rbacv1.PolicyRule) client.Object {
		return &rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectMeta: meta("", name), Rules: rules}
	}
	return []client.Object{role(DashboardViewRole, view), role(DashboardOperateRole, operate)}
}
