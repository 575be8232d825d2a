package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RegistrySpec describes an OCI registry cairn pulls from or pushes to.
type RegistrySpec struct {
	// Hostname is host[:port] of the registry.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9.-]+(:[0-9]+)?$`
	Hostname string `json:"hostname"`
	// PlainHTTP talks HTTP instead of HTTPS.
	// +optional
	PlainHTTP bool `json:"plainHTTP,omitempty"`
	// CAConfigMap names a ConfigMap in cairn's namespace holding a CA bundle (key ca.crt).
	// +optional
	CAConfigMap string `json:"caConfigMap,omitempty"`
	// SecretRef names a Secret in cairn's namespace with basic-auth keys or a docker config.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
	// Timeout bounds each request to the registry.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Verify holds the keys that artifacts from this registry must be signed with.
	// +optional
	Verify *RegistryVerify `json:"verify,omitempty"`
	// Signing holds the key cairn signs with when it pushes to this registry.
	// +optional
	Signing *RegistrySigning `json:"signing,omitempty"`
}

// LocalObjectReference names an object in cairn's namespace.
type LocalObjectReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// SecretKeyReference names a key of a Secret: in cairn's namespace for a Registry,
// in the instance's namespace for spec.valuesFrom.
type SecretKeyReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Key string `json:"key,omitempty"`
}

// RegistryVerify holds verification keys.
type RegistryVerify struct {
	// Cosign holds cosign public keys.
	// +optional
	Cosign *CosignVerify `json:"cosign,omitempty"`
}

// CosignVerify lists cosign public keys.
type CosignVerify struct {
	// PublicKeys are Secrets holding PEM public keys.
	// +kubebuilder:validation:MinItems=1
	PublicKeys []PublicKeySource `json:"publicKeys"`
}

// PublicKeySource points at a public key.
type PublicKeySource struct {
	SecretRef SecretKeyReference `json:"secretRef"`
}

// RegistrySigning names the private key used to sign pushes.
type RegistrySigning struct {
	// KeySecretRef names a Secret with cosign.key and cosign.password.
	KeySecretRef LocalObjectReference `json:"keySecretRef"`
}

// RegistryStatus is the observed state of a Registry.
type RegistryStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastAppliedRevision is the SHA whose declaration of this Registry is mirrored.
	// +optional
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=reg
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Hostname",type=string,JSONPath=`.spec.hostname`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Registry is an OCI registry cairn pulls modules and charts from or pushes artifacts to.
type Registry struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RegistrySpec   `json:"spec,omitempty"`
	Status RegistryStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// RegistryList is a list of Registries.
type RegistryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Registry `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Registry{}, &RegistryList{})
}
