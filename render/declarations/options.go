package declarations

import cairnv1 "cairn.dev/cairn/api/v1alpha1"

// Defaults of Options.
const (
	// DefaultMaxFileBytes is the ceiling on the size of one file, whatever the Platform
	// allows: the largest file the tree keeps (gitsource's default cap).
	DefaultMaxFileBytes int64 = 16 << 20
	// DefaultMaxFileDocuments is the ceiling on the documents of one file, whatever
	// the Platform allows.
	DefaultMaxFileDocuments = 10_000
	// MaxDepth is the deepest nesting of mappings and sequences a document may have.
	MaxDepth = 100
)

// Options bound what Load reads.
type Options struct {
	// Path is the directory inside the tree to read, "." (the root) when empty.
	Path string
	// MaxFileBytes is the ceiling on the size of one file: larger files are rejected
	// unread, whatever the Platform's spec.limits.maxFileBytes says. Below it, a file is
	// capped by the Platform's limits, tightened by those of the tenant owning it.
	MaxFileBytes int64
	// MaxFileDocuments is the ceiling on the YAML documents of one file, whatever the
	// Platform's spec.limits.maxFileDocuments says.
	MaxFileDocuments int
	// Trusted, when set, is the spec of the Platform last synced (the Platform CR's):
	// its tenants alone decide which Platform documents lie under a tenant's paths and
	// are refused. Without it every decoded Platform's tenants do, so a tenant that
	// names the real Platform's file in the tenant paths of a Platform it smuggles in
	// gets both refused; with it the smuggled one alone is.
	Trusted *cairnv1.PlatformSpec
	// Root is the directory of the repository that the tree given to Load is (the
	// sync's --path), "." when empty. Kustomize paths are relative to the repository
	// root, tenants' paths to the tree: a tenant's kustomize path is checked against
	// its paths through Root.
	Root string
	// CairnNamespace is cairn's own namespace: no instance may live there and no
	// tenant's namespace pattern may match it, whatever the Platform allows. Empty:
	// not checked.
	CairnNamespace string
}

// DefaultOptions returns the options Load uses for fields left at zero.
func DefaultOptions() Options {
	return Options{Path: ".", MaxFileBytes: DefaultMaxFileBytes, MaxFileDocuments: DefaultMaxFileDocuments}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Path == "" {
		o.Path = d.Path
	}
	if o.Root == "" {
		o.Root = "."
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = d.MaxFileBytes
	}
	if o.MaxFileDocuments <= 0 {
		o.MaxFileDocuments = d.MaxFileDocuments
	}
	return o
}

// expansionBudget bounds what the documents of a file of size bytes may expand to
// through aliases: nodes visited and JSON bytes written. Without aliases a file has fewer
// nodes than bytes, and JSON escaping grows text at most sixfold, so honest files stay far
// below it; a bomb is cut off after work proportional to its own size.
func expansionBudget(size int) budget {
	return budget{nodes: 4*int64(size) + 10_000, bytes: 16*int64(size) + 256<<10}
}
