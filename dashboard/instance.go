package dashboard

import (
	"context"
	"html/template"
	"sort"
	"strings"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	cairnstatus "cairn.dev/cairn/reconciler/status"
)

// maxLiveObjects bounds the objects whose health an instance page reads live: an
// instance of thousands of objects shows the rest unread.
const maxLiveObjects = 300

// healthReads is how many objects a page reads at once.
const healthReads = 16

// instanceView is the instance page.
type instanceView struct {
	Row         row
	Spec        string // the module, as declared
	Conditions  []metav1.Condition
	Held        *cairnv1.HeldRender
	HeldText    string
	History     []historyRow
	Inventory   []inventoryGroup
	Unread      int
	Events      []corev1.Event
	Published   *cairnv1.PublishedArtifact
	Source      string
	Annotations []keyValue
	Graph       template.HTML
	CanAct      bool
	Actions     []string
	Done        string
}

type keyValue struct{ Key, Value string }

// hiddenAnnotations are not shown: cairn's bookkeeping, and kubectl's copy of the
// whole object.
var hiddenAnnotations = map[string]bool{
	"kubectl.kubernetes.io/last-applied-configuration": true,
	"cairn.dev/spec-digest":                            true, "cairn.dev/input-digest": true, "cairn.dev/input-revision": true, "cairn.dev/input-refresh": true,
	"cairn.dev/origin": true,
}

type historyRow struct {
	Revision, RevisionURL, Digest, Artifact, KeyID, Result, Reason, Took string
	Time                                                                 metav1.Time
	Objects                                                              int32
}

// inventoryGroup is the objects of one namespace, by kind.
type inventoryGroup struct {
	Namespace string
	Kinds     []inventoryKind
}

type inventoryKind struct {
	Kind    string
	Objects []inventoryObject
}

type inventoryObject struct {
	ID, Name, Health, Message string
}

// instanceOf builds the page of namespace/name; ok is false when id may not see it
// or it does not exist (the same answer, so its existence does not leak).
func (s *Server) instanceOf(ctx context.Context, id *Identity, namespace, name string) (*instanceView, bool, error) {
	allowed, err := s.opts.Authz.Allowed(ctx, id, Access{Verb: "get", Resource: "moduleinstances", Namespace: namespace})
	if err != nil || !allowed {
		return nil, false, err
	}
	mi := &cairnv1.ModuleInstance{}
	if err := s.opts.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, mi); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	v := &instanceView{Row: s.rowOf(mi), Spec: moduleOf(mi.Spec.Module), Conditions: mi.Status.Conditions,
		Held: mi.Status.Held, Published: mi.Status.Published, Source: mi.Annotations["cairn.dev/source"]}
	if v.Held != nil {
		v.HeldText = cairnstatus.HeldMessage(v.Held)
	}
	for k, val := range mi.Annotations {
		if !hiddenAnnotations[k] {
			v.Annotations = append(v.Annotations, keyValue{k, val})
		}
	}
	sort.Slice(v.Annotations, func(i, j int) bool { return v.Annotations[i].Key < v.Annotations[j].Key })
	for _, h := range mi.Status.History {
		hr := historyRow{Revision: h.Revision, RevisionURL: s.commitURL(h.Revision), Digest: h.RenderDigest,
			Result: h.Result, Reason: h.Reason, Time: h.Time, Objects: h.Objects}
		if h.Duration != nil {
			hr.Took = h.Duration.Duration.String()
		}
		if h.Published != nil {
			hr.Artifact, hr.KeyID = h.Published.Ref, h.Published.KeyID
		}
		v.History = append(v.History, hr)
	}
	// The objects' health and the Events are read as the user: a page shows nothing
	// of the cluster its reader may not read. An anonymous reader, or a user whose
	// client cannot be made, gets neither (never the server's own reads).
	var asUser client.Reader
	if !id.Anonymous && s.opts.Act != nil {
		if c, err := s.opts.Act.As(id); err == nil {
			asUser = c
		}
	}
	v.Inventory, v.Unread = s.inventoryOf(ctx, mi, asUser)
	v.Events = eventsOf(ctx, asUser, mi)
	if !id.Anonymous {
		v.CanAct, _ = s.opts.Authz.Allowed(ctx, id, Access{Verb: "patch", Resource: "moduleinstances", Namespace: namespace})
	}
	v.Actions = actionsFor(mi)
	v.Graph = s.graphOf(ctx, id, mi)
	return v, true, nil
}

