package reconciler

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/hooks"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
)

// PlanChange plans a change from base to head, as a pull request proposes it: the
// plan of head against the live cluster (what a sync would create, configure and
// prune, with the prune guards' verdict), and for each instance the rendered diff
// from base to head (Secret data masked).
func (e *Engine) PlanChange(ctx context.Context, base, head Revision) (*Plan, error) {
	plan, err := e.Plan(ctx, head)
	if err != nil || plan.Error != "" {
		return plan, err
	}
	plan.Base = base.SHA
	caps := e.offlineCapabilities(ctx) // both sides see the cluster as the plan does
	before, err := e.renderedByInstance(ctx, base, caps)
	if err != nil {
		before = map[string]Rendered{} // a base that does not load: everything in head is new
	}
	after, err := e.renderedByInstance(ctx, head, caps)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i := range plan.Instances {
		ip := &plan.Instances[i]
		key := ip.Namespace + "/" + ip.Name
		seen[key] = true
		ip.Diff = renderedDiff(before[key], after[key])
	}
	for key, b := range before {
		if _, stays := after[key]; !stays && !seen[key] {
			plan.Instances = append(plan.Instances, InstancePlan{Namespace: b.Namespace, Name: b.Name,
				Action: outcome.PlanDelete, Why: "removed from Git", Diff: renderedDiff(b, Rendered{})})
		}
	}
	sort.SliceStable(plan.Instances, func(i, j int) bool {
		a, b := plan.Instances[i], plan.Instances[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	return plan, nil
}

func (e *Engine) renderedByInstance(ctx context.Context, rev Revision, caps *render.Capabilities) (map[string]Rendered, error) {
	opts := e.opts
	opts.Secrets = e.secrets() // the Registries' credentials and keys, read from the cluster
	opts.Capabilities = caps
	out, err := renderOffline(ctx, e.renderer, rev, opts, "", e.verifier)
	if err != nil {
		return nil, err
	}
	m := make(map[string]Rendered, len(out))
	for _, r := range out {
		m[r.Namespace+"/"+r.Name] = r
	}
	return m, nil
}

// renderedDiff is a unified diff of the YAML of two renders of one instance.
func renderedDiff(before, after Rendered) string {
	if after.Err != nil {
		return ""
	}
	a := renderText(before.Objects, nil) + renderText(hooks.Objects(before.Hooks), nil)
	b := renderText(after.Objects, before.Objects) + renderText(hooks.Objects(after.Hooks), hooks.Objects(before.Hooks))
	if a == b {
		return ""
	}
	diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b), FromFile: "base", ToFile: "head", Context: 3,
	})
	if err != nil {
		return fmt.Sprintf("(no diff: %v)", err)
	}
	return diff
}

// renderText is the YAML of objects, each headed by its identity, Secret data masked.
// A masked value that differs from the same key in previous says so.
func renderText(objects, previous []*unstructured.Unstructured) string {
	prev := map[string]*unstructured.Unstructured{}
	for _, u := range previous {
		prev[apply.ObjectID(u)] = u
	}
	var b strings.Builder
	for _, u := range objects {
		shown := maskSecret(u, prev[apply.ObjectID(u)])
		y, err := yaml.Marshal(shown.Object)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "# %s\n%s---\n", apply.Describe(u), y)
	}
	return b.String()
}

// maskSecret replaces the values of a Secret's data and stringData.
func maskSecret(u, previous *unstructured.Unstructured) *unstructured.Unstructured {
	if u.GetKind() != "Secret" || u.GroupVersionKind().Group != "" {
		return u
	}
	out := u.DeepCopy()
	for _, field := range []string{"data", "stringData"} {
		values, ok, _ := unstructured.NestedMap(out.Object, field)
		if !ok {
			continue
		}
		var old map[string]any
		if previous != nil {
			old, _, _ = unstructured.NestedMap(previous.Object, field)
		}
		for k, v := range values {
			values[k] = "(masked)"
			if previous != nil && fmt.Sprint(old[k]) != fmt.Sprint(v) {
				values[k] = "(masked, changed)"
			}
		}
		_ = unstructured.SetNestedMap(out.Object, values, field)
	}
	return out
}
