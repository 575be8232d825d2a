package main

import (
	"context"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/loop"
)

// repoFlags select the platform repository and the revision to read.
type repoFlags struct {
	repo, ref, branch, path string
	cacheDir                string
	timeout                 time.Duration
	username, passwordFile  string
	sshKey, knownHosts      string
	namespace               string
	registryConfig          string
}

func (f *repoFlags) register(cmd *cobra.Command, withRef bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.repo, "repo", ".", "the platform repository: a local directory (read as it is on disk) or a Git URL (https://, ssh://, file://)")
	if withRef {
		fl.StringVar(&f.ref, "ref", "", "a branch or commit SHA to read from Git (a local directory is then read as a Git repository)")
	}
	fl.StringVar(&f.branch, "branch", "main", "the branch to follow")
	fl.StringVar(&f.path, "path", ".", "the directory of the repository holding the declarations")
	fl.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "where Git clones and CUE modules are cached")
	fl.DurationVar(&f.timeout, "git-timeout", time.Minute, "deadline of each Git network step, including ref resolution")
	fl.StringVar(&f.username, "git-username", "", "user name for HTTPS Git (the password or token is read from --git-password-file)")
	fl.StringVar(&f.passwordFile, "git-password-file", "", "file holding the HTTPS password or token")
	fl.StringVar(&f.sshKey, "ssh-key", "", "SSH private key file for ssh:// Git URLs")
	fl.StringVar(&f.knownHosts, "known-hosts", "", "known_hosts file the SSH host key is checked against")
	fl.StringVar(&f.namespace, "namespace", reconciler.DefaultNamespace,
		"cairn's namespace, where the Secrets and ConfigMaps that Registries name live")
	fl.StringVar(&f.registryConfig, "registry-config", "",
		"a docker config.json giving credentials to Registries that name no Secret (never read unless given)")
}

func defaultCacheDir() string {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "cairn")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".cache", "cairn")
	}
	return filepath.Join(os.TempDir(), "cairn-cache")
}

var scpLike = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:`)

// isDir reports whether the repository is a local directory read from disk.
func (f *repoFlags) isDir() bool {
	if f.ref != "" || strings.Contains(f.repo, "://") || scpLike.MatchString(f.repo) {
		return false
	}
	st, err := os.Stat(f.repo)
	return err == nil && st.IsDir()
}

// url returns the Git URL of the repository.
func (f *repoFlags) url() (string, error) {
	if strings.Contains(f.repo, "://") || scpLike.MatchString(f.repo) {
		return f.repo, nil
	}
	abs, err := filepath.Abs(f.repo)
	if err != nil {
		return "", err
	}
	return "file://" + abs, nil
}

// gitOptions are the options of the repository's Git source (its branch: --branch).
func (f *repoFlags) gitOptions() (gitsource.Options, error) {
	url, err := f.url()
	if err != nil {
		return gitsource.Options{}, err
	}
	auth, err := f.auth()
	if err != nil {
		return gitsource.Options{}, err
	}
	return gitsource.Options{
		URL: url, Branch: f.branch, CacheDir: filepath.Join(f.cacheDir, "git"), Auth: auth, Timeout: f.timeout,
		AllowHTTP: isLoopbackHTTP(url),
	}, nil
}

// gitRepo is the Git repository, followed at --ref (a branch or SHA) or --branch.
func (f *repoFlags) gitRepo() (*loop.GitRepo, error) {
	opts, err := f.gitOptions()
	if err != nil {
		return nil, err
	}
	return loop.NewGitRepo(opts, f.ref), nil
}

// loopSource is what a sync reads: the directory on disk, or the Git repository.
func (f *repoFlags) loopSource() (loop.Source, error) {
	if f.isDir() {
		return loop.Dir{Path: f.repo}, nil
	}
	return f.gitRepo()
}

// revisionsOf reads any revision of src by its SHA, for the rollbacks that render
// one again; a directory has no revisions but the one on disk (nil).
func revisionsOf(src loop.Source) func(context.Context, string) (reconciler.Revision, error) {
	if _, dir := src.(loop.Dir); dir {
		return nil
	}
	return func(ctx context.Context, sha string) (reconciler.Revision, error) { return src.Read(ctx, sha, "") }
}

// isLoopbackHTTP allows plain http:// only to this machine (a local forge or mirror).
func isLoopbackHTTP(raw string) bool {
	u, err := neturl.Parse(raw)
	if err != nil || u.Scheme != "http" {
		return false
	}
	switch h := u.Hostname(); h {
	case "localhost":
		return true
	default:
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
}

func (f *repoFlags) auth() (*gitsource.Auth, error) {
	switch {
	case f.passwordFile != "":
		pw, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return nil, fmt.Errorf("failed to read --git-password-file: %w", err)
		}
		return &gitsource.Auth{Username: f.username, Password: strings.TrimSpace(string(pw))}, nil
	case f.sshKey != "":
		key, err := os.ReadFile(f.sshKey)
		if err != nil {
			return nil, fmt.Errorf("failed to read --ssh-key: %w", err)
		}
		hosts, err := os.ReadFile(f.knownHosts)
		if err != nil {
			return nil, fmt.Errorf("failed to read --known-hosts (required with --ssh-key): %w", err)
		}
		return &gitsource.Auth{SSHPrivateKey: key, KnownHosts: hosts}, nil
	}
	return nil, nil
}

// readRevision reads the repository once: from disk, or from Git at --ref or the
// branch head.
func (f *repoFlags) readRevision(ctx context.Context, base string) (reconciler.Revision, error) {
	src, err := f.loopSource()
	if err != nil {
		return reconciler.Revision{}, err
	}
	head, err := src.Head(ctx)
	if err != nil {
		return reconciler.Revision{}, err
	}
	return src.Read(ctx, head, base)
}

// offlineInputs reads the repository and the engine options of a command that
// renders with no cluster (render, graph): the capabilities charts see are those
// of the flags.
func (f *repoFlags) offlineInputs(ctx context.Context, caps capabilityFlags) (reconciler.Revision, reconciler.Options, error) {
	rev, err := f.readRevision(ctx, "")
	if err != nil {
		return rev, reconciler.Options{}, err
	}
	opts, err := f.engineOptions()
	if err != nil {
		return rev, opts, err
	}
	opts.Capabilities, err = caps.capabilities()
	return rev, opts, err
}

// revisionOfRef reads one branch or SHA of the Git repository.
func (f *repoFlags) revisionOfRef(ctx context.Context, ref string) (reconciler.Revision, error) {
	g, err := f.gitRepo()
	if err != nil {
		return reconciler.Revision{}, err
	}
	return g.ReadRef(ctx, ref)
}
