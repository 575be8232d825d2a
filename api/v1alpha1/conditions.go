package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Condition types beyond the kstatus ones (Ready, Reconciling, Stalled).
const (
	// DriftedCondition is True when a drift check found objects that differ from Git
	// (drift: Warn), False after it corrected them (drift: Correct).
	DriftedCondition = "Drifted"
	// VerifiedCondition says whether every OCI artifact of the last render verified.
	VerifiedCondition = "Verified"
	// HealthyCondition is the last health wait (wait: true): True when every object
	// the sync applied is Current, False with reason HealthCheckFailed naming the
	// objects that are not; absent with wait: false.
	HealthyCondition = "Healthy"
	// HeldCondition is True while the instance is held at a render (`cairn hold`):
	// its message names the render, the revision, who asked and since when.
	HeldCondition = "Held"
)

// Reasons set on conditions.
const (
	ReasonSucceeded          = "Succeeded"
	ReasonInvalidDeclaration = "InvalidDeclaration"
	ReasonDependencyNotReady = "DependencyNotReady"
	ReasonRenderFailed       = "RenderFailed"
	ReasonApplyFailed        = "ApplyFailed"
	ReasonPruneGuard         = "PruneGuard"
	ReasonPruneFailed        = "PruneFailed"
	ReasonHealthCheckFailed  = "HealthCheckFailed"
	// ReasonProgressing: the objects were applied and are not all Current yet; the
	// sync moved on and a later one checks them again (Ready is Unknown meanwhile).
	ReasonProgressing       = "Progressing"
	ReasonNamespaceDenied   = "NamespaceDenied"
	ReasonObjectForbidden   = "ObjectForbidden"
	ReasonOwnershipConflict = "OwnershipConflict"
	ReasonValuesFromFailed  = "ValuesFromFailed"
	ReasonSuspended         = "Suspended"
	// ReasonHeld: the Held condition of an instance held at its render (`cairn
	// hold`); ReasonReleased: the Event of a hold that ended.
	ReasonHeld     = "Held"
	ReasonReleased = "Released"
	// ReasonRolledBack: the Held condition and Event of an instance rolled back to
	// an earlier render (`cairn rollback`), held there.
	ReasonRolledBack        = "RolledBack"
	ReasonSourceFailed      = "SourceFailed"
	ReasonSignatureMissing  = "SignatureMissing"
	ReasonSignatureInvalid  = "SignatureInvalid"
	ReasonVerified          = "Verified"
	ReasonNotVerified       = "NotVerified"
	ReasonUnsupportedSecret = "UnsupportedSecret"
	ReasonRegistryNotReady  = "RegistryNotReady"
	ReasonArtifactFailed    = "ArtifactFailed"
	ReasonPublishFailed     = "PublishFailed"
	// ReasonInterrupted is a sync stopped before it ended (SIGTERM, a lost sync
	// Lease): transient, the next sync resumes it.
	ReasonInterrupted = "Interrupted"
	// ReasonLimitExceeded: a render passed a limit of the Platform or its tenant
	// (renderMemory, maxModuleBytes) or of the engine (objects, bytes).
	ReasonLimitExceeded = "LimitExceeded"
	// ReasonHookFailed: a Helm hook of a chart instance failed (its Job or Pod
	// failed, it could not be applied or did not finish within the instance's
	// timeout): the message names the hook and says why; nothing after it was
	// applied, nothing was pruned or, for a pre-delete hook, deleted.
	ReasonHookFailed = "HookFailed"
	// ReasonProviderNotReady: the instance renders objects of a kind another
	// instance provides (its CRD), and that provider has not served it yet.
	ReasonProviderNotReady = "ProviderNotReady"
	// ReasonDependentsRemain: a provider left Git while instances that use its
	// kinds remain; nothing of it is deleted.
	ReasonDependentsRemain = "DependentsRemain"
	// ReasonKindNotServed: the instance renders a kind that no instance provides
	// and the cluster does not serve.
	ReasonKindNotServed = "KindNotServed"
	// ReasonDependencyCycle: dependsOn and contract edges together form a cycle.
	ReasonDependencyCycle = "DependencyCycle"
	// ReasonContractWithdrawn (Ready True): the provider's render dropped the
	// CRD of a kind other instances still use; the CRD is kept, in its
	// inventory, and the message names the kind and the users.
	ReasonContractWithdrawn = "ContractWithdrawn"
	// ReasonContractConflict: the instance renders the CRD of a kind another
	// instance provides; a kind has one provider.
	ReasonContractConflict = "ContractConflict"
	// ReasonInternalError: cairn failed on the instance in a way no declaration
	// should cause (a panic in its render or apply, recovered): a bug to report,
	// with the stack from cairn's log. The other instances are not affected.
	ReasonInternalError = "InternalError"
)

// Labels and annotations cairn sets or reads on managed objects.
const (
	ManagedByLabel   = "app.kubernetes.io/managed-by"
	ManagedByValue   = "cairn"
	InstanceLabel    = "cairn.dev/instance"
	InstanceUIDLabel = "cairn.dev/instance-uid"
	ForceAnnotation  = "cairn.dev/force"
	// SuspendAnnotation "true" on a ModuleInstance CR suspends it without a commit
	// (`cairn suspend`): an emergency stop that Git does not undo; `cairn resume`
	// removes it.
	SuspendAnnotation = "cairn.dev/suspend"
	// HoldAnnotation on a ModuleInstance CR holds it at its current render
	// (`cairn hold`): new commits are not applied to it until it is removed
	// (`cairn release`). Its value is a HoldRequest as JSON ("{}" will do: nobody
	// named, until released).
	HoldAnnotation = "cairn.dev/hold"
	// TenantAnnotation on a ModuleInstance CR names the tenant whose paths hold its
	// declaration (none: the platform team's), written with the instance's input;
	// the dashboard's filters read it.
	TenantAnnotation = "cairn.dev/tenant"
	// ReconcileRequestAnnotation, set to a new value (`cairn reconcile`, a time),
	// makes the next sync re-apply every object of the instance and check its health,
	// as Flux's reconcile.fluxcd.io/requestedAt does; status.lastHandledReconcileAt
	// records the value handled. On the Platform CR (`cairn reconcile source`) it
	// makes the controller fetch and sync the branch head at once, moved or not.
	ReconcileRequestAnnotation = "cairn.dev/reconcile-requested-at"
	// PlanRequestAnnotationPrefix, followed by a pull request's number, on the
	// Platform CR asks the controller's leader to plan that pull request: a replica
	// that does not lead sets it when a pull request webhook reaches it, and the
	// leader removes it once the plan is queued.
	PlanRequestAnnotationPrefix = "plan.cairn.dev/pr-"
	FieldManager                = "cairn"
	AllowPruneTrailer           = "cairn-allow-prune"
)

// InstanceKey returns the value of the instance label: <namespace>.<name>.
func InstanceKey(namespace, name string) string {
	return namespace + "." + name
}

// GetConditions returns the conditions of the ModuleInstance.
func (in *ModuleInstance) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the conditions of the ModuleInstance.
func (in *ModuleInstance) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetConditions returns the conditions of the Platform.
func (in *Platform) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the conditions of the Platform.
func (in *Platform) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetConditions returns the conditions of the Registry.
func (in *Registry) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the conditions of the Registry.
func (in *Registry) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }
