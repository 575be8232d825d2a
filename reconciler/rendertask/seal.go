package rendertask

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/crypto/nacl/box"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cairn.dev/cairn/render"
)

// SealedAnnotation holds, on a rendered Secret of a task's result, its data and
// stringData sealed to the controller's key for that task (NaCl's anonymous box:
// X25519 and XSalsa20-Poly1305, golang.org/x/crypto/nacl/box); the Secret carries
// neither field in the clear. Written by the task, removed by Open.
const SealedAnnotation = "cairn.dev/sealed-data"

// Key is the key pair a controller makes for one task: the task seals with the
// public half, which the task's Spec carries; the private half stays with the
// controller (a Secret of its namespace the task's pod cannot read).
type Key struct {
	Public, Private *[32]byte
}

// NewKey makes a key pair.
func NewKey() (Key, error) {
	pub, priv, err := box.GenerateKey(rand.Reader)
	if err != nil {
		return Key{}, err
	}
	return Key{Public: pub, Private: priv}, nil
}

// EncodeKey and DecodeKey write and read one half of a key as base64.
func EncodeKey(k *[32]byte) string { return base64.StdEncoding.EncodeToString(k[:]) }

func DecodeKey(s string) (*[32]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 32 {
		return nil, errors.New("a render task key is 32 bytes in base64")
	}
	var k [32]byte
	copy(k[:], b)
	return &k, nil
}

// isSecret tells whether u is a core Secret.
func isSecret(u *unstructured.Unstructured) bool {
	return u.GetKind() == "Secret" && u.GetAPIVersion() == "v1"
}

// resultObjects are the objects and the hooks' objects of res.
func resultObjects(res *render.Result) []*unstructured.Unstructured {
	out := append([]*unstructured.Unstructured{}, res.Objects...)
	for _, h := range res.Hooks {
		out = append(out, h.Object)
	}
	return out
}

// Seal seals the data and stringData of every Secret of res (its objects and its
// hooks) to pub, in place.
func Seal(res *render.Result, pub *[32]byte) error {
	for _, u := range resultObjects(res) {
		if !isSecret(u) {
			continue
		}
		fields := map[string]any{}
		for _, f := range []string{"data", "stringData"} {
			if v, ok := u.Object[f]; ok {
				fields[f] = v
				delete(u.Object, f)
			}
		}
		if len(fields) == 0 {
			continue
		}
		// The annotations as rendered go in too, so that Open gives back the object
		// exactly (an empty map and none are not the same JSON, nor the same digest).
		if ann, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "annotations"); ok {
			fields["annotations"] = ann
		}
		plain, err := json.Marshal(fields)
		if err != nil {
			return err
		}
		sealed, err := box.SealAnonymous(nil, plain, pub, rand.Reader)
		if err != nil {
			return err
		}
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[SealedAnnotation] = base64.StdEncoding.EncodeToString(sealed)
		u.SetAnnotations(ann)
	}
	return nil
}

// Open opens, in place, what Seal sealed in res with key. A Secret whose sealed
// data does not open with key fails it: the result was not made for this task.
func Open(res *render.Result, key Key) error {
	for _, u := range resultObjects(res) {
		ann := u.GetAnnotations()
		sealed, ok := ann[SealedAnnotation]
		if !ok {
			continue
		}
		if !isSecret(u) {
			return fmt.Errorf("%s %s/%s carries sealed data and is not a Secret", u.GetKind(), u.GetNamespace(), u.GetName())
		}
		b, err := base64.StdEncoding.DecodeString(sealed)
		if err != nil {
			return fmt.Errorf("Secret %s/%s: sealed data is not base64", u.GetNamespace(), u.GetName())
		}
		plain, ok := box.OpenAnonymous(nil, b, key.Public, key.Private)
		if !ok {
			return fmt.Errorf("Secret %s/%s: sealed data does not open with this task's key", u.GetNamespace(), u.GetName())
		}
		fields := map[string]any{}
		if err := json.Unmarshal(plain, &fields); err != nil {
			return fmt.Errorf("Secret %s/%s: sealed data: %w", u.GetNamespace(), u.GetName(), err)
		}
		unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
		for f, v := range fields {
			switch f {
			case "data", "stringData":
				u.Object[f] = v
			case "annotations":
				if err := unstructured.SetNestedField(u.Object, v, "metadata", "annotations"); err != nil {
					return fmt.Errorf("Secret %s/%s: sealed annotations: %w", u.GetNamespace(), u.GetName(), err)
				}
			default:
				return fmt.Errorf("Secret %s/%s: sealed data holds %q", u.GetNamespace(), u.GetName(), f)
			}
		}
	}
	return nil
}
