package dashboard

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
)

// objectView is one object of an instance, as it is in the cluster.
type objectView struct {
	Namespace, Name, Instance string
	ID, YAML                  string
}

// object serves one object of an instance's inventory (?id=), read as the user,
// with the values of a Secret masked: a Secret's data is never shown, nor kept in
// any page, whoever asks.
func (s *Server) object(w http.ResponseWriter, r *http.Request, id *Identity) {
	ns, name, objID := r.PathValue("namespace"), r.PathValue("name"), r.URL.Query().Get("id")
	allowed, err := s.opts.Authz.Allowed(r.Context(), id, Access{Verb: "get", Resource: "moduleinstances", Namespace: ns})
	if err != nil || !allowed {
		s.fail(w, r, id, http.StatusNotFound, "no ModuleInstance "+ns+"/"+name+" that you may see")
		return
	}
	mi := &cairnv1.ModuleInstance{}
	if err := s.opts.Reader.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, mi); err != nil || mi.Status.Inventory == nil {
		s.fail(w, r, id, http.StatusNotFound, "no ModuleInstance "+ns+"/"+name+" that you may see")
		return
	}
	inv, err := apply.InventoryStore{Client: s.opts.Live, Namespace: s.opts.Namespace}.Load(r.Context(), mi)
	if err != nil {
		s.fail(w, r, id, http.StatusServiceUnavailable, "the inventory could not be read: try again")
		return
	}
	version := ""
	for _, e := range inv.Entries() {
		if e.ID == objID {
			version = e.Version
		}
	}
	m, err := object.ParseObjMetadata(objID)
	if version == "" || err != nil {
		s.fail(w, r, id, http.StatusNotFound, "no such object in "+ns+"/"+name+"'s inventory")
		return
	}
	c, err := s.opts.Act.As(id)
	if err != nil {
		s.fail(w, r, id, http.StatusForbidden, "log in to read the objects: anonymous access reads only cairn's own records")
		return
	}
	gv, _ := schema.ParseGroupVersion(version)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gv.WithKind(m.GroupKind.Kind))
	if err := c.Get(r.Context(), client.ObjectKey{Namespace: m.Namespace, Name: m.Name}, u); err != nil {
		msg := "it could not be read"
		switch {
		case apierrors.IsNotFound(err):
			msg = "it is not in the cluster"
		case apierrors.IsForbidden(err):
			msg = id.User + " may not read it"
		}
		s.fail(w, r, id, http.StatusNotFound, objID+": "+msg)
		return
	}
	mask(u)
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		s.fail(w, r, id, http.StatusInternalServerError, "the object could not be shown")
		return
	}
	p := s.base(id, m.GroupKind.Kind+" "+m.Name)
	p.Object, p.Scope = &objectView{Namespace: ns, Name: name, Instance: ns + "/" + name, ID: objID, YAML: string(b)}, ns
	s.render(w, r, "object", http.StatusOK, p)
}

// mask removes what must not be shown: managedFields, kubectl's copy of the
// object (a Secret's values among it), and every value of a Secret.
func mask(u *unstructured.Unstructured) {
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	ann := u.GetAnnotations()
	for k := range ann {
		if strings.HasPrefix(k, "kubectl.kubernetes.io/last-applied-configuration") {
			ann[k] = "(not shown)"
		}
	}
	if ann != nil {
		u.SetAnnotations(ann)
	}
	if u.GroupVersionKind().Group != "" || u.GetKind() != "Secret" {
		return
	}
	for _, field := range []string{"data", "stringData"} {
		values, ok := u.Object[field].(map[string]any)
		if !ok {
			continue
		}
		for k, v := range values {
			n := 0
			if s, ok := v.(string); ok {
				n = len(s)
				if b, err := base64.StdEncoding.DecodeString(s); field == "data" && err == nil {
					n = len(b)
				}
			}
			values[k] = fmt.Sprintf("(%d bytes, not shown)", n)
		}
	}
}
