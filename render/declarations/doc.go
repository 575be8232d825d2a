// Package declarations owns the loading of a platform repository's declarations: it reads
// every cairn.dev/v1alpha1 document (Platform, Registries, ModuleInstances) from a tree,
// decodes them strictly, validates them and their references, and orders the instances by
// dependsOn.
//
// Load separates three kinds of problems. Repository-level problems (no Platform, two
// Platforms, an invalid Platform, a dangling Platform reference) are returned as the error
// of Load. A problem with one document or instance is collected in
// Set.Invalid and leaves the rest of the repository usable: an invalid instance is left
// out of Set.Instances and the reconciler keeps its last good state. A file that cannot be
// parsed at all, or a document whose identity cannot be read, is listed in Set.Unparsed:
// the instances it declares are unknown, so nothing may be deleted on that revision.
//
// Tenants: a file under a tenant's paths (Platform.spec.tenants) belongs to it. Its
// instances are checked against the tenant (namespaces, ServiceAccount, limits) and
// Set.Tenant names it; a Platform or Registry document there is refused, so a tenant can
// neither replace nor shadow the Platform or a Registry.
//
// Every problem is an *Error with a CamelCase reason and the file and line of the document
// or, where it can be found, of the offending field. Input is treated as hostile: files are
// capped in size before parsing, nesting is capped in depth and alias expansion is capped in
// nodes and bytes, so a YAML bomb is rejected in bounded time and memory. The caps are per
// file, so one junk file fails only itself: the first pass reads the files within the
// default cap (1 MiB, and at most the Options ceilings of documents); once the Platform is
// known, each file is held to its own caps (the Platform's spec.limits, tightened by the
// tenant owning the file) and the larger files, left unread so far, are read only when
// their cap allows. A file over its caps is listed in Set.Unparsed.
//
// The loader applies no defaults: values are left as they are written.
package declarations
