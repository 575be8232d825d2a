package declarations

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// billionLaughs is the classic alias bomb (CVE-2019-11253): nine levels of nine aliases,
// 9^9 strings once expanded, in under 1 KiB.
func billionLaughs(indent string) string {
	var b strings.Builder
	b.WriteString(indent + "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	for c := 'b'; c <= 'i'; c++ {
		p := string(c - 1)
		b.WriteString(indent + string(c) + ": &" + string(c) + " [*" + p + ",*" + p + ",*" + p + ",*" + p + ",*" + p + ",*" + p + ",*" + p + ",*" + p + ",*" + p + "]\n")
	}
	return b.String()
}

// bounded runs Load on fsys and asserts that it finishes within 2 s (without the race
// detector) and allocates less than 128 MiB in total.
func bounded(t *testing.T, fsys map[string]string) *Set {
	t.Helper()
	g := NewWithT(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	set := mustLoad(t, with(fsys))
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	// Allocation is the exact bound; the time bound only catches a blow-up (an
	// expanded alias bomb runs for minutes), loose enough for a loaded 2-core machine.
	g.Expect(elapsed).To(BeNumerically("<", slowdown*15*time.Second))
	g.Expect(after.TotalAlloc - before.TotalAlloc).To(BeNumerically("<", 128<<20))
	return set
}

func TestHostileInput(t *testing.T) {
	deepFlow := strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000)
	bigString := strings.Repeat("x", 100_000)
	cases := []struct {
		name    string
		spec    string
		reason  string
		line    int
		message string
	}{
		{name: "alias bomb in values", spec: "  values:\n" + billionLaughs("    "),
			reason: ReasonTooLarge, message: "too many nodes"},
		{name: "alias bomb of long strings", spec: "  values:\n    s: &s '" + bigString + "'\n" + strings.ReplaceAll(billionLaughs("    "), `"lol"`, "*s"),
			reason: ReasonTooLarge, message: "too many bytes"},
		{name: "10,000 nested flow sequences", spec: "  values: " + deepFlow,
			reason: ReasonInvalidDeclaration, line: 8, message: "nesting is deeper than 100 levels"},
		{name: "5,000 nested block sequences", spec: "  values:\n    deep:\n      " + strings.Repeat("- ", 5_000) + "x",
			reason: ReasonInvalidDeclaration, message: "nesting is deeper than 100 levels"},
		{name: "self-referencing alias", spec: "  values: &v {self: [*v]}",
			reason: ReasonInvalidDeclaration, line: 8, message: "nesting is deeper than 100 levels"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			doc := instanceDoc("team-a", "x", "  module: {local: {path: x}}", tc.spec)
			set := bounded(t, map[string]string{"instances/x.yaml": doc})

			g.Expect(set.Instance("team-a", "x")).To(BeNil())
			g.Expect(set.Instances).To(HaveLen(3))
			errs := errorsIn(set, "instances/x.yaml")
			g.Expect(errs).To(HaveLen(1))
			g.Expect(errs[0].Reason).To(Equal(tc.reason))
			g.Expect(errs[0].Object).To(Equal("team-a/x"))
			g.Expect(errs[0].Message).To(ContainSubstring(tc.message))
			if tc.line > 0 {
				g.Expect(errs[0].Line).To(Equal(tc.line))
			}
		})
	}
}

func TestHostileYAMLThatDoesNotParse(t *testing.T) {
	for name, data := range map[string]string{
		"100,000 nested flow sequences": "apiVersion: cairn.dev/v1alpha1\nspec: " + strings.Repeat("[", 100_000),
		"10,000 nested block sequences": "apiVersion: cairn.dev/v1alpha1\nspec:\n  " + strings.Repeat("- ", 10_001) + "x",
		"unterminated":                  "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nspec: {values: 'x",
		"tabs":                          "apiVersion: cairn.dev/v1alpha1\n\tkind: ModuleInstance\n",
		"undefined alias":               "apiVersion: cairn.dev/v1alpha1\nkind: *nope\n",
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			set := bounded(t, map[string]string{"instances/x.yaml": data})

			g.Expect(set.Unparsed).To(Equal([]string{"instances/x.yaml"}))
			g.Expect(set.Invalid).To(HaveLen(1))
			g.Expect(set.Invalid[0].Reason).To(Equal(ReasonInvalidYAML))
			g.Expect(set.Invalid[0].Error()).To(HavePrefix("instances/x.yaml"))
		})
	}
}

func TestAliasBombOutsideOurDocumentsIsNotExpanded(t *testing.T) {
	g := NewWithT(t)
	bomb := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n" + billionLaughs("  ")
	set := bounded(t, map[string]string{"manifests/bomb.yaml": bomb})

	g.Expect(set.Invalid).To(BeEmpty())
}

func TestAliasBombsShareTheirFileBudget(t *testing.T) {
	g := NewWithT(t)
	var docs []string
	for i := range 50 {
		docs = append(docs, instanceDoc("team-a", "x"+strconv.Itoa(i), "  values:\n"+billionLaughs("    ")))
	}
	set := bounded(t, map[string]string{"instances/x.yaml": strings.Join(docs, "---\n")})

	g.Expect(set.Invalid).To(HaveLen(50))
	g.Expect(set.Instances).To(HaveLen(3))
}

func TestAliasBombsInManyFiles(t *testing.T) {
	g := NewWithT(t)
	files := map[string]string{}
	for i := range 200 {
		files["instances/"+strconv.Itoa(i)+".yaml"] = instanceDoc("team-a", "x"+strconv.Itoa(i), "  values:\n"+billionLaughs("    "))
	}
	set := bounded(t, files)

	g.Expect(set.Invalid).To(HaveLen(200))
	g.Expect(set.Invalid[0].Reason).To(Equal(ReasonTooLarge))
}

// TestLargeHonestFileIsAccepted checks that the caps leave room for honest input: a file
// just under the size cap, dense in nodes and using aliases, loads within the same bounds.
func TestLargeHonestFileIsAccepted(t *testing.T) {
	g := NewWithT(t)
	var b strings.Builder
	b.WriteString("    common: &common {replicas: 2, image: {repository: ghcr.io/example/app, tag: v1.2.3}}\n")
	for i := 0; b.Len() < 1_000_000; i++ {
		b.WriteString("    k" + strconv.Itoa(i) + ": [1, 2.5, true, x, *common]\n")
	}
	doc := instanceDoc("team-a", "x", "  module: {local: {path: x}}", "  values:\n"+b.String())
	set := bounded(t, map[string]string{"instances/x.yaml": doc})

	g.Expect(set.Invalid).To(BeEmpty())
	g.Expect(set.Instance("team-a", "x")).NotTo(BeNil())
}
