package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PlatformSpec is the cluster-wide policy of a platform repository.
type PlatformSpec struct {
	// Catalogs are CUE modules every instance renders against, pinned exactly.
	// +optional
	Catalogs []Catalog `json:"catalogs,omitempty"`

	// SkewPolicy decides what happens when an instance's module needs a newer
	// catalog than the pinned one; unset means Warn.
	// +kubebuilder:validation:Enum=Warn;Refuse
	// +optional
	SkewPolicy SkewPolicy `json:"skewPolicy,omitempty"`

	// ModuleRegistry names the Registry that serves CUE modules.
	// +optional
	ModuleRegistry string `json:"moduleRegistry,omitempty"`

	// DefaultServiceAccount is impersonated when an instance names none
	// ("" means cairn's own identity).
	// +optional
	DefaultServiceAccount string `json:"defaultServiceAccount,omitempty"`

	// Namespaces restricts where instances may put objects.
	// +optional
	Namespaces NamespacePolicy `json:"namespaces,omitempty"`

	// Verify sets how module and chart signatures are checked.
	// +optional
	Verify PlatformVerify `json:"verify,omitempty"`

	// Prune holds the guards that bound deletions.
	// +optional
	Prune PrunePolicy `json:"prune,omitempty"`

	// Render sets where rendering runs and where rendered artifacts are published.
	// +optional
	Render RenderPolicy `json:"render,omitempty"`

	// ClusterResources are the cluster-scoped kinds that instances applying as cairn
	// itself (no ServiceAccount) may render. Instances that apply as a ServiceAccount
	// are bounded by its RBAC instead; a tenant's instances by the tenant's list.
	// Default: none.
	// +optional
	ClusterResources []GroupKind `json:"clusterResources,omitempty"`

	// Limits bound every instance and every declaration file.
	// +optional
	Limits Limits `json:"limits,omitempty"`

	// Tenants say who may declare what: the declarations under a tenant's paths are
	// bounded by its namespaces, its ServiceAccount, its cluster kinds and its limits.
	// +optional
	Tenants []Tenant `json:"tenants,omitempty"`
}

// GroupKind names a kind by API group ("" for the core group) and kind; "*" in either
// matches every group or every kind.
type GroupKind struct {
	// Group is the API group, "" for the core group.
	// +optional
	Group string `json:"group"`
	// Kind is the kind, e.g. Namespace.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
}

// Limits bound instances and the files that declare them. A zero field means its
// default; a tenant's limits can only tighten the Platform's.
type Limits struct {
	// MaxTimeout is the longest spec.timeout an instance may set (default 30m).
	// +optional
	MaxTimeout *metav1.Duration `json:"maxTimeout,omitempty"`
	// RenderMemory is the memory one render may use (default 512Mi); a render that
	// needs more fails with LimitExceeded.
	// +optional
	RenderMemory *resource.Quantity `json:"renderMemory,omitempty"`
	// MaxFileBytes caps the size of one declaration file (default 1Mi).
	// +optional
	MaxFileBytes *resource.Quantity `json:"maxFileBytes,omitempty"`
	// MaxFileDocuments caps the YAML documents of one declaration file (default 1000).
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxFileDocuments *int32 `json:"maxFileDocuments,omitempty"`
	// MaxModuleBytes caps the files of a local module that a render reads (default 16Mi).
	// +optional
	MaxModuleBytes *resource.Quantity `json:"maxModuleBytes,omitempty"`
	// AllowPruneProtected lets instances set spec.pruneProtected (default false).
	// +optional
	AllowPruneProtected *bool `json:"allowPruneProtected,omitempty"`
	// AllowEmpty lets instances set spec.allowEmpty (default false).
	// +optional
	AllowEmpty *bool `json:"allowEmpty,omitempty"`
}

