package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ModuleInstanceSpec declares one rendered module applied to the cluster.
type ModuleInstanceSpec struct {
	// Module is the source of the objects: exactly one of cue, chart or local.
	Module ModuleSource `json:"module"`

	// Values are unified with the module's config, or passed as Helm values.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Values *apiextensionsv1.JSON `json:"values,omitempty"`

	// ValuesFrom reads values from Secrets in the instance's namespace, as the
	// instance's identity, merged in order under spec.values (which wins). They are
	// never copied into the ModuleInstance and are masked in plans and messages.
	// +optional
	ValuesFrom []ValuesReference `json:"valuesFrom,omitempty"`

	// ServiceAccountName is impersonated for apply, prune and delete.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Adopt lets this instance take over objects that already exist and that no
	// cairn instance owns (created by hand, by Helm or by another tool). Without it,
	// such an object fails the instance with OwnershipConflict and is left untouched.
	// +optional
	Adopt bool `json:"adopt,omitempty"`

	// DependsOn lists instances that must be Ready before this one is applied.
	// +optional
	DependsOn []InstanceReference `json:"dependsOn,omitempty"`

	// Prune deletes objects that leave the render (with the Platform's guards); unset means true.
	// +optional
	Prune *bool `json:"prune,omitempty"`

	// AllowEmpty lets an empty render prune every object of the instance.
	// +optional
	AllowEmpty bool `json:"allowEmpty,omitempty"`

	// PruneProtected lets prune delete objects of the Platform's protected kinds.
	// +optional
	PruneProtected bool `json:"pruneProtected,omitempty"`

	// Wait makes success wait until every object is healthy; unset means true.
	// +optional
	Wait *bool `json:"wait,omitempty"`

	// Timeout bounds the render, apply and health wait of this instance.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Drift decides what a drift check does: Correct, Warn or Ignore.
	// +kubebuilder:validation:Enum=Correct;Warn;Ignore
	// +optional
	Drift DriftPolicy `json:"drift,omitempty"`

	// Suspend stops reconciling this instance; its objects are left as they are.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Secrets are generated in the cluster, never stored in Git.
	// +optional
	Secrets []GeneratedSecret `json:"secrets,omitempty"`
}

// ValuesReference names values kept outside Git.
type ValuesReference struct {
	// SecretRef is a key of a Secret in the instance's namespace (not cairn's)
	// holding a YAML or JSON object of values.
	SecretRef SecretKeyReference `json:"secretRef"`
}

// ModuleSource is exactly one of CUE, Chart, Local, Kustomize or Timoni.
type ModuleSource struct {
	// CUE is a CUE module served by the Platform's moduleRegistry.
	// +optional
	CUE *CUEModule `json:"cue,omitempty"`
	// Chart is a Helm chart in an OCI registry.
	// +optional
	Chart *ChartSource `json:"chart,omitempty"`
	// Local is a CUE package inside the platform repository.
	// +optional
	Local *LocalModule `json:"local,omitempty"`
	// Kustomize is a directory of YAML inside the platform repository, with or
	// without a kustomization.yaml, built as `kustomize build` builds it (no values).
	// +optional
	Kustomize *KustomizeModule `json:"kustomize,omitempty"`
	// Timoni is a module written for Timoni, unchanged: a directory of the platform
	// repository or an OCI artifact of Timoni's media types.
	// +optional
	Timoni *TimoniModule `json:"timoni,omitempty"`
}

// TimoniModule is a Timoni module: exactly one of Path (a directory of the platform
// repository) or URL (an OCI repository, with Version and/or Digest).
type TimoniModule struct {
	// Path is the module directory relative to the repository root, e.g. ./modules/redis;
	// its moduleVersion tag is 0.0.0-devel, as for `timoni build` of a directory.
	// +optional
	Path string `json:"path,omitempty"`
	// URL is oci://host/repository of a module pushed with `timoni mod push`.
	// +optional
	// +kubebuilder:validation:Pattern=`^oci://`
	URL string `json:"url,omitempty"`
	// Version is the module version (the artifact's tag), also its moduleVersion tag.
	// +optional
	Version string `json:"version,omitempty"`
	// Digest pins the artifact's manifest, e.g. sha256:...; with a version, the version
	// must still resolve to it.
	// +optional
	Digest string `json:"digest,omitempty"`
}

// KustomizeModule is a kustomize directory in the platform repository.
type KustomizeModule struct {
	// Path is the directory relative to the repository root, e.g. ./apps/podinfo/prod.
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
}

// CUEModule is a CUE module path and exact version.
type CUEModule struct {
	// Path is the module path with major version, e.g. example.com/modules/podinfo@v0.
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
	// Version is the exact version, e.g. v0.4.0.
	// +kubebuilder:validation:Pattern=`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`
	Version string `json:"version"`
}

