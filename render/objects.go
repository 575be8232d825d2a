package render

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"cairn.dev/cairn/internal/crds"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sjson "k8s.io/apimachinery/pkg/util/json"
)

// Apply stages: objects of a lower stage are applied (and waited on) first.
const (
	StageCRDs = iota
	StageNamespaces
	StageRBAC
	StageOthers
)

// Stage returns the apply stage of an object kind: CustomResourceDefinition,
// then Namespace, then ServiceAccounts and RBAC, then everything else.
func Stage(kind string) int {
	switch kind {
	case "CustomResourceDefinition":
		return StageCRDs
	case "Namespace":
		return StageNamespaces
	case "ClusterRole", "ClusterRoleBinding", "ServiceAccount", "Role", "RoleBinding":
		return StageRBAC
	}
	return StageOthers
}

// clusterScoped lists the built-in cluster-scoped kinds by "group/Kind"
// (core group: "/Kind"). Kinds not listed here and not defined as
// cluster-scoped by a CRD of the same render are taken as namespaced.
var clusterScoped = map[string]bool{
	"/Namespace": true, "/Node": true, "/PersistentVolume": true, "/ComponentStatus": true,
	"rbac.authorization.k8s.io/ClusterRole": true, "rbac.authorization.k8s.io/ClusterRoleBinding": true,
	"apiextensions.k8s.io/CustomResourceDefinition":                 true,
	"admissionregistration.k8s.io/MutatingWebhookConfiguration":     true,
	"admissionregistration.k8s.io/ValidatingWebhookConfiguration":   true,
	"admissionregistration.k8s.io/ValidatingAdmissionPolicy":        true,
	"admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding": true,
	"admissionregistration.k8s.io/MutatingAdmissionPolicy":          true,
	"admissionregistration.k8s.io/MutatingAdmissionPolicyBinding":   true,
	"apiregistration.k8s.io/APIService":                             true,
	"scheduling.k8s.io/PriorityClass":                               true,
	"storage.k8s.io/StorageClass":                                   true, "storage.k8s.io/CSIDriver": true, "storage.k8s.io/CSINode": true,
	"storage.k8s.io/VolumeAttachment": true, "storage.k8s.io/VolumeAttributesClass": true,
	"networking.k8s.io/IngressClass": true, "networking.k8s.io/IPAddress": true, "networking.k8s.io/ServiceCIDR": true,
	"node.k8s.io/RuntimeClass":                                true,
	"certificates.k8s.io/CertificateSigningRequest":           true,
	"certificates.k8s.io/ClusterTrustBundle":                  true,
	"flowcontrol.apiserver.k8s.io/FlowSchema":                 true,
	"flowcontrol.apiserver.k8s.io/PriorityLevelConfiguration": true,
	"resource.k8s.io/DeviceClass":                             true,
	"resource.k8s.io/ResourceSlice":                           true,
}

// assemble turns exported objects into the ordered result.
func assemble(raw []rawObject, namespace, moduleDigest string, warnings []string) (*Result, error) {
	objs := make([]*unstructured.Unstructured, 0, len(raw))
	for _, r := range raw {
		u, err := toObject(r)
		if err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	defaultNamespace(objs, namespace)
	if err := checkDuplicates(objs, raw); err != nil {
		return nil, err
	}
	slices.SortStableFunc(objs, compareObjects)
	digest, err := objectsDigest(objs)
	if err != nil {
		return nil, err
	}
	return &Result{Objects: objs, Digest: digest, ModuleDigest: moduleDigest, Warnings: warnings}, nil
}

// toObject checks that an object has apiVersion, kind and metadata.name.
func toObject(r rawObject) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := k8sjson.Unmarshal(r.data, &m); err != nil {
		return nil, atPosition(newError(ReasonInvalidObject, "object %s: %w", r.key, err), r.pos)
	}
	u := &unstructured.Unstructured{Object: m}
	var missing []string
	for _, f := range [][]string{{"apiVersion"}, {"kind"}, {"metadata", "name"}} {
		if s, ok, _ := unstructured.NestedString(m, f...); !ok || s == "" {
			missing = append(missing, strings.Join(f, "."))
		}
	}
	if len(missing) > 0 {
		return nil, atPosition(newError(ReasonInvalidObject, "object %s has no %s", r.key, strings.Join(missing, ", ")), r.pos)
	}
	if _, err := schema.ParseGroupVersion(u.GetAPIVersion()); err != nil {
		return nil, atPosition(newError(ReasonInvalidObject, "object %s: %w", r.key, err), r.pos)
	}
	return u, nil
}

// defaultNamespace gives namespaced objects without a namespace the
// instance's namespace, and takes the namespace of cluster-scoped ones, as
// kubectl and helm install do (the resource builder's DefaultNamespace and
// FilterNamespace). CRDs of the same render decide the scope of their kinds.
func defaultNamespace(objs []*unstructured.Unstructured, namespace string) {
	scopes := crds.Scopes(objs)
	for _, u := range objs {
		placeNamespace(u, namespace, scopes)
	}
}

// placeNamespace gives u the namespace its scope calls for (see defaultNamespace).
func placeNamespace(u *unstructured.Unstructured, namespace string, scopes map[schema.GroupKind]bool) {
	gk := u.GroupVersionKind().GroupKind()
	namespaced, known := scopes[gk]
	if !known {
		namespaced = !clusterScoped[gk.Group+"/"+gk.Kind]
	}
	switch {
	case !namespaced && u.GetNamespace() != "":
		u.SetNamespace("")
	case namespaced && u.GetNamespace() == "" && namespace != "":
		u.SetNamespace(namespace)
	}
}

func checkDuplicates(objs []*unstructured.Unstructured, raw []rawObject) error {
	seen := map[string]string{}
	for i, u := range objs {
		id := objectKey(u)
		if first, ok := seen[id]; ok {
			return atPosition(newError(ReasonInvalidObject, "object %s duplicates %s (%s)", raw[i].key, first, id), raw[i].pos)
		}
		seen[id] = raw[i].key
	}
	return nil
}

// compareObjects orders by stage, kind, namespace, name, then apiVersion.
func compareObjects(a, b *unstructured.Unstructured) int {
	return cmp.Or(
		cmp.Compare(Stage(a.GetKind()), Stage(b.GetKind())),
		cmp.Compare(a.GetKind(), b.GetKind()),
		cmp.Compare(a.GetNamespace(), b.GetNamespace()),
		cmp.Compare(a.GetName(), b.GetName()),
		cmp.Compare(a.GetAPIVersion(), b.GetAPIVersion()),
	)
}

// objectsDigest is "sha256:<hex>" over the JSON array of the objects as
// encoding/json writes it: map keys sorted, which makes the JSON canonical.
func objectsDigest(objs []*unstructured.Unstructured) (string, error) {
	w := canonicalJSON{buf: make([]byte, 0, 4096)}
	w.buf = append(w.buf, '[')
	for i, u := range objs {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		if err := w.value(u.Object); err != nil {
			return "", newError(ReasonInvalidObject, "failed to encode the objects: %w", err)
		}
	}
	w.buf = append(w.buf, ']')
	sum := sha256.Sum256(w.buf)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
