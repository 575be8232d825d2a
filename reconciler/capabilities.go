package reconciler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
)

// clusterCapabilities are what the charts of one sync see of the cluster (see
// render.Capabilities): discovered once, the first time a chart instance needs them.
type clusterCapabilities struct {
	caps   *render.Capabilities
	digest string // of caps; recorded as status.capabilitiesDigest
	err    error
}

// discoverer is what discoverCapabilities needs of a discovery client.
type discoverer interface {
	ServerVersionWithContext(ctx context.Context) (*version.Info, error)
	ServerGroupsAndResourcesWithContext(ctx context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error)
}

// discoverCapabilities reads the cluster's Kubernetes version and the API versions it
// serves, as `helm install` does: every group/version and group/version/kind of
// discovery. A group whose discovery failed (an APIService that does not answer)
// keeps its group/versions without their kinds, as in Helm.
func discoverCapabilities(ctx context.Context, dc discoverer) (*render.Capabilities, error) {
	info, err := dc.ServerVersionWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to read the cluster's Kubernetes version: %w", err)
	}
	groups, resources, err := dc.ServerGroupsAndResourcesWithContext(ctx)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("failed to discover the cluster's API versions: %w", err)
	}
	return &render.Capabilities{KubeVersion: info.GitVersion, APIVersions: versionSet(groups, resources)}, nil
}

// versionSet lists the group/versions and group/version/kinds of discovery, sorted.
func versionSet(groups []*metav1.APIGroup, resources []*metav1.APIResourceList) []string {
	set := map[string]bool{}
	for _, g := range groups {
		for _, v := range g.Versions {
			set[v.GroupVersion] = true
		}
	}
	for _, list := range resources {
		for _, res := range list.APIResources {
			set[path.Join(list.GroupVersion, res.Kind)] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// capabilities discovers the cluster's capabilities once per sync (plan, drift check).
func (s *RevisionState) capabilities(ctx context.Context) *clusterCapabilities {
	s.capsOnce.Do(func() {
		c := &clusterCapabilities{err: errors.New("failed to discover the cluster's capabilities: no discovery client")}
		if s.e.cluster != nil && s.e.cluster.discovery != nil {
			c.caps, c.err = discoverCapabilities(ctx, s.e.cluster.discovery)
		}
		if c.err == nil {
			c.digest = digestJSON(c.caps)
		}
		s.caps = c
	})
	return s.caps
}

// chartCapabilities are the capabilities the chart of instance key renders with; a cluster that could
// not be discovered fails the render (transient: it is retried), never falls back to
// defaults, which could drop objects that the cluster's APIs would keep.
func (s *RevisionState) chartCapabilities(ctx context.Context, key string) (*render.Capabilities, *outcome.Failure) {
	c := s.capabilities(ctx)
	if c.err != nil {
		return nil, outcome.NewTransient(cairnv1.ReasonRenderFailed, fmt.Errorf("failed to render %s: %w", key, c.err))
	}
	return c.caps, nil
}

// capabilitiesChanged reports whether r is a chart (or Timoni) instance last rendered
// against other capabilities than the cluster's now (a newly served API, an upgrade),
// so that it renders again. It needs the capabilities discovered (discoverForCharts,
// capabilities), and is false when they could not be.
func (v *clusterView) capabilitiesChanged(p *instancePlan) bool {
	c := v.caps
	if !usesCapabilities(p.mi) || p.was == nil || c == nil || c.err != nil {
		return false
	}
	return p.was.Status.CapabilitiesDigest != c.digestFor(p.mi)
}

// discoverForCharts discovers the cluster's capabilities when the revision declares a
// chart instance: only chart instances need them.
func (s *RevisionState) discoverForCharts(ctx context.Context) {
	for _, mi := range s.set.Instances {
		if usesCapabilities(mi) {
			s.capabilities(ctx)
			return
		}
	}
}

// capabilitiesDigest is what r's status records of the capabilities its render saw:
// the cluster's for a chart instance, its Kubernetes version for a Timoni module, none
// for the others.
func (s *RevisionState) capabilitiesDigest(ctx context.Context, mi *cairnv1.ModuleInstance) string {
	if !usesCapabilities(mi) {
		return ""
	}
	return s.capabilities(ctx).digestFor(mi)
}

// offlineCapabilities are the capabilities of the charts of a render outside a sync
// (the base and head renders of a planned change, whose diff they only show): the
// cluster's, or Helm's defaults when it cannot be read.
func (e *Engine) offlineCapabilities(ctx context.Context) *render.Capabilities {
	if e.cluster == nil || e.cluster.discovery == nil {
		return nil
	}
	caps, err := discoverCapabilities(ctx, e.cluster.discovery)
	if err != nil {
		return nil
	}
	return caps
}