// ChartSource is an OCI Helm chart.
type ChartSource struct {
	// URL is oci://host/repository.
	// +kubebuilder:validation:Pattern=`^oci://`
	URL string `json:"url"`
	// Version is the chart version (tag).
	// +optional
	Version string `json:"version,omitempty"`
	// Digest pins the chart manifest, e.g. sha256:....
	// +optional
	Digest string `json:"digest,omitempty"`
}

// LocalModule is a CUE package in the platform repository.
type LocalModule struct {
	// Path is the package directory relative to the repository path, e.g. ./modules/podinfo.
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
}

// InstanceReference names a ModuleInstance; an empty namespace means the referrer's.
type InstanceReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// DriftPolicy is Correct, Warn or Ignore.
type DriftPolicy string

// Drift policies.
const (
	DriftCorrect DriftPolicy = "Correct"
	DriftWarn    DriftPolicy = "Warn"
	DriftIgnore  DriftPolicy = "Ignore"
)

// GeneratedSecret is a Secret cairn generates in the cluster, in the instance's
// namespace, as the instance's identity. Its values never leave the cluster. A
// Secret that exists keeps its values: one that is not once is generated again only
// when its generator (data, tls) changes or rotateAfter elapses.
type GeneratedSecret struct {
	// Name is the Secret's name; modules refer to it by this name.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Once creates the Secret if absent and never regenerates it (keys added to
	// data later are added, existing values are never changed).
	// +optional
	Once bool `json:"once,omitempty"`
	// Data maps keys to generators.
	// +optional
	Data map[string]SecretValueSource `json:"data,omitempty"`
	// TLS generates a self-signed CA and certificate.
	// +optional
	TLS *TLSSecretSource `json:"tls,omitempty"`
	// RotateAfter generates the Secret again at the first sync or drift check
	// after its cairn.dev/generated-at annotation is older than this.
	// +optional
	RotateAfter *metav1.Duration `json:"rotateAfter,omitempty"`
	// ToNamespaces copies the Secret, with the same values, into these namespaces
	// (each allowed by the Platform's namespace policy).
	// +optional
	ToNamespaces []string `json:"toNamespaces,omitempty"`
}

// SecretValueSource generates one value.
type SecretValueSource struct {
	// Random generates a random string.
	// +optional
	Random *RandomSource `json:"random,omitempty"`
}

// RandomSource is a random value of a length and encoding, from crypto/rand.
type RandomSource struct {
	// Length is the number of characters of the value, whatever the encoding.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	Length int32 `json:"length"`
	// Encoding is the alphabet: alphanumeric (default: A-Z, a-z, 0-9), hex
	// (0-9, a-f) or base64 (A-Z, a-z, 0-9, + and /, no padding).
	// +kubebuilder:validation:Enum=alphanumeric;hex;base64
	// +optional
	Encoding string `json:"encoding,omitempty"`
}

// TLSSecretSource describes a generated certificate: a CA of this Secret's own
// signs it; the Secret (type kubernetes.io/tls) holds tls.crt, tls.key and ca.crt.
type TLSSecretSource struct {
	// CommonName is the certificate's subject common name.
	// +kubebuilder:validation:MinLength=1
	CommonName string `json:"commonName"`
	// DNSNames are its subject alternative names (IP addresses allowed); none
	// means the common name.
	// +optional
	DNSNames []string `json:"dnsNames,omitempty"`
	// ValidFor is the validity of the CA and certificate (default 8760h).
	// +optional
	ValidFor *metav1.Duration `json:"validFor,omitempty"`
}

