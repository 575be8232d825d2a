package main

import (
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"cairn.dev/cairn/reconciler"
)

// kubeFlags are the standard kubeconfig flags.
type kubeFlags struct {
	kubeconfig string
	context    string
	qps        float32
	burst      int
}

func (k *kubeFlags) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&k.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	cmd.PersistentFlags().StringVar(&k.context, "context", "", "the kubeconfig context to use")
	cmd.PersistentFlags().Float32Var(&k.qps, "kube-api-qps", -1,
		"client-side rate limit of API requests per second; -1 leaves throttling to the API server's priority and fairness")
	cmd.PersistentFlags().IntVar(&k.burst, "kube-api-burst", -1, "client-side burst of API requests; -1 with --kube-api-qps -1")
}

// restConfig loads the kubeconfig the way kubectl does. By default the client does not
// throttle itself: the API server's priority and fairness does that (as Flux does).
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if k.kubeconfig != "" {
		rules.ExplicitPath = k.kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: k.context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = k.qps, k.burst
	if cfg.QPS > 0 && cfg.Burst <= 0 {
		cfg.Burst = int(cfg.QPS * 2)
	}
	cfg.UserAgent = "cairn/" + version
	return cfg, nil
}

func newRootCommand() *cobra.Command {
	reconciler.Version = version
	kube := &kubeFlags{}
	root := &cobra.Command{
		Use:           "cairn",
		Short:         "cairn reconciles a platform repository into a Kubernetes cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	kube.register(root)
	root.AddCommand(
		newRenderCommand(),
		newGraphCommand(kube),
		newPlanCommand(kube),
		newSyncCommand(kube),
		newControllerCommand(kube),
		newStatusCommand(kube),
		newDashboardCommand(kube),
		newHistoryCommand(kube),
		newSuspendCommand(kube),
		newResumeCommand(kube),
		newHoldCommand(kube),
		newReleaseCommand(kube),
		newRollbackCommand(kube),
		newReconcileCommand(kube),
		newInstallCommand(kube),
		newUninstallCommand(kube),
		newPushCommand(),
		newRenderTaskCommand(),
		newVersionCommand(),
	)
	addSupplyChainCommands(root)
	return root
}