// inventoryOf groups mi's objects by namespace and kind, with the health of the
// first maxLiveObjects read live (kstatus, as a sync's health wait reads it).
func (s *Server) inventoryOf(ctx context.Context, mi *cairnv1.ModuleInstance, asUser client.Reader) ([]inventoryGroup, int) {
	if mi.Status.Inventory == nil || s.opts.Live == nil {
		return nil, 0
	}
	inv, err := apply.InventoryStore{Client: s.opts.Live, Namespace: s.opts.Namespace}.Load(ctx, mi)
	if err != nil {
		s.opts.Log.Error(err, "failed to read an inventory", "instance", mi.Namespace+"/"+mi.Name)
		return nil, 0
	}
	type read struct {
		m       object.ObjMetadata
		version string
		o       inventoryObject
	}
	var reads []*read
	unread := 0
	for i, e := range inv.Entries() {
		m, err := object.ParseObjMetadata(e.ID)
		if err != nil {
			continue
		}
		r := &read{m: m, version: e.Version, o: inventoryObject{ID: e.ID, Name: m.Name, Health: "Unknown"}}
		switch {
		case asUser == nil:
			r.o.Message = "not read: log in to see it"
		case i >= maxLiveObjects:
			unread++
		}
		reads = append(reads, r)
	}
	if asUser != nil { // read at most healthReads at once
		var wg sync.WaitGroup
		sem := make(chan struct{}, healthReads)
		for i, r := range reads {
			if i >= maxLiveObjects {
				break
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				r.o.Health, r.o.Message = healthOf(ctx, asUser, r.m, r.version)
			}()
		}
		wg.Wait()
	}
	groups := map[string]map[string][]inventoryObject{}
	for _, r := range reads {
		if groups[r.m.Namespace] == nil {
			groups[r.m.Namespace] = map[string][]inventoryObject{}
		}
		kind := r.m.GroupKind.Kind
		if r.m.GroupKind.Group != "" {
			kind += "." + r.m.GroupKind.Group
		}
		groups[r.m.Namespace][kind] = append(groups[r.m.Namespace][kind], r.o)
	}
	var out []inventoryGroup
	for ns, kinds := range groups {
		g := inventoryGroup{Namespace: ns}
		for k, objs := range kinds {
			sort.Slice(objs, func(i, j int) bool { return objs[i].Name < objs[j].Name })
			g.Kinds = append(g.Kinds, inventoryKind{Kind: k, Objects: objs})
		}
		sort.Slice(g.Kinds, func(i, j int) bool { return g.Kinds[i].Kind < g.Kinds[j].Kind })
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out, unread
}

// healthOf reads one object with c and computes its kstatus.
func healthOf(ctx context.Context, c client.Reader, m object.ObjMetadata, version string) (string, string) {
	u := &unstructured.Unstructured{}
	gv, err := schema.ParseGroupVersion(version)
	if err != nil {
		return "Unknown", ""
	}
	u.SetGroupVersionKind(gv.WithKind(m.GroupKind.Kind))
	if err := c.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Name}, u); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return "NotFound", "not in the cluster"
		case apierrors.IsForbidden(err):
			return "Unknown", "you may not read it"
		}
		return "Unknown", "could not be read"
	}
	res, err := status.Compute(u)
	if err != nil {
		return "Unknown", ""
	}
	return string(res.Status), res.Message
}

// eventsOf lists the Events of mi with c, newest first (at most 30).
func eventsOf(ctx context.Context, c client.Reader, mi *cairnv1.ModuleInstance) []corev1.Event {
	if c == nil {
		return nil
	}
	var list corev1.EventList
	if err := c.List(ctx, &list, client.InNamespace(mi.Namespace), client.MatchingFields{
		"involvedObject.name": mi.Name, "involvedObject.kind": cairnv1.ModuleInstanceKind}); err != nil {
		return nil
	}
	sort.Slice(list.Items, func(i, j int) bool { return lastSeen(&list.Items[i]).After(lastSeen(&list.Items[j]).Time) })
	if len(list.Items) > 30 {
		list.Items = list.Items[:30]
	}
	return list.Items
}

func lastSeen(e *corev1.Event) (t metav1.Time) {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case e.EventTime.Time.IsZero():
		return e.CreationTimestamp
	}
	return metav1.NewTime(e.EventTime.Time)
}

// actionsFor are the requests the instance page offers for mi's state.
func actionsFor(mi *cairnv1.ModuleInstance) []string {
	out := []string{actionReconcile}
	if cairnstatus.SuspendAnnotated(mi) {
		out = append(out, actionResume)
	} else {
		out = append(out, actionSuspend)
	}
	if mi.Status.Held != nil || mi.Annotations[cairnv1.HoldAnnotation] != "" {
		out = append(out, actionRelease)
	} else {
		out = append(out, actionHold)
	}
	return out
}

func eventTime(e corev1.Event) string {
	t := lastSeen(&e)
	return since(&t)
}

func joinLines(s string) string { return strings.Join(strings.Fields(s), " ") }
