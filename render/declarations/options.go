package declarations

// Defaults of Options.
const (
	DefaultMaxFileBytes int64 = 1 << 20
	DefaultMaxDocuments       = 10_000
	// MaxDepth is the deepest nesting of mappings and sequences a document may have.
	MaxDepth = 100
)

// Options bound what Load reads.
type Options struct {
	// Path is the directory inside the tree to read, "." (the root) when empty.
	Path string
	// MaxFileBytes caps the size of one file; larger files are rejected unread.
	MaxFileBytes int64
	// MaxDocuments caps the number of YAML documents in the whole tree.
	MaxDocuments int
}

// DefaultOptions returns the options Load uses for fields left at zero.
func DefaultOptions() Options {
	return Options{Path: ".", MaxFileBytes: DefaultMaxFileBytes, MaxDocuments: DefaultMaxDocuments}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Path == "" {
		o.Path = d.Path
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = d.MaxFileBytes
	}
	if o.MaxDocuments <= 0 {
		o.MaxDocuments = d.MaxDocuments
	}
	return o
}

// expansionBudget bounds what the documents of one file may expand to through aliases:
// nodes visited and JSON bytes written. A file without aliases has at most about one node
// per two bytes and JSON escaping grows text at most sixfold, so honest files never reach it.
func (o Options) expansionBudget() budget {
	return budget{nodes: o.MaxFileBytes, bytes: 8 * o.MaxFileBytes}
}