// ModuleInstanceStatus is the observed state of a ModuleInstance.
type ModuleInstanceStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions holds Ready, Reconciling, Stalled, Drifted, Verified and Healthy.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastAppliedRevision is the SHA whose render was last applied successfully.
	// +optional
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`
	// LastAttemptedRevision is the SHA of the last attempt.
	// +optional
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`
	// LastAttemptedInput is the input digest (the cairn.dev/input-digest annotation
	// the revision step wrote: the declaration, the Platform and Registry settings
	// its render uses, and the files of its module in the repository) of the last
	// attempt, successful or not. An instance whose input digest equals it is not
	// rendered again by a new commit (see docs/architecture.md).
	// +optional
	LastAttemptedInput string `json:"lastAttemptedInput,omitempty"`
	// SourceDigest is the digest of the module source used.
	// +optional
	SourceDigest string `json:"sourceDigest,omitempty"`
	// ValuesDigest is the digest of the values used.
	// +optional
	ValuesDigest string `json:"valuesDigest,omitempty"`
	// RenderDigest is the digest of the rendered objects last applied.
	// +optional
	RenderDigest string `json:"renderDigest,omitempty"`
	// CapabilitiesDigest is, for a chart instance, the digest of the cluster's
	// capabilities its chart last rendered with (the Kubernetes version and the API
	// versions served, as .Capabilities shows them): when the cluster's differ (an API
	// newly served, an upgrade), the next sync renders the chart again.
	// +optional
	CapabilitiesDigest string `json:"capabilitiesDigest,omitempty"`
	// ServiceAccount is the identity the objects were last applied as ("" is cairn
	// itself); removal deletes as it, and a change of identity re-applies every object.
	// +optional
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// LastHandledReconcileAt is the value of the cairn.dev/reconcile-requested-at
	// annotation the last sync handled.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
	// Inventory lists the objects last applied (compact).
	// +optional
	Inventory *Inventory `json:"inventory,omitempty"`
	// Failures counts consecutive failed attempts.
	// +optional
	Failures int32 `json:"failures,omitempty"`
	// NextRetryAt is when a failed instance is retried at the earliest.
	// +optional
	NextRetryAt *metav1.Time `json:"nextRetryAt,omitempty"`
	// Held is the render the instance is held at (`cairn hold`, the annotation
	// cairn.dev/hold): new commits are not applied to it until it is released.
	// +optional
	Held *HeldRender `json:"held,omitempty"`
	// History lists the last renders applied, newest first: max(10, the Platform's
	// render.publish.keep) entries. An entry is added when a render is applied (not
	// when an attempt fails before its apply); a later reconcile of the same render
	// (a health recheck, a retry, a commit that renders the same objects) updates
	// only the newest entry's result and reason.
	// +optional
	History []HistoryEntry `json:"history,omitempty"`
	// Artifacts are the OCI artifacts (CUE modules, charts) the last render
	// used, each with its digest and how its signature was checked.
	// +optional
	Artifacts []ArtifactStatus `json:"artifacts,omitempty"`
	// Published is the signed OCI artifact holding the rendered objects last
	// applied (Platform spec.render.publish).
	// +optional
	Published *PublishedArtifact `json:"published,omitempty"`
	// HookRecord names the Secret, in cairn's namespace, that keeps what removing
	// the instance needs of its chart's Helm hooks (its delete hooks, the objects
	// its install hooks left); empty when it has none.
	// +optional
	HookRecord string `json:"hookRecord,omitempty"`
	// Provides are the kinds (Kind.group) whose CustomResourceDefinitions the
	// instance's render holds and that it has served: recorded once the instance
	// synced with them established, so its requirers no longer wait for it
	// (activation latches).
	// +optional
	Provides []string `json:"provides,omitempty"`
	// Requires are the instances that provide kinds this instance's render uses,
	// inferred from the renders (no dependsOn needed).
	// +optional
	Requires []ContractRequirement `json:"requires,omitempty"`
}

// ContractRequirement is one provider an instance requires and the kinds it uses.
type ContractRequirement struct {
	// Instance is the provider, namespace/name.
	Instance string `json:"instance"`
	// Kinds are the kinds (Kind.group) of the provider that the render uses.
	Kinds []string `json:"kinds"`
}

// Verification results of ArtifactStatus.
const (
	VerificationVerified   = "Verified"
	VerificationFailed     = "Failed"
	VerificationUnverified = "Unverified"
	VerificationSkipped    = "Skipped"
)

// ArtifactStatus is one OCI artifact used by a render.
type ArtifactStatus struct {
	// Ref is host/repository:tag as declared.
	Ref string `json:"ref"`
	// Digest is the manifest digest the tag was resolved to, pulled and verified by.
	// +optional
	Digest string `json:"digest,omitempty"`
	// Verification is Verified, Failed, Unverified (Warn mode, or no keys) or Skipped (Off).
	Verification string `json:"verification"`
	// Reason is the reason of a Failed result, e.g. SignatureMissing.
	// +optional
	Reason string `json:"reason,omitempty"`
	// KeyID names the public key that verified the signature.
	// +optional
	KeyID string `json:"keyID,omitempty"`
	// Message explains a result other than Verified.
	// +optional
	Message string `json:"message,omitempty"`
}

// PublishedArtifact is a rendered-objects artifact in the publish registry.
type PublishedArtifact struct {
	// Ref is host/repository:tag (the tag is the render digest).
	Ref string `json:"ref"`
	// Digest is the artifact's manifest digest.
	Digest string `json:"digest"`
	// Revision is the source SHA the artifact was first published for.
	// +optional
	Revision string `json:"revision,omitempty"`
	// KeyID names the cosign key that signed it (the first 12 hex digits of the
	// SHA-256 of its public key).
	// +optional
	KeyID string `json:"keyID,omitempty"`
}

