package reconciler

import (
	"context"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/supply"
	"cairn.dev/cairn/sign"
)

// DefaultNamespace is cairn's own namespace, where the Secrets and ConfigMaps that
// Registries name live.
const DefaultNamespace = "cairn-system"

// SecretSource reads the Secrets and ConfigMaps Registries name (see
// supply.SecretSource).
type SecretSource = supply.SecretSource

// secrets is where the Engine reads what Registries name: Options.Secrets, else
// cairn's namespace in the cluster.
func (e *Engine) secrets() SecretSource {
	if e.opts.Secrets != nil {
		return e.opts.Secrets
	}
	if e.cluster == nil {
		return nil
	}
	return supply.NamespaceSecrets{Client: e.cluster.client, Namespace: e.namespace()}
}

// namespace is cairn's own namespace.
func (e *Engine) namespace() string { return e.opts.cairnNamespace() }

// cairnNamespace is Namespace, else DefaultNamespace.
func (o Options) cairnNamespace() string {
	if o.Namespace == "" {
		return DefaultNamespace
	}
	return o.Namespace
}

// newSupplyChain is the supply chain of a sync (or an offline render) of platform's
// Registries regs, with the engine's options.
func newSupplyChain(ctx context.Context, secrets SecretSource, opts Options, verifier *sign.Verifier,
	platform *cairnv1.Platform, regs []*cairnv1.Registry) *supply.Chain {
	return supply.New(ctx, supply.Config{
		Mode: platform.Spec.Verify.Mode, Secrets: secrets, RegistryConfig: opts.RegistryConfig, Verifier: verifier,
	}, regs)
}