// Tenant bounds the declarations under its paths.
type Tenant struct {
	// Name identifies the tenant in messages.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Paths are globs, relative to the repository root, of the declaration files that
	// belong to the tenant ("**" matches any number of directories).
	// +kubebuilder:validation:MinItems=1
	Paths []string `json:"paths"`
	// Namespaces are the patterns of the namespaces its instances and their objects may use.
	// +kubebuilder:validation:MinItems=1
	Namespaces []string `json:"namespaces"`
	// ServiceAccount is what its instances apply, prune and delete as, in each
	// instance's namespace.
	// +kubebuilder:validation:MinLength=1
	ServiceAccount string `json:"serviceAccount"`
	// ClusterResources are the cluster-scoped kinds its instances may render (default none).
	// +optional
	ClusterResources []GroupKind `json:"clusterResources,omitempty"`
	// Limits bound its instances and files, within the Platform's.
	// +optional
	Limits Limits `json:"limits,omitempty"`
}

// Catalog is a CUE module pinned to an exact version.
type Catalog struct {
	// Module is the CUE module path with its major version, e.g. example.com/catalog@v0.
	// +kubebuilder:validation:MinLength=1
	Module string `json:"module"`
	// Version is the exact semantic version, e.g. v0.3.1.
	// +kubebuilder:validation:Pattern=`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`
	Version string `json:"version"`
}

// SkewPolicy is Warn or Refuse.
type SkewPolicy string

// Skew policies.
const (
	SkewWarn   SkewPolicy = "Warn"
	SkewRefuse SkewPolicy = "Refuse"
)

// NamespacePolicy holds glob patterns of namespaces instances may and may not use.
type NamespacePolicy struct {
	// Allow lists permitted namespace patterns (empty allows all).
	// +optional
	Allow []string `json:"allow,omitempty"`
	// Deny lists forbidden namespace patterns; deny wins over allow.
	// +optional
	Deny []string `json:"deny,omitempty"`
}

// VerifyMode is Enforce, Warn or Off.
type VerifyMode string

// Verification modes.
const (
	VerifyEnforce VerifyMode = "Enforce"
	VerifyWarn    VerifyMode = "Warn"
	VerifyOff     VerifyMode = "Off"
)

// PlatformVerify sets the signature verification mode.
type PlatformVerify struct {
	// Mode is Enforce, Warn or Off. Enforce fails an instance whose module or
	// chart is unsigned, wrongly signed, or from a Registry without keys; Warn
	// uses it and reports; Off checks nothing. Unset enforces for Registries
	// that declare cosign keys and leaves artifacts of the others unverified
	// (reported as such).
	// +kubebuilder:validation:Enum=Enforce;Warn;Off
	// +optional
	Mode VerifyMode `json:"mode,omitempty"`
}

// PrunePolicy bounds what one sync may delete.
type PrunePolicy struct {
	// MaxDeletions caps the objects one sync deletes in total (unset: no cap).
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxDeletions *int32 `json:"maxDeletions,omitempty"`
	// MaxPercent caps the share of its objects an instance that stays may lose.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxPercent *int32 `json:"maxPercent,omitempty"`
	// ProtectedKinds are never deleted unless the instance opts in.
	// +optional
	ProtectedKinds []string `json:"protectedKinds,omitempty"`
}

// RenderMode is InProcess or Job.
type RenderMode string

// Render modes.
const (
	RenderInProcess RenderMode = "InProcess"
	RenderJob       RenderMode = "Job"
)

// RenderPolicy sets where rendering runs and where its output is published.
type RenderPolicy struct {
	// Mode is InProcess (the default) or Job: each render runs in a Kubernetes Job
	// of cairn's namespace (a RenderTask) that holds no API token and no signing
	// key, and pushes its render to Publish, which Job needs (docs/render-jobs.md).
	// Local modules and kustomize directories render in Jobs so far; other kinds
	// fail with reason NotAvailable.
	// +kubebuilder:validation:Enum=InProcess;Job
	// +optional
	Mode RenderMode `json:"mode,omitempty"`
	// Publish pushes each instance's rendered objects as a signed OCI artifact.
	// +optional
	Publish *PublishTarget `json:"publish,omitempty"`
}

