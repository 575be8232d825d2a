package reconciler

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/placement"
)

// TestCheckGeneratedSecrets: the placement of the instance refuses a generated
// Secret or copy like a rendered object (secretgen.Check's own cases are in its
// tests).
func TestCheckGeneratedSecrets(t *testing.T) {
	spec := cairnv1.GeneratedSecret{Name: "db", ToNamespaces: []string{"team-b"}, Data: map[string]cairnv1.SecretValueSource{
		"password": {Random: &cairnv1.RandomSource{Length: 8}}}}
	pl := placement.New(&cairnv1.Platform{Spec: cairnv1.PlatformSpec{Namespaces: cairnv1.NamespacePolicy{
		Allow: []string{"team-*"}, Deny: []string{"kube-*"}}}}, nil, &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}}, "cairn-system")
	inventoryName := spec
	inventoryName.Name, inventoryName.ToNamespaces = "cairn-inventory-app", nil
	denied := spec
	denied.ToNamespaces = []string{"kube-public"}
	intoCairn := spec
	intoCairn.ToNamespaces = []string{"cairn-system"}
	cases := []struct {
		name string
		spec cairnv1.GeneratedSecret
		err  string
	}{
		{name: "allowed", spec: spec},
		{name: "inventory Secret", spec: inventoryName, err: "reserved for cairn's inventories"},
		{name: "denied copy", spec: denied, err: `spec.secrets[0]: Secret/kube-public/db: namespace "kube-public" is denied`},
		{name: "copy into cairn's namespace", spec: intoCairn, err: `Secret/cairn-system/db: namespace "cairn-system" is cairn's own namespace`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			mi := &cairnv1.ModuleInstance{Spec: cairnv1.ModuleInstanceSpec{Secrets: []cairnv1.GeneratedSecret{tc.spec}}}
			mi.Namespace, mi.Name = "team-a", "app"
			err := checkGeneratedSecrets(nil, mi, pl)
			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
		})
	}
}
