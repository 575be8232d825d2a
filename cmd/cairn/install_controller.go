package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"cairn.dev/cairn/manifests/controller"
)

// defaultImageRefFile is where `make image` writes the digest reference of the image
// it pushed.
const defaultImageRefFile = "bin/image.ref"

// controllerInstallFlags are the flags of `cairn install --controller`: the source and
// forge flags of `cairn controller`, whose credential files are stored in Secrets.
type controllerInstallFlags struct {
	opts                              controller.Options
	image                             string
	passwordFile, sshKey, knownHosts  string
	forgeTokenFile, webhookSecretFile string
	flags                             *pflag.FlagSet
}

func (f *controllerInstallFlags) register(cmd *cobra.Command) {
	f.opts = controller.DefaultOptions()
	fl := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	fl.StringVar(&f.opts.Repo, "repo", "", "the platform repository's Git URL (https://, ssh://)")
	fl.StringVar(&f.opts.Branch, "branch", f.opts.Branch, "the branch to follow")
	fl.StringVar(&f.opts.Path, "path", f.opts.Path, "the directory of the repository holding the declarations")
	fl.DurationVar(&f.opts.Interval, "interval", f.opts.Interval, "how often the branch is polled")
	fl.Int32Var(&f.opts.Replicas, "replicas", f.opts.Replicas, "replicas of the controller (one leads)")
	fl.IntVar(&f.opts.Shards, "shards", f.opts.Shards, "divide the instance reconciles into this many shards spread over the replicas (`cairn controller --shards`); 0: the leader reconciles every instance in its sync")
	fl.StringVar(&f.image, "image", "", "cairn's image by digest, HOST/REPOSITORY@sha256:... (default: the content of "+defaultImageRefFile+", which `make image` writes)")
	fl.StringVar(&f.opts.GitUsername, "git-username", "", "user name for HTTPS Git")
	fl.StringVar(&f.passwordFile, "git-password-file", "", "file holding the HTTPS Git password or token (stored in the Secret "+controller.GitSecret+")")
	fl.StringVar(&f.sshKey, "ssh-key", "", "SSH private key file for ssh:// Git URLs (stored in the Secret "+controller.GitSecret+")")
	fl.StringVar(&f.knownHosts, "known-hosts", "", "known_hosts file the SSH host key is checked against")
	fl.StringVar(&f.opts.Forge, "forge", "", "post commit statuses and pull-request plans to this forge")
	fl.StringVar(&f.opts.ForgeURL, "forge-url", "", "the forge's URL")
	fl.StringVar(&f.opts.ForgeRepo, "forge-repo", "", "owner/name of the repository on the forge (default: from --repo)")
	fl.StringVar(&f.opts.StatusURL, "status-url", "", "URL linked from every commit status")
	fl.StringVar(&f.forgeTokenFile, "forge-token-file", "", "file holding the forge access token (stored in the Secret "+controller.ForgeSecret+")")
	fl.StringVar(&f.webhookSecretFile, "webhook-secret-file", "",
		"file holding the webhook secret (stored in the Secret "+controller.WebhookSecret+"); the controller then serves webhooks")
	fl.BoolVar(&f.opts.AllowApplyAsController, "allow-apply-as-controller", false,
		"bind cairn's ServiceAccount to cluster-admin, so that instances naming no ServiceAccount (and no Platform defaultServiceAccount) apply as cairn itself")
	fl.BoolVar(&f.opts.NoWorkloadWatch, "no-workload-watch", false,
		"do not let cairn list and watch Deployments, StatefulSets and DaemonSets cluster-wide: health waits then poll each object as the instance's ServiceAccount")
	fl.BoolVar(&f.opts.NoDashboard, "no-dashboard", false,
		"serve no dashboard, and leave out the rights it needs (creating TokenReviews and SubjectAccessReviews)")
	cmd.Flags().AddFlagSet(fl)
	f.flags = fl
}

// changed reports whether any controller flag was given.
func (f *controllerInstallFlags) changed() bool {
	changed := false
	f.flags.VisitAll(func(fl *pflag.Flag) { changed = changed || fl.Changed })
	return changed
}

// options are the controller's options: the flags, the image, and the contents of the
// credential files.
func (f *controllerInstallFlags) options(namespace string) (controller.Options, error) {
	o := f.opts
	o.Namespace = namespace
	image, err := f.imageRef()
	if err != nil {
		return o, err
	}
	o.Image = image
	for _, c := range []struct {
		flag, path string
		into       *[]byte
	}{
		{"--git-password-file", f.passwordFile, &o.Credentials.GitPassword}, {"--ssh-key", f.sshKey, &o.Credentials.SSHKey},
		{"--known-hosts", f.knownHosts, &o.Credentials.KnownHosts}, {"--forge-token-file", f.forgeTokenFile, &o.Credentials.ForgeToken},
		{"--webhook-secret-file", f.webhookSecretFile, &o.Credentials.WebhookSecret},
	} {
		if *c.into, err = readCredentialFile(c.flag, c.path); err != nil {
			return o, err
		}
	}
	return o, nil
}

// imageRef is --image, else the reference `make image` left in bin/image.ref.
func (f *controllerInstallFlags) imageRef() (string, error) {
	if f.image != "" {
		return f.image, nil
	}
	b, err := os.ReadFile(defaultImageRefFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", nil // Validate says what to do
	case err != nil:
		return "", fmt.Errorf("failed to read %s: %w", defaultImageRefFile, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func readCredentialFile(flag, path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", flag, err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return nil, fmt.Errorf("%s is empty", flag)
	}
	return b, nil
}
