package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"cairn.dev/cairn/render"
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
		registry  string
		version   string
		plainHTTP bool
	)
	cmd := &cobra.Command{
		Use:   "module DIR",
		Short: "Publish a CUE module directory in CUE's registry format",
		Example: `  cairn push module ./modules/redis --registry registry.example.com/cairn-modules --version v0.1.0
  cairn push module ./modules/redis --registry 127.0.0.1:5000/cairn-modules --version v0.1.0 --plain-http`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			host, prefix, _ := strings.Cut(registry, "/")
			if host == "" {
				return fmt.Errorf("--registry HOST[/PREFIX] is required")
			}
			digest, err := render.PushModule(cmd.Context(), args[0],
				render.ModuleRegistry{Host: host, Prefix: prefix, PlainHTTP: plainHTTP}, version)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pushed %s@%s to %s (%s)\n", args[0], version, registry, digest)
			return nil
		},
	}
	cmd.Flags().StringVar(&registry, "registry", "", "the registry and optional repository prefix, HOST[:PORT][/PREFIX]")
	cmd.Flags().StringVar(&version, "version", "", "the version to publish, e.g. v0.1.0")
	cmd.Flags().BoolVar(&plainHTTP, "plain-http", false, "talk HTTP instead of HTTPS (local registries)")
	_ = cmd.MarkFlagRequired("version")
	return cmd
}
