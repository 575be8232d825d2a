package valuesfrom

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// minMaskedLength is the shortest value from a Secret that is masked in messages:
// shorter ones would mask ordinary words and numbers.
const minMaskedLength = 4

// mask stands for a value from a Secret in messages and plans.
const mask = "***"

// Read returns the values of mi's render: the objects of spec.valuesFrom, read
// with c (as mi's identity) from Secrets in mi's namespace and merged in order,
// with spec.values merged over them. It also returns the strings of those Secrets,
// which messages and plans must mask (see Mask). Without valuesFrom it returns
// spec.values as it is and reads nothing (c may then be nil).
func Read(ctx context.Context, c client.Client, mi *cairnv1.ModuleInstance) ([]byte, []string, *outcome.Failure) {
	var spec []byte
	if mi.Spec.Values != nil {
		spec = mi.Spec.Values.Raw
	}
	if len(mi.Spec.ValuesFrom) == 0 {
		return spec, nil, nil
	}
	merged := map[string]any{}
	var secrets []string
	for i, ref := range mi.Spec.ValuesFrom {
		v, raw, f := readValues(ctx, c, mi.Namespace, i, ref.SecretRef)
		if f != nil {
			return nil, nil, f
		}
		secrets = append(secrets, secretStrings(v, raw)...)
		mergeValues(merged, v)
	}
	if len(spec) > 0 {
		var over map[string]any
		if err := json.Unmarshal(spec, &over); err != nil {
			return nil, nil, outcome.NewStalled(cairnv1.ReasonValuesFromFailed, fmt.Errorf("spec.values is not an object: %w", err))
		}
		mergeValues(merged, over)
	}
	out, err := json.Marshal(merged)
	if err != nil {
		return nil, nil, outcome.NewStalled(cairnv1.ReasonValuesFromFailed, fmt.Errorf("failed to encode the values: %w", err))
	}
	return out, secrets, nil
}

// readValues reads one spec.valuesFrom entry: a YAML or JSON object under a key of a
// Secret. Errors name the Secret and key, never what they hold.
func readValues(ctx context.Context, c client.Client, ns string, i int, ref cairnv1.SecretKeyReference) (map[string]any, string, *outcome.Failure) {
	where := fmt.Sprintf("spec.valuesFrom[%d]: Secret %s/%s", i, ns, ref.Name)
	var sec corev1.Secret
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil, "", outcome.NewTransient(cairnv1.ReasonValuesFromFailed, fmt.Errorf("%s not found", where))
	case err != nil:
		return nil, "", outcome.Classify(cairnv1.ReasonValuesFromFailed, fmt.Errorf("failed to read %s: %w", where, err))
	}
	raw, ok := sec.Data[ref.Key]
	if !ok {
		return nil, "", outcome.NewStalled(cairnv1.ReasonValuesFromFailed, fmt.Errorf("%s has no key %q", where, ref.Key))
	}
	var v map[string]any
	if err := yaml.Unmarshal(raw, &v); err != nil || v == nil {
		return nil, "", outcome.NewStalled(cairnv1.ReasonValuesFromFailed, fmt.Errorf("%s key %q does not hold a YAML object of values", where, ref.Key))
	}
	return v, string(raw), nil
}

// mergeValues merges src into dst: objects key by key, anything else replaced.
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		sub, isMap := v.(map[string]any)
		if old, ok := dst[k].(map[string]any); ok && isMap {
			mergeValues(old, sub)
			continue
		}
		dst[k] = v
	}
}

// secretStrings lists what must never be shown of a Secret's values: every scalar
// (as text) and the raw document, longest first, so that a longer value is masked
// before a shorter one inside it.
func secretStrings(v map[string]any, raw string) []string {
	set := map[string]bool{strings.TrimSpace(raw): true}
	var walk func(any)
	walk = func(x any) {
		switch t := x.(type) {
		case map[string]any:
			for _, e := range t {
				walk(e)
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		case nil:
		default:
			set[fmt.Sprint(t)] = true
		}
	}
	walk(v)
	out := slices.DeleteFunc(slices.Collect(maps.Keys(set)), func(s string) bool { return len(s) < minMaskedLength })
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// Mask replaces every secret string in text.
func Mask(text string, secrets []string) string {
	for _, s := range secrets {
		text = strings.ReplaceAll(text, s, mask)
	}
	return text
}

// Masker is Mask of secrets as a function, for what masks text it is handed
// (nil when there is no secret to mask).
func Masker(secrets []string) func(string) string {
	if len(secrets) == 0 {
		return nil
	}
	return func(text string) string { return Mask(text, secrets) }
}

// MaskFailure returns f with the secret strings masked in its message.
func MaskFailure(f *outcome.Failure, secrets []string) *outcome.Failure {
	if f == nil || len(secrets) == 0 {
		return f
	}
	msg := f.Error()
	if masked := Mask(msg, secrets); masked != msg {
		return &outcome.Failure{Kind: f.Kind, Reason: f.Reason, Err: fmt.Errorf("%s", masked)}
	}
	return f
}
