package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the cairn API.
	GroupVersion = schema.GroupVersion{Group: "cairn.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the cairn types with a runtime scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the cairn types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// APIVersion is the apiVersion string of every cairn document.
const APIVersion = "cairn.dev/v1alpha1"

// Kinds of the cairn API.
const (
	PlatformKind       = "Platform"
	RegistryKind       = "Registry"
	ModuleInstanceKind = "ModuleInstance"
)

// PlatformName is the only name a Platform may have.
const PlatformName = "cluster"
