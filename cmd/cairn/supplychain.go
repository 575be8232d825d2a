package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"oras.land/oras-go/v2/registry"

	"cairn.dev/cairn/render"
	"cairn.dev/cairn/sign"
)

// Environment variables that hold the password of a cosign private key; the
// second is cosign's own name.
var keyPasswordEnv = []string{"CAIRN_PASSWORD", "COSIGN_PASSWORD"}

// addSupplyChainCommands registers keygen, sign, verify and push chart.
func addSupplyChainCommands(root *cobra.Command) {
	root.AddCommand(newKeygenCommand(), newSignCommand(), newVerifyCommand())
	for _, c := range root.Commands() {
		if c.Name() == "push" {
			c.AddCommand(newPushChartCommand())
			return
		}
	}
	push := &cobra.Command{Use: "push", Short: "Publish artifacts to an OCI registry"}
	push.AddCommand(newPushChartCommand())
	root.AddCommand(push)
}

// registryFlags say how to reach a registry. Credentials come only from the flags:
// no docker config or credential helper is read implicitly.
type registryFlags struct {
	plainHTTP      bool
	caFile         string
	registryConfig string
	username       string
	passwordStdin  bool
}

func (f *registryFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.plainHTTP, "plain-http", false, "talk HTTP instead of HTTPS (local registries)")
	cmd.Flags().StringVar(&f.caFile, "ca-file", "", "PEM CA bundle trusted for the registry, in addition to the system roots")
	cmd.Flags().StringVar(&f.registryConfig, "registry-config", "", "docker config.json to take the registry's credentials from")
	cmd.Flags().StringVar(&f.username, "username", "", "registry username (with --password-stdin)")
	cmd.Flags().BoolVar(&f.passwordStdin, "password-stdin", false, "read the registry password from stdin")
}

// client returns a client for host with the credentials of the flags.
func (f *registryFlags) client(cmd *cobra.Command, host string) (*sign.Client, error) {
	ep := sign.Endpoint{Host: host, PlainHTTP: f.plainHTTP}
	if f.caFile != "" {
		ca, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("failed to read --ca-file: %w", err)
		}
		ep.CAPEM = ca
	}
	creds, err := f.credentials(cmd.InOrStdin(), host)
	if err != nil {
		return nil, err
	}
	ep.Credentials = creds
	return sign.NewClient(ep)
}

func (f *registryFlags) credentials(stdin io.Reader, host string) (*sign.Credentials, error) {
	switch {
	case f.registryConfig != "" && (f.username != "" || f.passwordStdin):
		return nil, errors.New("use either --registry-config or --username with --password-stdin, not both")
	case f.registryConfig != "":
		raw, err := os.ReadFile(f.registryConfig)
		if err != nil {
			return nil, fmt.Errorf("failed to read --registry-config: %w", err)
		}
		return sign.DockerConfigCredentials(raw, host)
	case f.username != "" && f.passwordStdin:
		raw, err := io.ReadAll(io.LimitReader(stdin, 64<<10))
		if err != nil {
			return nil, fmt.Errorf("failed to read the password from stdin: %w", err)
		}
		password := strings.TrimRight(string(raw), "\r\n")
		if password == "" {
			return nil, errors.New("--password-stdin: stdin holds no password")
		}
		return &sign.Credentials{Username: f.username, Password: password}, nil
	case f.username != "" || f.passwordStdin:
		return nil, errors.New("--username and --password-stdin go together")
	}
	return nil, nil
}

// ociRef is a parsed host/repository[:tag|@digest].
type ociRef struct{ host, repo, reference string }

// parseOCIRef parses REF with an optional oci:// scheme.
func parseOCIRef(s string) (ociRef, error) {
	ref, err := registry.ParseReference(strings.TrimPrefix(s, "oci://"))
	if err != nil {
		return ociRef{}, fmt.Errorf("invalid reference %q: %w", s, err)
	}
	return ociRef{host: ref.Registry, repo: ref.Repository, reference: ref.Reference}, nil
}

func (r ociRef) String() string { return r.host + "/" + r.repo }

func newKeygenCommand() *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Generate a cosign key pair (PREFIX.key, encrypted, and PREFIX.pub)",
		Long: `Generate a cosign key pair, usable by the cosign CLI too. The password comes from
CAIRN_PASSWORD or COSIGN_PASSWORD, else from a prompt when stdin is a terminal. An empty
password needs one of the variables set to "".`,
		Example: `  CAIRN_PASSWORD=... cairn keygen
  cairn keygen --output-key-prefix ./keys/release`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("output-key-prefix") {
				if err := refuseKeyInWorkTree(prefix); err != nil {
					return err
				}
			}
			password, err := keyPassword(cmd, true)
			if err != nil {
				return err
			}
			priv, pub, err := sign.GenerateKeyPair(password)
			if err != nil {
				return err
			}
			if err := writeNewFile(prefix+".key", priv, 0o600); err != nil {
				return err
			}
			if err := writeNewFile(prefix+".pub", pub, 0o644); err != nil {
				return err
			}
			key, err := sign.LoadPublicKey(pub)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Private key written to %s\nPublic key written to %s (key %s)\n", prefix+".key", prefix+".pub", key.ID())
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "output-key-prefix", "cosign", "path prefix of the key files")
	return cmd
}

