package forge

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// validName is what a provider name may look like: it is a URL path segment
// and a flag value.
var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Registry holds the forge providers cairn knows, by name. It is built once
// and only read afterwards, so it is safe for concurrent use.
type Registry struct {
	byName map[string]Provider
	names  []string
}

// NewRegistry returns a Registry of providers. Names must be valid and
// unique.
func NewRegistry(providers ...Provider) (*Registry, error) {
	r := &Registry{byName: map[string]Provider{}}
	for _, p := range providers {
		name := p.Name()
		switch {
		case !validName.MatchString(name):
			return nil, fmt.Errorf("%w: forge provider name %q is not a lowercase path segment", ErrInvalid, name)
		case r.byName[name] != nil:
			return nil, fmt.Errorf("%w: forge provider %q registered twice", ErrInvalid, name)
		}
		r.byName[name] = p
		r.names = append(r.names, name)
	}
	sort.Strings(r.names)
	return r, nil
}

// MustRegistry is NewRegistry for a fixed list of providers; it panics on an
// invalid or repeated name.
func MustRegistry(providers ...Provider) *Registry {
	r, err := NewRegistry(providers...)
	if err != nil {
		panic(err)
	}
	return r
}

// Lookup returns the provider called name; the error lists the registered
// names.
func (r *Registry) Lookup(name string) (Provider, error) {
	if p := r.byName[name]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("unknown forge %q (known: %s)", cut(name, 40), strings.Join(r.names, ", "))
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string { return append([]string(nil), r.names...) }

// Hooks returns one Hook per registered provider, all with secret: the
// Receiver then serves /hooks/<name> for each of them.
func (r *Registry) Hooks(secret string) []Hook {
	hooks := make([]Hook, 0, len(r.names))
	for _, name := range r.names {
		hooks = append(hooks, Hook{Provider: r.byName[name], Secret: secret})
	}
	return hooks
}
