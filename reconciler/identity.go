package reconciler

import (
	"fmt"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// explainIdentity says why the API server denied an instance that applies as cairn
// itself (no spec.serviceAccountName, no Platform defaultServiceAccount): cairn's own
// RBAC grants it no objects of tenants unless it was installed to (the
// --allow-apply-as-controller choice of `cairn install --controller`).
func (in *revisionInput) explainIdentity(mi *cairnv1.ModuleInstance, f *outcome.Failure) *outcome.Failure {
	if f == nil || in.serviceAccount(mi) != "" || !apierrors.IsForbidden(f.Err) {
		return f
	}
	return &outcome.Failure{Kind: outcome.Stalled, Reason: f.Reason, Err: fmt.Errorf("the instance names no ServiceAccount (spec.serviceAccountName) "+
		"and the Platform no defaultServiceAccount, so it applies as cairn itself, which cairn's RBAC does not allow: "+
		"name a ServiceAccount, or install cairn with --allow-apply-as-controller: %w", f.Err)}
}
