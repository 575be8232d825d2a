package reconciler

import (
	"path"
	"strings"
	"time"

	"cairn.dev/cairn/gitsource"
)

// Revision is one state of the platform repository handed to the engine.
type Revision struct {
	// SHA is the commit, or "dir:<digest>" for a plain directory.
	SHA string
	// Tree is the whole repository at SHA, regular files only.
	Tree *gitsource.Tree
	// Message is the commit message; its trailers are read (cairn-allow-prune).
	Message string
	// Changed lists the repository paths changed since Base; nil when unknown, which
	// makes every instance a candidate (correctness never depends on the diff).
	Changed []string
	// Base is the revision Changed is relative to.
	Base string
	// Committed is the commit's committer time (zero for a directory): the start of
	// the push-to-Ready time (cairn_push_to_ready_seconds).
	Committed time.Time
	// Fetch is how long reading the revision from its repository took (fetch, tree,
	// commit, diff; zero for a directory).
	Fetch time.Duration
	// Refreshed names the Registries whose Secrets or ConfigMaps (credentials, cosign
	// keys, CA bundles) changed in the cluster since the last sync: the instances
	// that use one render and verify again, whatever the diff says.
	Refreshed []string
}

// changes holds the changed paths relative to the declarations path: the prune
// guards read which files a commit touched (see prune_owner.go). Whether an
// instance is affected is decided by its input digest, not by the paths.
type changes struct {
	known bool
	paths []string
}

func newChanges(rev Revision, root string) changes {
	if rev.Changed == nil {
		return changes{}
	}
	c := changes{known: true}
	prefix := strings.TrimPrefix(path.Clean(root)+"/", "./")
	for _, p := range rev.Changed {
		if prefix == "" || strings.HasPrefix(p, prefix) {
			c.paths = append(c.paths, strings.TrimPrefix(p, prefix))
		}
	}
	return c
}

// touches reports whether a file or anything under a directory (relative to the
// declarations path) changed; an unknown diff touches everything.
func (c changes) touches(p string) bool {
	return !c.known || touchedIn(c.paths, p)
}

func touchedIn(changed []string, p string) bool {
	p = strings.TrimPrefix(path.Clean(p), "./")
	for _, c := range changed {
		if p == "." || c == p || strings.HasPrefix(c, p+"/") {
			return true
		}
	}
	return false
}
