package controller

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// DefaultNamespace is cairn's namespace (reconciler.DefaultNamespace).
const DefaultNamespace = "cairn-system"

// Name names the controller's ServiceAccount, Deployment, Service, PodDisruptionBudget,
// ClusterRole, Role and their bindings.
const Name = "cairn-controller"

// Ports of the controller's container.
const (
	MetricsPort = 8080
	ProbePort   = 8081
	WebhookPort = 9292
	// DashboardPort serves the dashboard (docs/dashboard.md).
	DashboardPort = 8090
)

// Options are the settings of the controller's manifests.
type Options struct {
	// Namespace is cairn's namespace: the controller, its Lease and the Secrets and
	// ConfigMaps Registries name live there.
	Namespace string
	// Image is the controller's image, by digest (HOST/REPO@sha256:...).
	Image string
	// Replicas of the Deployment (2: one leads, one waits).
	Replicas int32
	// Shards divides the instance reconciles over the replicas (`cairn controller
	// --shards`, written on the Deployment whatever its value); 0: the leader
	// reconciles every instance in its sync.
	Shards int
	// Repo, Branch, Path and Interval are the source flags of `cairn controller`.
	Repo, Branch, Path string
	Interval           time.Duration
	// GitUsername is the HTTPS Git user name (its password is Credentials.GitPassword).
	GitUsername string
	// Forge, ForgeURL, ForgeRepo and StatusURL are the forge flags (token: Credentials.ForgeToken).
	Forge, ForgeURL, ForgeRepo, StatusURL string
	// Credentials are the contents of the credential files, kept in Secrets.
	Credentials Credentials
	// AllowApplyAsController binds cairn's ServiceAccount to cluster-admin, so that
	// instances naming no ServiceAccount (under a Platform without
	// defaultServiceAccount) apply as cairn itself. Off by default.
	AllowApplyAsController bool
	// NoWorkloadWatch leaves list and watch of Deployments, StatefulSets and DaemonSets
	// out of the ClusterRole: the health waits then poll each object as the instance's
	// ServiceAccount (docs/controller.md, Permissions).
	NoWorkloadWatch bool
	// NoDashboard serves no dashboard, and leaves out the rights it needs
	// (TokenReviews, SubjectAccessReviews).
	NoDashboard bool
}

// Credentials are the contents of the controller's credential files. Each one given
// is stored in a Secret of cairn's namespace and mounted into the controller as a
// file, whose path its flag names; none enters the Deployment.
type Credentials struct {
	GitPassword   []byte // --git-password-file
	SSHKey        []byte // --ssh-key
	KnownHosts    []byte // --known-hosts
	ForgeToken    []byte // --forge-token-file
	WebhookSecret []byte // --webhook-secret-file (the webhook receiver listens when set)
}

// DefaultOptions are the options of a default install of the repository repo.
func DefaultOptions() Options {
	return Options{Namespace: DefaultNamespace, Replicas: 2, Shards: 1, Branch: "main", Path: ".", Interval: time.Minute}
}

// Validate reports the first option that cannot make a working controller.
func (o Options) Validate() error {
	switch {
	case o.Namespace == "":
		return fmt.Errorf("the namespace is empty")
	case o.Repo == "":
		return fmt.Errorf("--repo is required: the Git URL of the platform repository")
	case !strings.Contains(o.Repo, "://") && !strings.Contains(o.Repo, "@"):
		return fmt.Errorf("--repo %q is not a Git URL: the controller reads the repository from Git, not from a directory", o.Repo)
	case o.Interval <= 0:
		return fmt.Errorf("--interval must be positive")
	case len(o.Credentials.SSHKey) > 0 && len(o.Credentials.KnownHosts) == 0:
		return fmt.Errorf("--known-hosts is required with --ssh-key")
	case len(o.Credentials.GitPassword) > 0 && len(o.Credentials.SSHKey) > 0:
		return fmt.Errorf("give either --git-password-file or --ssh-key, not both")
	case o.Forge == "" && len(o.Credentials.ForgeToken) > 0:
		return fmt.Errorf("--forge-token-file needs --forge")
	case o.Forge != "" && len(o.Credentials.ForgeToken) == 0:
		return fmt.Errorf("--forge needs --forge-token-file")
	}
	return ValidateImage(o.Image)
}

// ValidateImage accepts only a reference by digest: the Deployment runs exactly the
// image that was built and signed, never whatever a tag points to later.
func ValidateImage(ref string) error {
	if ref == "" {
		return fmt.Errorf("no image: give --image HOST/REPOSITORY@sha256:<digest>, or run `make image` (it writes bin/image.ref)")
	}
	if _, err := name.NewDigest(ref, name.StrictValidation); err != nil {
		return fmt.Errorf("image %q is not a reference by digest (HOST/REPOSITORY@sha256:<digest>), which the Deployment needs: %w", ref, err)
	}
	return nil
}
