package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const digestRef = "127.0.0.1:5000/cairn/cairn@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// deploymentArgs returns the args of the Deployment in the YAML of --dry-run.
func deploymentArgs(g *WithT, out string) (image string, args []string) {
	for _, doc := range yamlDocuments(g, out) {
		if doc["kind"] != "Deployment" {
			continue
		}
		c := doc["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		for _, a := range c["args"].([]any) {
			args = append(args, a.(string))
		}
		return c["image"].(string), args
	}
	return "", nil
}

// TestInstallControllerDryRun: --dry-run -o yaml prints the CRDs, the namespace and the
// controller, the image by digest (from bin/image.ref by default) and the source flags
// in the Deployment's args, never a credential, and the ClusterRole's watch of
// workloads unless --no-workload-watch.
func TestInstallControllerDryRun(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	password := filepath.Join(dir, "password")
	g.Expect(os.WriteFile(password, []byte("s3cr3t-token\n"), 0o600)).To(Succeed())
	g.Expect(os.MkdirAll(filepath.Join(dir, "bin"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "bin", "image.ref"), []byte(digestRef+"\n"), 0o644)).To(Succeed())
	t.Chdir(dir)

	r := execCairn(t, "install", "--controller", "--repo", "https://git.example.com/platform.git", "--branch", "prod",
		"--interval", "30s", "--git-username", "cairn", "--git-password-file", password, "--dry-run", "-o", "yaml")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).NotTo(ContainSubstring("s3cr3t"))
	g.Expect(r.stdout).To(ContainSubstring("# Secret cairn-system/cairn-git-credentials holds a credential file"))
	kinds := map[string]int{}
	for _, doc := range yamlDocuments(g, r.stdout) {
		kinds[doc["kind"].(string)]++
	}
	g.Expect(kinds).To(Equal(map[string]int{"CustomResourceDefinition": 4, "Namespace": 1, "ServiceAccount": 1,
		"ClusterRole":        4, // cairn's, the dashboard's, and the dashboard's view and operate for users
		"ClusterRoleBinding": 2, "Role": 1, "RoleBinding": 1, "Service": 1, "PodDisruptionBudget": 1, "Deployment": 1}))
	image, args := deploymentArgs(g, r.stdout)
	g.Expect(strings.Join(args, " ")).To(ContainSubstring("--dashboard-bind-address :8090"))
	g.Expect(image).To(Equal(digestRef))
	g.Expect(strings.Join(args, " ")).To(ContainSubstring("--renderer-image "+digestRef), "render Jobs run the controller's own image")
	g.Expect(strings.Join(args, " ")).To(ContainSubstring("--repo https://git.example.com/platform.git --branch prod --path . --interval 30s"))
	g.Expect(strings.Join(args, " ")).To(ContainSubstring("--git-username cairn --git-password-file /etc/cairn/git/password"))
	g.Expect(r.stdout).To(ContainSubstring("- deployments\n  - statefulsets\n  - daemonsets\n  verbs:\n  - list\n  - watch"))

	r = execCairn(t, "install", "--controller", "--repo", "https://git.example.com/platform.git", "--no-workload-watch",
		"--dry-run", "-o", "yaml")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).To(ContainSubstring("kind: ClusterRole\n"))
	g.Expect(r.stdout).NotTo(ContainSubstring("- deployments"), "--no-workload-watch leaves the workloads out of the ClusterRole")

	r = execCairn(t, "install", "--controller", "--repo", "https://git.example.com/platform.git", "--no-dashboard",
		"--dry-run", "-o", "yaml")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).NotTo(ContainSubstring("tokenreviews"))
	g.Expect(r.stdout).NotTo(ContainSubstring("name: cairn-controller-dashboard"), "--no-dashboard leaves its rights out")
	_, args = deploymentArgs(g, r.stdout)
	g.Expect(strings.Join(args, " ")).To(ContainSubstring("--dashboard-bind-address 0"))
}

// TestInstallControllerRefusals: a tag, no image, a directory for --repo, controller
// flags without --controller and another output format are refused, naming the fix.
func TestInstallControllerRefusals(t *testing.T) {
	t.Chdir(t.TempDir()) // no bin/image.ref
	repo := []string{"install", "--controller", "--repo", "https://git.example.com/platform.git", "--dry-run"}
	tests := []struct {
		name string
		args []string
		err  string
	}{
		{"no image", repo, "run `make image`"},
		{"a tag", append(repo, "--image", "127.0.0.1:5000/cairn/cairn:v1"), "not a reference by digest"},
		{"a directory", []string{"install", "--controller", "--repo", ".", "--image", digestRef}, "is not a Git URL"},
		{"no --controller", []string{"install", "--repo", "https://git.example.com/p.git"}, "need --controller"},
		{"json", append(repo, "--image", digestRef, "-o", "json"), "--dry-run prints yaml"},
		{"an empty credential file", append(repo, "--image", digestRef, "--forge", "gitea", "--forge-token-file", os.DevNull),
			"--forge-token-file is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := execCairn(t, tt.args...)
			g.Expect(r.err).To(MatchError(ContainSubstring(tt.err)))
		})
	}
}

// TestInstallWithoutControllerIsUnchanged: `cairn install --dry-run` prints the CRDs
// and the namespace only.
func TestInstallWithoutControllerIsUnchanged(t *testing.T) {
	g := NewWithT(t)
	r := execCairn(t, "install", "--dry-run")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	var kinds []string
	for _, doc := range yamlDocuments(g, r.stdout) {
		kinds = append(kinds, doc["kind"].(string))
	}
	g.Expect(kinds).To(ConsistOf("CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "Namespace"))
}