// refuseKeyInWorkTree fails when the private key PREFIX.key would land inside a Git
// work tree: the default prefix writes into the working directory, and a key there is
// one `git add -A` away from the repository.
func refuseKeyInWorkTree(prefix string) error {
	dir, err := filepath.Abs(filepath.Dir(prefix))
	if err != nil {
		return fmt.Errorf("failed to resolve %s: %w", prefix, err)
	}
	if root, ok := gitWorkTree(dir); ok {
		return fmt.Errorf("refusing to write the private key %s.key inside the Git work tree %s, where it could be committed: "+
			"pass --output-key-prefix with the path to write it to (outside the repository, or explicitly inside it)", prefix, root)
	}
	return nil
}

// gitWorkTree returns the root of the Git work tree holding dir, if any. It only
// looks for a .git entry (a directory, or the file of a linked work tree or a
// submodule) in dir and its parents: nothing of the repository is read, so go-git's
// PlainOpen, which parses it, is more than this needs.
func gitWorkTree(dir string) (string, bool) {
	for {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// writeNewFile writes a file that must not exist yet.
func writeNewFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("failed to create %s (an existing key is never overwritten): %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	return f.Close()
}

// keyPassword returns the password of a private key: from the environment, else
// from a prompt (confirmed when creating) when stdin is a terminal.
func keyPassword(cmd *cobra.Command, confirm bool) ([]byte, error) {
	for _, env := range keyPasswordEnv {
		if v, ok := os.LookupEnv(env); ok {
			return []byte(v), nil
		}
	}
	in, ok := cmd.InOrStdin().(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return nil, fmt.Errorf("no key password: set %s (or %s); stdin is not a terminal to prompt on", keyPasswordEnv[0], keyPasswordEnv[1])
	}
	password, err := prompt(cmd, in, "Enter password for private key: ")
	if err != nil || !confirm {
		return password, err
	}
	again, err := prompt(cmd, in, "Enter password for private key again: ")
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(password, again) {
		return nil, errors.New("the passwords do not match")
	}
	return password, nil
}

func prompt(cmd *cobra.Command, in *os.File, text string) ([]byte, error) {
	fmt.Fprint(cmd.ErrOrStderr(), text)
	password, err := term.ReadPassword(int(in.Fd()))
	fmt.Fprintln(cmd.ErrOrStderr())
	if err != nil {
		return nil, fmt.Errorf("failed to read the password: %w", err)
	}
	if len(password) == 0 {
		return nil, fmt.Errorf("empty password; to use one, set %s=\"\"", keyPasswordEnv[0])
	}
	return password, nil
}

// loadPrivateKey reads and decrypts a cosign private key file.
func loadPrivateKey(cmd *cobra.Command, path string) (*sign.PrivateKey, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read the signing key: %w", err)
	}
	password, err := keyPassword(cmd, false)
	if err != nil {
		return nil, err
	}
	return sign.LoadPrivateKey(pem, password)
}

func newPushChartCommand() *cobra.Command {
	var (
		reg     registryFlags
		to      string
		signKey string
	)
	cmd := &cobra.Command{
		Use:   "chart DIR|TGZ",
		Short: "Push a Helm chart to an OCI repository the way helm push does, and optionally sign it",
		Long: `Push a chart directory (packaged with the Helm SDK) or a packaged .tgz to the OCI
repository --to, tagged with the chart version, and print its digest. Unlike helm push, the
repository is used as given: the chart name is not appended. As with helm package, a chart
whose Chart.yaml dependencies are missing from charts/ is refused. With --sign-key the digest
is signed (cosign format, no transparency log).`,
		Example: `  cairn push chart ./charts/podinfo --to oci://registry.example.com/charts/podinfo
  cairn push chart podinfo-6.7.0.tgz --to oci://127.0.0.1:5000/charts/podinfo --plain-http --sign-key cosign.key`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dest, err := parseOCIRef(to)
			if err != nil || dest.reference != "" {
				return fmt.Errorf("--to must be oci://HOST/REPOSITORY without tag or digest (got %q)", to)
			}
			var key *sign.PrivateKey
			if signKey != "" {
				if key, err = loadPrivateKey(cmd, signKey); err != nil {
					return err
				}
			}
			tgz, err := chartArchive(args[0])
			if err != nil {
				return err
			}
			c, err := reg.client(cmd, dest.host)
			if err != nil {
				return err
			}
			desc, tag, err := c.PushChart(cmd.Context(), dest.repo, tgz)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "oci://%s@%s\nversion %s (tag %s)\n", dest, desc.Digest, strings.ReplaceAll(tag, "_", "+"), tag)
			if key == nil {
				return nil
			}
			if err := c.Sign(cmd.Context(), dest.repo, desc.Digest, key); err != nil {
				return err
			}
			fmt.Fprintf(out, "signed with key %s\n", key.Public().ID())
			return nil
		},
	}
	reg.register(cmd)
	cmd.Flags().StringVar(&to, "to", "", "the chart's repository, oci://HOST[:PORT]/REPOSITORY")
	cmd.Flags().StringVar(&signKey, "sign-key", "", "cosign private key to sign the pushed digest with")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

