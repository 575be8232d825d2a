package declarations

import (
	"strconv"
	"strings"
)

// Reasons carried by an *Error.
const (
	// ReasonInvalidDeclaration is a document that does not decode or validate.
	ReasonInvalidDeclaration = "InvalidDeclaration"
	// ReasonInvalidYAML is a file that is not valid YAML.
	ReasonInvalidYAML = "InvalidYAML"
	// ReasonTooLarge is a file over the size cap or a document that expands beyond the caps.
	ReasonTooLarge = "TooLarge"
	// ReasonTooManyDocuments is a file with more documents than its cap.
	ReasonTooManyDocuments = "TooManyDocuments"
	// ReasonDuplicateDeclaration is a (kind, namespace, name) declared more than once.
	ReasonDuplicateDeclaration = "DuplicateDeclaration"
	// ReasonDuplicatePlatform is a repository with more than one Platform.
	ReasonDuplicatePlatform = "DuplicatePlatform"
	// ReasonMissingPlatform is a repository without a Platform.
	ReasonMissingPlatform = "MissingPlatform"
	// ReasonInvalidModule is an instance whose module source is wrong.
	ReasonInvalidModule = "InvalidModule"
	// ReasonDanglingReference is a reference to a Registry or instance that is not declared.
	ReasonDanglingReference = "DanglingReference"
	// ReasonNamespaceDenied is an instance in a namespace the Platform does not allow.
	ReasonNamespaceDenied = "NamespaceDenied"
	// ReasonDependencyCycle is an instance on a dependsOn cycle.
	ReasonDependencyCycle = "DependencyCycle"
	// ReasonNotAvailable is a declared value of a feature this cairn does not have yet.
	ReasonNotAvailable = "NotAvailable"
	// ReasonTenantViolation is a declaration under a tenant's paths that leaves the
	// tenant's bounds, a file two tenants claim, or a Platform whose tenants' bounds
	// meet (a file or namespace two tenants' patterns match, or cairn's namespace).
	ReasonTenantViolation = "TenantViolation"
	// ReasonLimitExceeded is an instance setting more than the Platform's limits grant.
	ReasonLimitExceeded = "LimitExceeded"
	// ReasonInvalidPath is an Options.Path that is not a directory of the tree.
	ReasonInvalidPath = "InvalidPath"
)

// Error is one problem found in the declarations.
type Error struct {
	// Reason is a CamelCase reason, one of the Reason constants.
	Reason string
	// File is the path of the file relative to the root of the tree.
	File string
	// Line is the 1-based line of the field, or of the document when the field is unknown.
	Line int
	// Kind is the kind of the object, when known.
	Kind string
	// Object is "namespace/name" of a ModuleInstance, or the name of a Platform or Registry.
	Object string
	// Field is the path of the offending field, e.g. spec.module.cue.version.
	Field string
	// Message says what is wrong.
	Message string
}

// Error formats the error as "file:line: Kind object: field: message", leaving out the
// parts that are empty.
func (e *Error) Error() string {
	var parts []string
	if loc := e.location(); loc != "" {
		parts = append(parts, loc)
	}
	if obj := strings.TrimSpace(e.Kind + " " + e.Object); obj != "" {
		parts = append(parts, obj)
	}
	if e.Field != "" {
		parts = append(parts, e.Field)
	}
	if e.Message != "" {
		parts = append(parts, e.Message)
	}
	return strings.Join(parts, ": ")
}

func (e *Error) location() string {
	if e.File == "" || e.Line <= 0 {
		return e.File
	}
	return e.File + ":" + strconv.Itoa(e.Line)
}

// at returns "file:line" of a document or field, for messages naming another location.
func at(file string, line int) string {
	return (&Error{File: file, Line: line}).location()
}
