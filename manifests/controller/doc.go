// Package controller owns the manifests of cairn's in-cluster controller: its
// Namespace, ServiceAccount, least-privilege RBAC, Deployment, Service and
// PodDisruptionBudget, and the Secrets its credential files are mounted from, built
// as typed objects from Options. `cairn install --controller` applies them (after the
// CRDs of package manifests) and `cairn uninstall` deletes them.
package controller
