package v1alpha1

// Labels and annotations of the Secrets cairn generates (spec.secrets), beside the
// managed-by and instance labels every object of an instance carries.
const (
	// GeneratedLabel is "true" on every generated Secret and copy.
	GeneratedLabel = "cairn.dev/generated"
	// GeneratedAtAnnotation is when the values were generated (RFC 3339); rotateAfter
	// counts from it.
	GeneratedAtAnnotation = "cairn.dev/generated-at"
	// SecretSpecAnnotation is the digest of the generator the values came from (data
	// generators and tls, never a value): when the declaration's differs, a Secret
	// that is not once is generated again.
	SecretSpecAnnotation = "cairn.dev/secret-spec"
	// CopiedFromAnnotation is <namespace>/<name> of the Secret a toNamespaces copy holds the values of.
	CopiedFromAnnotation = "cairn.dev/copied-from"
)

// ReasonSecretConflict: a generated Secret clashes with a rendered object, or exists
// and is not this instance's.
const ReasonSecretConflict = "SecretConflict"
