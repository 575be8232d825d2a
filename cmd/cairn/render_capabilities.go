package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"helm.sh/helm/v3/pkg/chartutil"

	"cairn.dev/cairn/render"
)

// capabilityFlags are what charts see of a cluster in `cairn render`, as `helm
// template` takes them.
type capabilityFlags struct {
	kubeVersion string
	apiVersions []string
}

func (f *capabilityFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeVersion, "kube-version", "",
		"Kubernetes version charts see in .Capabilities.KubeVersion and their kubeVersion is checked against, and Timoni modules in their kubeVersion tag (default "+render.DefaultKubeVersion+"); sync and plan use the cluster's")
	cmd.Flags().StringSliceVarP(&f.apiVersions, "api-versions", "a", nil,
		"API versions charts see in .Capabilities.APIVersions besides Helm's defaults, e.g. monitoring.coreos.com/v1/ServiceMonitor (repeatable, or a comma list); sync and plan use the cluster's")
}

// capabilities are the flags as render capabilities: nil when neither is given
// (`helm template`'s defaults).
func (f *capabilityFlags) capabilities() (*render.Capabilities, error) {
	if f.kubeVersion == "" && len(f.apiVersions) == 0 {
		return nil, nil
	}
	caps := &render.Capabilities{}
	if f.kubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(f.kubeVersion)
		if err != nil {
			return nil, fmt.Errorf("invalid --kube-version %q: %w", f.kubeVersion, err)
		}
		caps.KubeVersion = kv.Version
	}
	if len(f.apiVersions) > 0 {
		caps.APIVersions = append(render.DefaultAPIVersions(), f.apiVersions...)
	}
	return caps, nil
}
