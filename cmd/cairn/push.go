package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"cairn.dev/cairn/render"
	"cairn.dev/cairn/sign"
)

func newPushCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "push",
		Short: "Publish artifacts to an OCI registry",
	}
	cmd.AddCommand(newPushModuleCommand())
	return cmd
}

func newPushModuleCommand() *cobra.Command {
	var (
		reg      registryFlags
		registry string
		version  string
		signKey  string
	)
	cmd := &cobra.Command{
		Use:   "module DIR",
		Short: "Publish a CUE module directory in CUE's registry format, and optionally sign it",
		Example: `  cairn push module ./modules/redis --registry registry.example.com/cairn-modules --version v0.1.0
  cairn push module ./modules/redis --registry 127.0.0.1:5000 --version v0.1.0 --plain-http --sign-key cosign.key`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			host, prefix, _ := strings.Cut(registry, "/")
			if host == "" {
				return fmt.Errorf("--registry HOST[/PREFIX] is required")
			}
			var key *sign.PrivateKey
			var err error
			if signKey != "" {
				if key, err = loadPrivateKey(cmd, signKey); err != nil {
					return err
				}
			}
			mr := render.ModuleRegistry{Host: host, Prefix: prefix, PlainHTTP: reg.plainHTTP}
			creds, err := reg.credentials(cmd.InOrStdin(), host)
			if err != nil {
				return err
			}
			if creds != nil {
				mr.Username, mr.Password = creds.Username, creds.Password
			}
			if reg.caFile != "" {
				ca, err := os.ReadFile(reg.caFile)
				if err != nil {
					return fmt.Errorf("failed to read --ca-file: %w", err)
				}
				mr.CAPEM = string(ca)
			}
			dgst, err := render.PushModule(cmd.Context(), args[0], mr, version)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "pushed %s@%s to %s (%s)\n", args[0], version, registry, dgst)
			if key == nil {
				return nil
			}
			repo, err := render.PushedRepository(args[0], mr)
			if err != nil {
				return err
			}
			c, err := sign.NewClient(sign.Endpoint{Host: host, PlainHTTP: mr.PlainHTTP, CAPEM: []byte(mr.CAPEM), Credentials: creds})
			if err != nil {
				return err
			}
			if err := c.Sign(cmd.Context(), repo, digest.Digest(dgst), key); err != nil {
				return err
			}
			fmt.Fprintf(out, "signed %s/%s@%s with key %s\n", host, repo, dgst, key.Public().ID())
			return nil
		},
	}
	reg.register(cmd)
	cmd.Flags().StringVar(&registry, "registry", "", "the registry and optional repository prefix, HOST[:PORT][/PREFIX]")
	cmd.Flags().StringVar(&version, "version", "", "the version to publish, e.g. v0.1.0")
	cmd.Flags().StringVar(&signKey, "sign-key", "", "cosign private key to sign the pushed module with")
	_ = cmd.MarkFlagRequired("version")
	return cmd
}
