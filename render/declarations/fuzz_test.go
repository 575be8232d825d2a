package declarations

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// FuzzLoad loads random bytes as one YAML file beside a valid Platform: Load must never
// panic, must return within bounds, and what it returns must be consistent.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		podinfoYAML, frontendYAML + "---\n" + certManagerYAML, registryYAML, deploymentYAML,
		instanceDoc("team-a", "x", "  values:\n"+billionLaughs("    ")),
		instanceDoc("team-a", "x", "  values: &v {self: [*v]}"),
		instanceDoc("team-a", "a", "  module: {local: {path: x}}", "  dependsOn: [{name: a}]"),
		"apiVersion: cairn.dev/v1alpha1\nkind: Platform\nmetadata: {name: cluster}\n",
		"apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata: {name: x, namespace: team-a, <<: {a: b}}\n",
		"apiVersion: cairn.dev/v1alpha1\nkind: Registry\nmetadata: {name: !!binary aGk=}\nspec: {hostname: [1]}\n",
		strings.Repeat("[", 200) + strings.Repeat("]", 200),
		"---\n---\n", "a: 1\na: 2\n", "\t", "",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := fstest.MapFS{
			"platform.yaml": {Data: []byte(platformYAML + "---\n" + registryYAML)},
			"fuzz.yaml":     {Data: data},
		}
		start := time.Now()
		set, err := Load(fsys, Options{})
		// Generous, so that a loaded machine does not fail it: the inputs are small and
		// anything slow is a pathology.
		if elapsed := time.Since(start); elapsed > slowdown*5*time.Second {
			t.Fatalf("Load took %v", elapsed)
		}
		checkConsistent(t, set, err)
	})
}

func checkConsistent(t *testing.T, set *Set, err error) {
	var e *Error
	if err != nil && !errors.As(err, &e) {
		t.Fatalf("fatal error is not an *Error: %v", err)
	}
	if err == nil && set.Platform == nil {
		t.Fatal("no error and no Platform")
	}
	for _, e := range set.Invalid {
		if e.Reason == "" || e.File == "" || e.Error() == "" {
			t.Fatalf("incomplete error: %#v", e)
		}
	}
	for _, mi := range set.Instances {
		if set.Instance(mi.Namespace, mi.Name) != mi {
			t.Fatalf("instance %s/%s is not indexed", mi.Namespace, mi.Name)
		}
	}
}
