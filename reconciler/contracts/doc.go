// Package contracts owns the provider contracts between instances, inferred from
// their renders and never authored: an instance whose render holds a
// CustomResourceDefinition provides that group/kind, and one whose render holds
// objects of a kind another instance provides requires that provider. It also
// finds the cycles that dependsOn and contract edges make together, and which of
// an instance's requirements its providers have not served yet.
package contracts