// chartArchive returns the .tgz of a chart directory (packaged with the Helm
// SDK) or reads a packaged chart.
func chartArchive(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read chart: %w", err)
	}
	if !info.IsDir() {
		return packagedChart(path, info.Size())
	}
	ch, err := loader.LoadDir(path)
	if err != nil {
		return nil, fmt.Errorf("failed to load chart %s: %w", path, err)
	}
	if err := checkDependencies(path, ch); err != nil {
		return nil, err
	}
	return sign.PackageChart(ch)
}

// packagedChart reads a packaged chart of size bytes and checks its
// dependencies.
func packagedChart(path string, size int64) ([]byte, error) {
	if size > sign.MaxChartBytes {
		return nil, fmt.Errorf("chart archive %s is larger than %d bytes", path, sign.MaxChartBytes)
	}
	tgz, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read chart: %w", err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(tgz))
	if err != nil {
		return nil, fmt.Errorf("failed to load chart %s: %w", path, err)
	}
	return tgz, checkDependencies(path, ch)
}

// checkDependencies refuses a chart whose Chart.yaml dependencies are missing
// from charts/, as `helm package` does, naming the chart and each dependency.
func checkDependencies(path string, ch *chart.Chart) error {
	missing := render.MissingDependencies(ch)
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("chart %s (%s): dependencies of Chart.yaml missing from charts/: %s (run helm dependency build)",
		ch.Name(), path, strings.Join(missing, ", "))
}

func newSignCommand() *cobra.Command {
	var (
		reg registryFlags
		key string
	)
	cmd := &cobra.Command{
		Use:   "sign REF",
		Short: "Sign an OCI artifact with a cosign key (no transparency log)",
		Long: `Sign HOST/REPOSITORY:TAG or HOST/REPOSITORY@DIGEST. A tag is resolved once and its digest
is signed; the signature is stored the way cosign stores it (tag sha256-<hex>.sig). The key
password comes from CAIRN_PASSWORD or COSIGN_PASSWORD, else from a prompt.`,
		Example: `  cairn sign registry.example.com/charts/podinfo:6.7.0 --key cosign.key`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseOCIRef(args[0])
			if err != nil {
				return err
			}
			k, err := loadPrivateKey(cmd, key)
			if err != nil {
				return err
			}
			c, desc, err := resolveRef(cmd, &reg, ref)
			if err != nil {
				return err
			}
			if err := c.Sign(cmd.Context(), ref.repo, desc, k); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Signed %s@%s with key %s\n", ref, desc, k.Public().ID())
			return nil
		},
	}
	reg.register(cmd)
	cmd.Flags().StringVar(&key, "key", "", "cosign private key file")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

func newVerifyCommand() *cobra.Command {
	var (
		reg  registryFlags
		keys []string
	)
	cmd := &cobra.Command{
		Use:   "verify REF",
		Short: "Verify the cosign signature of an OCI artifact with public keys (offline, no transparency log)",
		Long: `Verify that HOST/REPOSITORY:TAG or HOST/REPOSITORY@DIGEST carries a cosign signature of its
digest made with one of the --key public keys. Exits 0 when it does, 1 otherwise.`,
		Example: `  cairn verify registry.example.com/charts/podinfo:6.7.0 --key cosign.pub`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseOCIRef(args[0])
			if err != nil {
				return err
			}
			pubs, err := loadPublicKeys(keys)
			if err != nil {
				return err
			}
			c, desc, err := resolveRef(cmd, &reg, ref)
			if err != nil {
				return err
			}
			res, err := c.Verify(cmd.Context(), ref.repo, desc, pubs)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Verified %s@%s with key %s\n", ref, res.Digest, res.KeyID)
			return nil
		},
	}
	reg.register(cmd)
	cmd.Flags().StringArrayVar(&keys, "key", nil, "trusted cosign public key file (repeatable)")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

func loadPublicKeys(paths []string) ([]*sign.PublicKey, error) {
	keys := make([]*sign.PublicKey, 0, len(paths))
	for _, p := range paths {
		pem, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("failed to read public key: %w", err)
		}
		k, err := sign.LoadPublicKey(pem)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// resolveRef returns a client for ref's registry and the digest ref names,
// resolving a tag once.
func resolveRef(cmd *cobra.Command, reg *registryFlags, ref ociRef) (*sign.Client, digest.Digest, error) {
	if ref.reference == "" {
		return nil, "", fmt.Errorf("%s: name a tag or a digest", ref)
	}
	c, err := reg.client(cmd, ref.host)
	if err != nil {
		return nil, "", err
	}
	desc, err := c.Resolve(cmd.Context(), ref.repo, ref.reference)
	if err != nil {
		return nil, "", err
	}
	return c, desc.Digest, nil
}
