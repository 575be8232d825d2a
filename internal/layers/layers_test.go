package layers

import (
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const module = "cairn.dev/cairn/"

// layer of each package (a path, or a prefix ending in "/..." for a folder and all
// below it): lower layers never import higher ones. test/ and hack/ are left out:
// they may import anything.
var layer = map[string]int{
	"api/v1alpha1":           0,
	"internal/fairslots":     0,
	"internal/globs":         0,
	"internal/graph":         0,
	"internal/httpcap":       0,
	"internal/deps":          0,
	"internal/crds":          0,
	"internal/layers":        0,
	"internal/testobj":       0,
	"manifests/...":          0,
	"sign":                   1,
	"gitsource/...":          1,
	"render/declarations":    1,
	"reconciler/lease":       1,
	"reconciler/outcome":     1,
	"reconciler/shard":       1,
	"reconciler/requests":    1,
	"reconciler/contracts":   1,
	"render":                 2,
	"reconciler/apply":       2,
	"reconciler/report":      2,
	"reconciler/status":      2,
	"reconciler/revert":      2,
	"reconciler/valuesfrom":  2,
	"reconciler/hooks":       3,
	"reconciler/secretgen":   3,
	"reconciler/supply":      3,
	"reconciler/placement":   3,
	"reconciler/prune":       3,
	"reconciler/ownership":   3,
	"reconciler/rendercache": 3,
	"reconciler/rendertask":  3,
	"reconciler":             4,
	"reconciler/loop":        6,
	"reconciler/plans":       5,
	"dashboard":              6,
	"cmd/...":                7,
}

func layerOf(pkg string) (int, bool) {
	if l, ok := layer[pkg]; ok {
		return l, true
	}
	for p, l := range layer {
		if prefix, ok := strings.CutSuffix(p, "/..."); ok && (pkg == prefix || strings.HasPrefix(pkg, prefix+"/")) {
			return l, true
		}
	}
	return 0, false
}

func topFolder(pkg string) string {
	top, _, _ := strings.Cut(pkg, "/")
	return top
}

// TestImportsPointDown lists cairn's packages with go list and checks every import
// of one cairn package by another against the layers.
func TestImportsPointDown(t *testing.T) {
	g := NewWithT(t)
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", module+"...").Output()
	g.Expect(err).NotTo(HaveOccurred())
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		if strings.HasPrefix(pkg, "test/") || strings.HasPrefix(pkg, "hack/") {
			continue
		}
		from, ok := layerOf(pkg)
		if !ok {
			problems = append(problems, pkg+": not placed in a layer (add it to internal/layers)")
			continue
		}
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			to, _ := layerOf(dep)
			if to > from || (to == from && topFolder(dep) != topFolder(pkg)) {
				problems = append(problems, pkg+" imports "+dep+", a package of a higher layer (or of its own layer in another folder)")
			}
		}
	}
	g.Expect(problems).To(BeEmpty())
}

func TestLayerOf(t *testing.T) {
	g := NewWithT(t)
	for pkg, want := range map[string]int{"gitsource/forge/gitea": 1, "cmd/cairn": 7, "render": 2, "render/declarations": 1, "manifests": 0} {
		got, ok := layerOf(pkg)
		g.Expect(ok).To(BeTrue(), pkg)
		g.Expect(got).To(Equal(want), pkg)
	}
	_, ok := layerOf("renderer")
	g.Expect(ok).To(BeFalse())
}