// PublishTarget is a repository in a Registry.
type PublishTarget struct {
	// Registry names a Registry.
	// +kubebuilder:validation:MinLength=1
	Registry string `json:"registry"`
	// Repository is the repository path inside the registry.
	// +kubebuilder:validation:MinLength=1
	Repository string `json:"repository"`
	// Keep is how many of an instance's last applied renders keep their published
	// artifacts (unset: 10, at least 1). Once a render is published and applied,
	// cairn deletes from <repository>/<namespace>/<name> the render artifacts and
	// signatures that none of the instance's newest Keep status.history entries
	// names, and the render Jobs' results and sources no RenderTask of the
	// instance names; its history holds max(10, Keep) entries.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Keep *int32 `json:"keep,omitempty"`
}

// DefaultPublishKeep is render.publish.keep when unset.
const DefaultPublishKeep = 10

// KeepOrDefault is t's Keep, or DefaultPublishKeep when t or Keep is unset. It is
// not a CRD default: the Platform is mirrored from Git as written.
func (t *PublishTarget) KeepOrDefault() int {
	if t == nil || t.Keep == nil {
		return DefaultPublishKeep
	}
	return int(*t.Keep)
}

// PlatformStatus is the state of the whole repository's sync.
type PlatformStatus struct {
	// ObservedGeneration is the last generation reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions holds Ready, Reconciling and Stalled.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Repository is the URL (without credentials) last synced.
	// +optional
	Repository string `json:"repository,omitempty"`
	// LastSyncedRevision is the SHA of the last sync of the whole repository.
	// +optional
	LastSyncedRevision string `json:"lastSyncedRevision,omitempty"`
	// LastAttemptedRevision is the SHA of the last attempted sync.
	// +optional
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`
	// LastSyncTime is when the last sync finished.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// Instances counts instances by outcome of the last sync.
	// +optional
	Instances InstanceCounts `json:"instances,omitempty"`
	// LastHandledReconcileAt is the value of the cairn.dev/reconcile-requested-at
	// annotation (`cairn reconcile source`) the last sync of the repository handled.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
	// RecentSyncs are the last syncs of a revision, newest first (at most
	// MaxRecentSyncs): what the dashboard shows of the Platform's history.
	// +optional
	RecentSyncs []SyncRecord `json:"recentSyncs,omitempty"`
}

// MaxRecentSyncs is how many syncs status.recentSyncs keeps.
const MaxRecentSyncs = 10

// SyncRecord is one sync of a revision, as the revision step saw it finish.
type SyncRecord struct {
	Revision string      `json:"revision"`
	Started  metav1.Time `json:"started"`
	// Duration is from the start of the revision step to the sync's end.
	Duration metav1.Duration `json:"duration"`
	// Result is Succeeded, InstancesFailed, Progressing or Interrupted.
	Result string `json:"result"`
	// Changed counts the instances the revision affected (rendered, applied and
	// pruned again) and those it removed; Failed those that failed; PruneGuard
	// those whose prune the guards refused; Warnings the instances with warnings
	// (catalog skew under Warn among them).
	// +optional
	Changed int32 `json:"changed,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// +optional
	PruneGuard int32 `json:"pruneGuard,omitempty"`
	// +optional
	Warnings int32 `json:"warnings,omitempty"`
}

// InstanceCounts counts instances by state.
type InstanceCounts struct {
	// +optional
	Total int32 `json:"total,omitempty"`
	// +optional
	Ready int32 `json:"ready,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Progressing counts the instances applied and not yet healthy, handed over to
	// a later health check.
	// +optional
	Progressing int32 `json:"progressing,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=pf
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.lastSyncedRevision`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Platform is the cluster-wide policy of a platform repository; its only name is "cluster".
type Platform struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PlatformSpec   `json:"spec,omitempty"`
	Status PlatformStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// PlatformList is a list of Platforms.
type PlatformList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Platform `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Platform{}, &PlatformList{})
}
