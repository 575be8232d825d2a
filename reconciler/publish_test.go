package reconciler

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// TestPublishedObjectsCarryNoSecretData: the artifact of a render keeps every object
// but never a Secret's values, nor the instance UID.
func TestPublishedObjectsCarryNoSecretData(t *testing.T) {
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "db", "labels": map[string]any{cairnv1.InstanceUIDLabel: "uid-123", "app": "db"}},
		"data":       map[string]any{"password": "c3VwZXItc2VjcmV0"},
		"stringData": map[string]any{"token": "plain-token-value"},
	}}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cfg"},
		"data":     map[string]any{"password": "not-a-secret-here"},
	}}
	out, err := objectsYAML([]*unstructured.Unstructured{secret, cm})
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, leaked := range []string{"c3VwZXItc2VjcmV0", "plain-token-value", "uid-123"} {
		if strings.Contains(text, leaked) {
			t.Errorf("the artifact carries %q:\n%s", leaked, text)
		}
	}
	for _, kept := range []string{"password: <redacted>", "token: <redacted>", "app: db", "not-a-secret-here", "---"} {
		if !strings.Contains(text, kept) {
			t.Errorf("the artifact lost %q:\n%s", kept, text)
		}
	}
	if secret.Object["data"].(map[string]any)["password"] != "c3VwZXItc2VjcmV0" {
		t.Error("redaction changed the object to be applied")
	}
}
