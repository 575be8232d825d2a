package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"cairn.dev/cairn/reconciler/rendertask"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/sign"
)

// maxTerminationMessage is what the kubelet keeps of a container's termination
// message (4096 bytes).
const maxTerminationMessage = 4096

// renderTaskFlags are the paths a render Job's pod mounts (docs/render-jobs.md).
type renderTaskFlags struct {
	spec, registryConfig, registryCA, moduleRegistryConfig, moduleRegistryCA, caBundle, terminationLog, tmpDir string
}

func newRenderTaskCommand() *cobra.Command {
	var f renderTaskFlags
	cmd := &cobra.Command{
		Use:   "render-task",
		Short: "Render one instance in a render Job (Platform render.mode: Job; run by the controller's Jobs, not by hand)",
		Long: `render-task is the command of a render Job's pod: it reads the task's Spec, pulls its source
artifact from the publish Registry, renders it as the controller would in-process, seals the
rendered Secrets' data to the controller's key, pushes the render as an OCI artifact and writes
its digest, or the render's error, to the termination message. It holds no API token and no
signing key: the controller verifies, signs and applies what it pushed.`,
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.underRoot()
			dgst, err := f.run(cmd)
			msg := "digest: " + dgst
			switch {
			case errors.Is(err, rendertask.ErrUnavailable):
				msg = "unavailable: " + err.Error()
			case err != nil:
				msg = "error: " + err.Error()
			}
			if len(msg) > maxTerminationMessage {
				msg = msg[:maxTerminationMessage]
			}
			if f.terminationLog != "" {
				if werr := os.WriteFile(f.terminationLog, []byte(msg), 0o644); werr != nil && err == nil {
					err = fmt.Errorf("failed to write the termination message: %w", werr)
				}
			}
			if err == nil {
				fmt.Fprintln(cmd.OutOrStdout(), msg)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&f.spec, "spec", "/etc/cairn/task/spec.json", "the task's Spec (its config Secret)")
	cmd.Flags().StringVar(&f.registryConfig, "registry-config", "/etc/cairn/registries/publish/.dockerconfigjson",
		"docker config with the publish Registry's credentials")
	cmd.Flags().StringVar(&f.registryCA, "registry-ca", "", "PEM CA bundle of the publish Registry")
	cmd.Flags().StringVar(&f.moduleRegistryConfig, "module-registry-config", "/etc/cairn/registries/modules/.dockerconfigjson",
		"docker config with the module registry's credentials (read when the Spec names a module registry)")
	cmd.Flags().StringVar(&f.moduleRegistryCA, "module-registry-ca", "", "PEM CA bundle of the module registry")
	cmd.Flags().StringVar(&f.caBundle, "ca-bundle", "", "PEM CA bundle trusted for every registry (--renderer-ca-configmap)")
	cmd.Flags().StringVar(&f.terminationLog, "termination-log", "/dev/termination-log", "where the digest or the error is written")
	cmd.Flags().StringVar(&f.tmpDir, "tmp-dir", os.TempDir(), "a writable directory for the source and the module cache")
	return cmd
}

// taskRootEnv names a directory that stands for the pod's root filesystem: every
// path of a render task is read under it. Unset in a real pod; the end-to-end
// harness's stand-in kubelet sets it, as it writes the pod's volumes under a
// temporary root (kwok runs no containers).
const taskRootEnv = "CAIRN_TASK_ROOT"

// underRoot puts the task's paths under $CAIRN_TASK_ROOT, when it is set.
func (f *renderTaskFlags) underRoot() {
	root := os.Getenv(taskRootEnv)
	if root == "" {
		return
	}
	for _, p := range []*string{&f.spec, &f.registryConfig, &f.registryCA, &f.moduleRegistryConfig, &f.moduleRegistryCA, &f.caBundle, &f.terminationLog} {
		if *p != "" {
			*p = filepath.Join(root, *p)
		}
	}
}

func (f *renderTaskFlags) run(cmd *cobra.Command) (string, error) {
	data, err := os.ReadFile(f.spec)
	if err != nil {
		return "", fmt.Errorf("failed to read the task's Spec: %w", err)
	}
	var spec rendertask.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return "", fmt.Errorf("the task's Spec: %w", err)
	}
	var bundle []byte
	if f.caBundle != "" {
		if bundle, err = os.ReadFile(f.caBundle); err != nil {
			return "", fmt.Errorf("CA bundle: %w", err)
		}
	}
	ep, err := endpoint(spec.Registry, f.registryConfig, f.registryCA, bundle)
	if err != nil {
		return "", fmt.Errorf("publish Registry: %w", err)
	}
	client, err := sign.NewClient(ep)
	if err != nil {
		return "", err
	}
	env := rendertask.Env{Registry: client, TempDir: f.tmpDir}
	if mr := spec.ModuleRegistry; mr != nil {
		mep, err := endpoint(mr.Endpoint, f.moduleRegistryConfig, f.moduleRegistryCA, bundle)
		if err != nil {
			return "", fmt.Errorf("module registry: %w", err)
		}
		env.ModuleRegistry = &render.ModuleRegistry{Host: mr.Host, PlainHTTP: mr.PlainHTTP, Prefix: mr.Prefix, CAPEM: string(mep.CAPEM)}
		if c := mep.Credentials; c != nil {
			env.ModuleRegistry.Username, env.ModuleRegistry.Password = c.Username, c.Password
		}
	}
	env.Renderer = newRenderer()
	defer env.Renderer.Close()
	dgst, err := rendertask.Run(cmd.Context(), &spec, env)
	return dgst.String(), err
}

// endpoint is the registry e with the credentials for its host at configPath (none
// when nothing is there) and the CA at caPath, with bundle besides. configPath is a docker config file,
// or the directory a Registry's Secret is mounted at (username and password, or a
// .dockerconfigjson: the keys sign.CredentialsFromSecret reads).
func endpoint(e rendertask.Endpoint, configPath, caPath string, bundle []byte) (sign.Endpoint, error) {
	ep := sign.Endpoint{Host: e.Host, PlainHTTP: e.PlainHTTP}
	info, err := os.Stat(configPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return ep, err
	case info.IsDir():
		data := map[string][]byte{}
		for _, k := range []string{sign.SecretKeyUsername, sign.SecretKeyPassword, sign.SecretKeyDockerConfigJSON, sign.SecretKeyDockerConfig} {
			if b, err := os.ReadFile(filepath.Join(configPath, k)); err == nil {
				data[k] = b
			}
		}
		if ep.Credentials, err = sign.CredentialsFromSecret(e.Host, "", data); err != nil {
			return ep, err
		}
	default:
		data, err := os.ReadFile(configPath)
		if err != nil {
			return ep, err
		}
		if ep.Credentials, err = sign.DockerConfigCredentials(data, e.Host); err != nil {
			return ep, err
		}
	}
	if caPath != "" {
		ca, err := os.ReadFile(caPath)
		if err != nil {
			return ep, err
		}
		ep.CAPEM = ca
	}
	if len(bundle) > 0 {
		ep.CAPEM = append(append(slices.Clip(ep.CAPEM), '\n'), bundle...)
	}
	if strings.TrimSpace(ep.Host) == "" {
		return ep, errors.New("no host")
	}
	return ep, nil
}
