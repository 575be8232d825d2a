package render

import (
	"context"
	"fmt"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// Lookup reads the live cluster for a chart's `lookup` function: the object
// apiVersion/kind namespace/name, or, with name "", the list of such objects in
// namespace ("" for every namespace), as its content. An object that does not
// exist is an error for which apierrors.IsNotFound holds (the template then gets
// an empty map, as in Helm). It only reads; its errors carry no credentials.
type Lookup func(apiVersion, kind, namespace, name string) (map[string]any, error)

// lookupCall is one read of a chart's lookup.
type lookupCall struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
}

func (c lookupCall) String() string {
	s := c.APIVersion + " " + c.Kind
	if c.Namespace != "" {
		s += " in " + c.Namespace
	}
	if c.Name != "" {
		s += " " + c.Name
	}
	return s
}

// lookupProvider gives Helm's lookup clients that only read through a Lookup, and
// counts the reads.
type lookupProvider struct {
	lookup Lookup
	reads  *atomic.Int64
}

// GetClientFor returns a client of the kind; the Lookup knows its scope.
func (p lookupProvider) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	return &lookupResource{p: p, call: lookupCall{APIVersion: apiVersion, Kind: kind}}, true, nil
}

func (p lookupProvider) read(call lookupCall) (map[string]any, error) {
	p.reads.Add(1)
	obj, err := p.lookup(call.APIVersion, call.Kind, call.Namespace, call.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("lookup %s: %w", call, err)
	}
	return obj, err
}

// lookupResource is a client of one kind that gets and lists, all that Helm's
// lookup asks of it (the embedded interface is nil: anything else panics).
type lookupResource struct {
	dynamic.NamespaceableResourceInterface
	p    lookupProvider
	call lookupCall
}

func (r *lookupResource) Namespace(ns string) dynamic.ResourceInterface {
	c := *r
	c.call.Namespace = ns
	return &c
}

func (r *lookupResource) Get(_ context.Context, name string, _ metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	call := r.call
	call.Name = name
	obj, err := r.p.read(call)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

func (r *lookupResource) List(_ context.Context, _ metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	obj, err := r.p.read(r.call)
	if err != nil {
		return nil, err
	}
	list := &unstructured.UnstructuredList{}
	list.SetUnstructuredContent(obj)
	return list, nil
}

// notFound is the error of a lookup of an object that does not exist.
func notFound(call lookupCall) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: call.Kind}, call.Name)
}

// renderWithLookup renders the templates: with a Lookup, `lookup` reads through
// it (each read counted in reads), else it returns an empty map. DNS lookups are
// off either way.
func renderWithLookup(c *chart.Chart, top chartutil.Values, lookup Lookup, reads *atomic.Int64) (map[string]string, error) {
	if lookup == nil {
		return engine.Render(c, top)
	}
	return engine.RenderWithClientProvider(c, top, lookupProvider{lookup: lookup, reads: reads})
}
