package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeName is the fake node kwok keeps Ready in a Full cluster.
const NodeName = "kwok-node-0"

// startControllers starts kube-controller-manager, kube-scheduler and kwok,
// creates the kwok node and waits until it is Ready and the controllers have
// created the default ServiceAccount.
func (s *starter) startControllers(ctx context.Context) error {
	starts := []func() (*process, error){s.startControllerManager, s.startScheduler, s.startKwok}
	var procs []*process
	for _, start := range starts {
		p, err := start()
		s.add(p)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	client, err := kubernetes.NewForConfig(s.c.RESTConfig)
	if err != nil {
		return fmt.Errorf("failed to create a client: %w", err)
	}
	if err := createNode(ctx, client); err != nil {
		return err
	}
	if err := waitFor(ctx, "node "+NodeName+" to be Ready", procs, nodeReady(client)); err != nil {
		return err
	}
	return waitFor(ctx, "the default ServiceAccount", procs, defaultServiceAccount(client))
}

func (s *starter) startControllerManager() (*process, error) {
	kubeconfig, err := s.componentKubeconfig("kube-controller-manager")
	if err != nil {
		return nil, err
	}
	return s.launch.start("kube-controller-manager", filepath.Join(s.bins, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig,
		"--controllers=*,-serviceaccount-token", "--leader-elect=false", "--secure-port=0",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file="+s.saKey, "--root-ca-file="+s.pki.CAFile,
		"--cluster-signing-cert-file="+s.pki.CAFile,
		"--cluster-signing-key-file="+filepath.Join(s.pki.Dir, "ca.key"),
		"--service-cluster-ip-range="+serviceCIDR,
		"--kube-api-qps=1000", "--kube-api-burst=2000")
}

func (s *starter) startScheduler() (*process, error) {
	kubeconfig, err := s.componentKubeconfig("kube-scheduler")
	if err != nil {
		return nil, err
	}
	return s.launch.start("kube-scheduler", filepath.Join(s.bins, "kube-scheduler"),
		"--kubeconfig="+kubeconfig, "--leader-elect=false", "--secure-port=0")
}

func (s *starter) startKwok() (*process, error) {
	kubeconfig, err := s.componentKubeconfig("kwok")
	if err != nil {
		return nil, err
	}
	stages, err := kwokStages(filepath.Join(s.bins, "kwok-stages.yaml"), s.dir)
	if err != nil {
		return nil, err
	}
	return s.launch.start("kwok", filepath.Join(s.bins, "kwok"),
		"--kubeconfig="+kubeconfig, "--manage-all-nodes=true",
		"--config="+stages, "--cidr=10.244.0.0/16")
}

// kwokStages writes, into dir, kwok's stages (the file at path) with every pod
// stage but the deletion's kept off the pods labelled RunPodLabel, which a
// PodRunner runs: kwok would report them Running, then complete a Job's pod at
// once. It returns the file written.
func kwokStages(path, dir string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	const selector = "    matchExpressions:\n"
	docs := strings.Split(string(data), "\n---\n")
	for i, d := range docs {
		if !strings.Contains(d, "kind: Pod\n") || strings.Contains(d, "name: pod-delete\n") {
			continue
		}
		if !strings.Contains(d, selector) {
			return "", fmt.Errorf("%s: a pod stage without matchExpressions: its selector cannot be kept off the pods a PodRunner runs", path)
		}
		docs[i] = strings.Replace(d, selector, selector+"    - key: '.metadata.labels[\""+RunPodLabel+"\"]'\n      operator: 'DoesNotExist'\n", 1)
	}
	out := filepath.Join(dir, "kwok-stages.yaml")
	return out, os.WriteFile(out, []byte(strings.Join(docs, "\n---\n")), 0o644)
}

// componentKubeconfig writes a kubeconfig for a control-plane component. Each
// has its own user name, in system:masters, so audit and logs tell them apart.
func (s *starter) componentKubeconfig(name string) (string, error) {
	pair, err := s.pki.clientPair("system:"+name, "system:masters")
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.pki.Dir, name+".kubeconfig")
	return path, writeKubeconfig(path, s.c.APIServerURL, s.pki.CAPEM, "system:"+name, pair)
}

// createNode creates the node kwok plays the kubelet for. It has no taint, so
// ordinary pods are scheduled to it; kwok fills in status and capacity.
func createNode(ctx context.Context, client kubernetes.Interface) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        NodeName,
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		Labels: map[string]string{
			"type": "kwok", "kubernetes.io/hostname": NodeName, "kubernetes.io/os": "linux",
			"kubernetes.io/arch": "amd64", "kubernetes.io/role": "agent", "node-role.kubernetes.io/agent": "",
		},
	}}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create Node/%s: %w", NodeName, err)
	}
	return nil
}

func nodeReady(client kubernetes.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		node, err := client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("Node/%s is not Ready", NodeName)
	}
}

func defaultServiceAccount(client kubernetes.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}
}
