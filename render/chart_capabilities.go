package render

import (
	"slices"
	"strconv"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	k8sversion "k8s.io/apimachinery/pkg/util/version"
)

// DefaultKubeVersion is the Kubernetes version charts see in
// .Capabilities.KubeVersion, and that their kubeVersion must allow, when no
// cluster tells them its own: the one of k8s.io/client-go in go.mod, as
// Helm's release builds take theirs from client-go (the SDK's own default,
// v1.20, is far older than the API versions it lists).
// TestChartKubeVersionMatchesClientGo keeps the two together.
const DefaultKubeVersion = "v1.37.0"

// Capabilities are what a chart sees of its cluster in .Capabilities, and
// what its Chart.yaml kubeVersion is checked against: the cluster's, read by
// discovery, as `helm install` gives them, or chosen, as `helm template
// --kube-version --api-versions` does. A nil *Capabilities, and each empty
// field, is `helm template`'s default.
type Capabilities struct {
	// KubeVersion is the Kubernetes version, as the API server reports it
	// (e.g. "v1.37.2", "v1.30.5-gke.1014001"); .Capabilities.KubeVersion.Major
	// and .Minor are its numbers. "" is DefaultKubeVersion.
	KubeVersion string `json:"kubeVersion,omitempty"`
	// APIVersions are the API versions served, as `helm install` lists them
	// from discovery: every group/version ("apps/v1") and group/version/kind
	// ("apps/v1/Deployment"). Empty is Helm's default set (DefaultAPIVersions).
	APIVersions []string `json:"apiVersions,omitempty"`
}

// DefaultAPIVersions are the API versions charts see when no cluster tells
// them its own: Helm's default set, the group/versions that client-go knows
// (`helm template` adds its --api-versions to these).
func DefaultAPIVersions() []string {
	return slices.Clone(chartutil.DefaultVersionSet)
}

// helm returns the capabilities in Helm's form: its defaults with ours set.
func (c *Capabilities) helm() (*chartutil.Capabilities, error) {
	out := chartutil.DefaultCapabilities.Copy()
	version := DefaultKubeVersion
	if c != nil && c.KubeVersion != "" {
		version = c.KubeVersion
	}
	v, err := k8sversion.ParseGeneric(version)
	if err != nil {
		return nil, newError(ReasonRenderFailed, "invalid Kubernetes version %q of the capabilities: %w", version, err)
	}
	out.KubeVersion = chartutil.KubeVersion{
		Version: version,
		Major:   strconv.FormatUint(uint64(v.Major()), 10),
		Minor:   strconv.FormatUint(uint64(v.Minor()), 10),
	}
	if c != nil && len(c.APIVersions) > 0 {
		out.APIVersions = slices.Clone(c.APIVersions)
	}
	return out, nil
}

// checkKubeVersion refuses a chart whose kubeVersion excludes the Kubernetes
// version of caps, as `helm install` and `helm template` do.
func checkKubeVersion(c *chart.Chart, caps *chartutil.Capabilities) error {
	kv := c.Metadata.KubeVersion
	if kv == "" || chartutil.IsCompatibleRange(kv, caps.KubeVersion.Version) {
		return nil
	}
	return newError(ReasonChartInvalid, "chart %s %s requires kubeVersion %s, which excludes Kubernetes %s",
		c.Name(), c.Metadata.Version, kv, caps.KubeVersion.Version)
}