// Inventory lists applied objects; large ones live compressed in a Secret.
type Inventory struct {
	// Entries are the objects, when they fit in the status.
	// +optional
	Entries []InventoryEntry `json:"entries,omitempty"`
	// SecretRef names the Secret in the instance's namespace holding a
	// gzip-compressed inventory when it is too large for the status.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
	// Count is the number of objects.
	Count int32 `json:"count"`
}

// InventoryEntry identifies an applied object and the hash of what was applied.
type InventoryEntry struct {
	// ID is <namespace>_<name>_<group>_<kind>.
	ID string `json:"id"`
	// Version is the API version used.
	Version string `json:"v"`
	// Hash is a short hash of the applied object.
	// +optional
	Hash string `json:"h,omitempty"`
}

// HoldRequest is the value of the cairn.dev/hold annotation: who asked, when, and
// whether the hold ends by itself at the first commit that changes the instance.
type HoldRequest struct {
	// By names who asked (the identity `cairn hold` authenticated as).
	// +optional
	By string `json:"by,omitempty"`
	// At is when it was asked.
	// +optional
	At *metav1.Time `json:"at,omitempty"`
	// UntilChange ends the hold at the first commit that changes the instance's
	// declaration or module.
	// +optional
	UntilChange bool `json:"untilChange,omitempty"`
	// To asks for a rollback first (`cairn rollback --to`): the render of
	// status.history with this render digest, or applied at the revision this
	// names (a SHA or a prefix of at least 7), is applied again, then held.
	// +optional
	To string `json:"to,omitempty"`
	// Release asks for the end of the hold (`cairn release`), naming who asked:
	// cairn records the release and removes the annotation.
	// +optional
	Release bool `json:"release,omitempty"`
}

// HeldRender is the render an instance is held at.
type HeldRender struct {
	// Revision is the source SHA the held render was applied for; RenderDigest its
	// keyed digest; Published its signed artifact, when renders are published.
	Revision     string `json:"revision"`
	RenderDigest string `json:"renderDigest,omitempty"`
	// +optional
	Published *PublishedArtifact `json:"published,omitempty"`
	// InputDigest is the instance's input digest as held: a commit that changes it
	// changes the instance (UntilChange).
	// +optional
	InputDigest string `json:"inputDigest,omitempty"`
	// By, At and UntilChange are the request's (see HoldRequest); Since is when
	// cairn recorded the hold.
	// +optional
	By string `json:"by,omitempty"`
	// +optional
	At *metav1.Time `json:"at,omitempty"`
	// +optional
	UntilChange bool        `json:"untilChange,omitempty"`
	Since       metav1.Time `json:"since"`
}

// Results of a HistoryEntry: what became of a render once applied.
const (
	// HistoryReady: applied and healthy (or not waited for); the sync succeeded.
	HistoryReady = "Ready"
	// HistoryProgressing: applied, health not known yet; it is rechecked.
	HistoryProgressing = "Progressing"
	// HistoryFailed: applied, then a later step failed (health, prune, a post hook,
	// an interruption); the entry's reason says which.
	HistoryFailed = "Failed"
)

// HistoryEntry is one render applied to the cluster.
type HistoryEntry struct {
	// Revision is the source SHA the render was first applied for.
	Revision string `json:"revision"`
	// Time is when the render was first applied.
	Time metav1.Time `json:"time"`
	// Result is Ready, Progressing or Failed (see the History* constants), as the
	// last reconcile of this render left it.
	Result string `json:"result"`
	// Reason is the Ready condition's reason that reconcile left.
	// +optional
	Reason string `json:"reason,omitempty"`
	// RenderDigest is the keyed digest of the rendered objects (the status's
	// renderDigest once Ready).
	// +optional
	RenderDigest string `json:"renderDigest,omitempty"`
	// Objects counts the rendered objects applied.
	// +optional
	Objects int32 `json:"objects,omitempty"`
	// Duration is how long the instance's reconcile took, from its start to its
	// status (render, apply, prune, health).
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
	// Published is the signed artifact of the render (the Platform's
	// render.publish); absent when renders are not published.
	// +optional
	Published *PublishedArtifact `json:"published,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=mi
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.lastAppliedRevision`
// +kubebuilder:printcolumn:name="Verified",type=string,JSONPath=`.status.conditions[?(@.type=="Verified")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ModuleInstance is one module rendered with values and applied to the cluster.
type ModuleInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ModuleInstanceSpec   `json:"spec,omitempty"`
	Status ModuleInstanceStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ModuleInstanceList is a list of ModuleInstances.
type ModuleInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ModuleInstance `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ModuleInstance{}, &ModuleInstanceList{})
}
