// Package v1alpha1 owns the cairn.dev/v1alpha1 API: the Platform, Registry and
// ModuleInstance kinds that a platform repository declares and that cairn mirrors into
// the cluster with their status.
//
// +kubebuilder:object:generate=true
// +groupName=cairn.dev
package v1alpha1
