package render

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"cairn.dev/cairn/internal/crds"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Hook events that cairn runs, named as Helm names them (helm.sh/hook). Helm's
// other events, test (test-success) and pre-/post-rollback, never run: a hook with
// no event but those is not part of a Result.
const (
	HookPreInstall  = "pre-install"
	HookPostInstall = "post-install"
	HookPreUpgrade  = "pre-upgrade"
	HookPostUpgrade = "post-upgrade"
	HookPreDelete   = "pre-delete"
	HookPostDelete  = "post-delete"
)

// Hook delete policies (helm.sh/hook-delete-policy).
const (
	// HookBeforeCreation deletes the hook's object of an earlier run before the
	// hook is created again; the policy of a hook that names none.
	HookBeforeCreation = "before-hook-creation"
	// HookSucceeded deletes the hook's object once every hook of its event
	// succeeded.
	HookSucceeded = "hook-succeeded"
	// HookFailed deletes the hook's object when it failed.
	HookFailed = "hook-failed"
)

// runEvents are the events cairn runs.
var runEvents = []string{HookPreInstall, HookPostInstall, HookPreUpgrade, HookPostUpgrade, HookPreDelete, HookPostDelete}

// Hook is an object of a chart that Helm runs at events of a release instead of
// installing it with the others: parsed as Helm's releaseutil.SortManifests parses
// it, placed in the instance's namespace like the other objects.
type Hook struct {
	// Object is the hook's object.
	Object *unstructured.Unstructured `json:"object"`
	// Events are the events it runs on (of helm.sh/hook, those cairn runs).
	Events []string `json:"events"`
	// Weight is helm.sh/hook-weight (0 when absent or not an integer, as in Helm).
	Weight int `json:"weight,omitempty"`
	// DeletePolicies are helm.sh/hook-delete-policy's values, as written.
	DeletePolicies []string `json:"deletePolicies,omitempty"`
	// Source is the template the hook came from, e.g. "app/templates/job.yaml".
	Source string `json:"source"`
}

// RunsOn reports whether h runs on event.
func (h Hook) RunsOn(event string) bool { return slices.Contains(h.Events, event) }

// Deletes reports whether h's delete policies hold policy; a hook that names none
// has HookBeforeCreation, as in Helm.
func (h Hook) Deletes(policy string) bool {
	if len(h.DeletePolicies) == 0 {
		return policy == HookBeforeCreation
	}
	return slices.Contains(h.DeletePolicies, policy)
}

// String names the hook: Kind/namespace/name.
func (h Hook) String() string {
	if h.Object.GetNamespace() == "" {
		return h.Object.GetKind() + "/" + h.Object.GetName()
	}
	return h.Object.GetKind() + "/" + h.Object.GetNamespace() + "/" + h.Object.GetName()
}

// HooksFor returns the hooks of event in the order Helm runs them: hooks are
// ordered by kind as Helm installs kinds (releaseutil.InstallOrder), then by
// weight and name (Helm's hookByWeight), and HooksFor keeps that order.
func HooksFor(hooks []Hook, event string) []Hook {
	var out []Hook
	for _, h := range hooks {
		if h.RunsOn(event) {
			out = append(out, h)
		}
	}
	return out
}

// parsedHook is a hook as Helm parsed it, with its raw objects.
type parsedHook struct {
	hook *release.Hook
	raw  []rawObject
}

// chartHooks finds the hooks among the rendered templates as `helm install` does
// (releaseutil.SortManifests over the templates, NOTES.txt left out), in Helm's
// order, and parses each one's objects like the others, within the collector's
// caps. Hooks with no event that cairn runs are left out.
func chartHooks(rendered map[string]string, col *collector) ([]parsedHook, error) {
	files := make(map[string]string, len(rendered))
	for n, s := range rendered {
		if !strings.HasSuffix(n, notesFile) {
			files[n] = s
		}
	}
	hooks, _, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, newError(ReasonInvalidObject, "failed to sort the hooks: %v", err)
	}
	// Helm's hookByWeight, stable over the kind order.
	slices.SortStableFunc(hooks, func(a, b *release.Hook) int {
		return cmp.Or(cmp.Compare(a.Weight, b.Weight), cmp.Compare(a.Name, b.Name))
	})
	var out []parsedHook
	for _, h := range hooks {
		if len(runnable(h.Events)) == 0 {
			continue
		}
		raw, err := col.parse(h.Path+" (hook "+h.Name+")", helmManifest(h.Path, h.Manifest))
		if err != nil {
			return nil, err
		}
		out = append(out, parsedHook{hook: h, raw: raw})
	}
	return out, nil
}

// runnable returns the events of events that cairn runs.
func runnable(events []release.HookEvent) []string {
	var out []string
	for _, e := range events {
		if s := e.String(); slices.Contains(runEvents, s) {
			out = append(out, s)
		}
	}
	return out
}

// addHooks places the parsed hooks like the objects of res (namespace by scope),
// checks them for duplicates among themselves and with the objects, and folds them
// into res.Digest.
func addHooks(res *Result, parsed []parsedHook, namespace string) error {
	scopes := crds.Scopes(res.Objects)
	seen := map[string]string{}
	for _, u := range res.Objects {
		seen[objectKey(u)] = "an object of the release"
	}
	for _, p := range parsed {
		for _, r := range p.raw {
			u, err := toObject(r)
			if err != nil {
				return err
			}
			placeNamespace(u, namespace, scopes)
			if first, ok := seen[objectKey(u)]; ok {
				return newError(ReasonInvalidObject, "hook %s duplicates %s (%s)", r.key, first, objectKey(u))
			}
			seen[objectKey(u)] = "hook " + r.key
			res.Hooks = append(res.Hooks, Hook{Object: u, Events: runnable(p.hook.Events), Weight: p.hook.Weight,
				DeletePolicies: policies(p.hook.DeletePolicies), Source: p.hook.Path})
		}
	}
	digest, err := resultDigest(res.Objects, res.Hooks)
	res.Digest = digest
	return err
}

func policies(ps []release.HookDeletePolicy) []string {
	var out []string
	for _, p := range ps {
		out = append(out, string(p))
	}
	return out
}

func objectKey(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s/%s %s/%s", u.GroupVersionKind().Group, u.GetKind(), u.GetNamespace(), u.GetName())
}

// ResultDigest is the Digest of a Result of objs and hooks: a render made elsewhere
// (a render Job) is checked against it.
func ResultDigest(objs []*unstructured.Unstructured, hooks []Hook) (string, error) {
	return resultDigest(objs, hooks)
}

// resultDigest is objectsDigest when there are no hooks; with hooks, it also covers
// each hook's object, events, weight, delete policies and source, so that a changed
// hook changes the digest.
func resultDigest(objs []*unstructured.Unstructured, hooks []Hook) (string, error) {
	digest, err := objectsDigest(objs)
	if err != nil || len(hooks) == 0 {
		return digest, err
	}
	w := canonicalJSON{buf: []byte(digest + "\n[")}
	for i, h := range hooks {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		err := w.value(map[string]any{"object": h.Object.Object, "events": toAny(h.Events), "weight": int64(h.Weight),
			"deletePolicies": toAny(h.DeletePolicies), "source": h.Source})
		if err != nil {
			return "", newError(ReasonInvalidObject, "failed to encode the hooks: %w", err)
		}
	}
	w.buf = append(w.buf, ']')
	sum := sha256.Sum256(w.buf)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
