package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RenderTask condition types and reasons (docs/render-jobs.md).
const (
	// JobScheduledCondition is True while the task's Job runs, False when it does
	// not exist.
	JobScheduledCondition = "JobScheduled"
	// JobSucceededCondition is True once the Job pushed the render.
	JobSucceededCondition = "JobSucceeded"
	// JobFailedCondition is True once the Job failed; its message is the render's
	// error.
	JobFailedCondition = "JobFailed"
)

// RenderTaskSpec is one render of one instance's input in a Job. It never changes.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a RenderTask's spec is immutable: a new input is a new task"
type RenderTaskSpec struct {
	// Instance is the ModuleInstance rendered.
	Instance InstanceReference `json:"instance"`
	// InputDigest is the digest of everything the render reads (the instance's
	// cairn.dev/input-digest).
	// +kubebuilder:validation:MinLength=1
	InputDigest string `json:"inputDigest"`
	// Revision is the commit rendered.
	// +optional
	Revision string `json:"revision,omitempty"`
	// SourceArtifact is the source artifact the Job renders, by digest
	// (host/repository@sha256:...).
	// +kubebuilder:validation:MinLength=1
	SourceArtifact string `json:"sourceArtifact"`
}

// RenderTaskStatus is what the task's Job did.
type RenderTaskStatus struct {
	// Conditions holds JobScheduled, JobSucceeded and JobFailed.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// JobName is the task's Job.
	// +optional
	JobName string `json:"jobName,omitempty"`
	// ArtifactDigest is the manifest digest of the render the Job pushed.
	// +optional
	ArtifactDigest string `json:"artifactDigest,omitempty"`
	// Message is the render's error when the Job failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// GetConditions returns the status conditions.
func (in *RenderTask) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions.
func (in *RenderTask) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=rt
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Instance",type=string,JSONPath=`.spec.instance.name`
// +kubebuilder:printcolumn:name="Succeeded",type=string,JSONPath=`.status.conditions[?(@.type=="JobSucceeded")].status`
// +kubebuilder:printcolumn:name="Failed",type=string,JSONPath=`.status.conditions[?(@.type=="JobFailed")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// RenderTask is one render of a ModuleInstance in a Kubernetes Job, in cairn's
// namespace (Platform.spec.render.mode: Job). The controller creates it, named from
// the instance and its input digest, with a config Secret and a Job it owns.
type RenderTask struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RenderTaskSpec   `json:"spec,omitempty"`
	Status RenderTaskStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// RenderTaskList is a list of RenderTasks.
type RenderTaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RenderTask `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RenderTask{}, &RenderTaskList{})
}
