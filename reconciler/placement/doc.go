// Package placement owns where an instance's rendered objects may go and as whom
// it applies them: its own namespace, its tenant's namespaces or the Platform's
// namespaces.allow, never cairn's namespace or API group or a denied namespace;
// cluster-scoped kinds by the tenant's or the Platform's lists or the RBAC of the
// instance's ServiceAccount.
package placement
