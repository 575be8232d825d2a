package e2e

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rawModule renders whatever objects its values list: the module an attacker who can
// write one instance's files would write.
const rawModule = `package raw

instance: {name: string, namespace: string}
values: objects: [...{...}]
objects: values.objects
`

// rawInstance declares an instance of the raw module in ns rendering objs; extra is
// appended under spec.
func rawInstance(name, ns string, extra string, objs ...map[string]any) string {
	b, err := json.Marshal(map[string]any{"objects": objs})
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: %s\n  namespace: %s\n"+
		"spec:\n  module:\n    local:\n      path: ./modules/raw\n  timeout: 1m\n  values: %s\n%s", name, ns, b, extra)
}

// rawRepo is appRepo with the raw module and a Platform whose spec is platformSpec
// (indented under spec:).
func rawRepo(platformSpec string, instances map[string]string) map[string]string {
	files := appRepo("")
	files["platform.yaml"] = "apiVersion: cairn.dev/v1alpha1\nkind: Platform\nmetadata:\n  name: cluster\nspec:\n" + platformSpec
	files["modules/raw/raw.cue"] = rawModule
	for name, doc := range instances {
		files["instances/"+name+".yaml"] = doc
	}
	return files
}

func configMapObj(ns, name, value string) map[string]any {
	md := map[string]any{"name": name}
	if ns != "" {
		md["namespace"] = ns
	}
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": map[string]any{"value": value}}
}

func deploymentObj(ns, name, image string) map[string]any {
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": image}}},
			},
		}}
}

// imageOf is the image of a Deployment's first container.
func imageOf(u *unstructured.Unstructured) string {
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		return ""
	}
	img, _ := cs[0].(map[string]any)["image"].(string)
	return img
}

// ownerOf is the instance label of a live object.
func ownerOf(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	return u.GetLabels()["cairn.dev/instance"]
}

func (e *env) ensureNamespace(name string) {
	e.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.c.Create(e.ctx, ns); err != nil && !strings.Contains(err.Error(), "already exists") {
		e.t.Fatal(err)
	}
}
