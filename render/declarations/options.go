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

// expansionBudget bounds what the documents of a file of size bytes may expand to
// through aliases: nodes visited and JSON bytes written. Without aliases a file has fewer
// nodes than bytes, and JSON escaping grows text at most sixfold, so honest files stay far
// below it; a bomb is cut off after work proportional to its own size.
func expansionBudget(size int) budget {
	return budget{nodes: 4*int64(size) + 10_000, bytes: 16*int64(size) + 256<<10}
}
