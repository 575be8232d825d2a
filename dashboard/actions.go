package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/requests"
	"cairn.dev/cairn/reconciler/status"
)

// The requests the dashboard makes of an instance: those of cairn reconcile,
// suspend, resume, hold, release and rollback.
const (
	actionReconcile = "reconcile"
	actionSuspend   = "suspend"
	actionResume    = "resume"
	actionHold      = "hold"
	actionRelease   = "release"
	actionRollback  = "rollback"
)

// EventReason is the reason of the Event that records a request made from the
// dashboard.
const EventReason = "DashboardRequest"

// action makes a request of an instance: authorised again for this request (a
// SubjectAccessReview of patch on moduleinstances in its namespace), made as the
// user, and recorded as an Event naming them.
func (s *Server) action(w http.ResponseWriter, r *http.Request, id *Identity) {
	ns, name, act := r.PathValue("namespace"), r.PathValue("name"), r.PathValue("action")
	if err := s.checkCSRF(r, id); err != nil {
		s.fail(w, r, id, http.StatusForbidden, err.Error())
		return
	}
	if id.Anonymous {
		s.fail(w, r, id, http.StatusForbidden, "log in to make a request: anonymous access only reads")
		return
	}
	allowed, err := s.opts.Authz.Allowed(r.Context(), id, Access{Verb: "patch", Resource: "moduleinstances", Namespace: ns})
	if err != nil {
		s.opts.Log.Error(err, "access review failed")
		s.fail(w, r, id, http.StatusServiceUnavailable, "the access review failed: try again")
		return
	}
	if !allowed {
		s.fail(w, r, id, http.StatusForbidden, fmt.Sprintf("%s may not %s ModuleInstances in namespace %s (it needs patch on moduleinstances: ClusterRole cairn-dashboard-operate)",
			id.User, act, ns))
		return
	}
	c, err := s.opts.Act.As(id)
	if err != nil {
		s.fail(w, r, id, http.StatusForbidden, err.Error())
		return
	}
	what, err := s.request(r.Context(), c, id, ns, name, act, r.PostFormValue("to"))
	if err != nil {
		s.fail(w, r, id, http.StatusBadRequest, err.Error())
		return
	}
	s.record(r.Context(), ns, name, fmt.Sprintf("%s asked %s from the dashboard", id.User, what))
	s.opts.Log.Info("dashboard request", "user", id.User, "action", act, "instance", ns+"/"+name)
	http.Redirect(w, r, "/instances/"+url.PathEscape(ns)+"/"+url.PathEscape(name)+"?done="+url.QueryEscape(act), http.StatusSeeOther)
}

// request writes the annotation of act on ns/name with c (the user's identity) and
// says what was asked.
func (s *Server) request(ctx context.Context, c client.Client, id *Identity, ns, name, act, to string) (string, error) {
	now := time.Now().UTC()
	switch act {
	case actionReconcile:
		return "a reconcile", requests.Annotate(ctx, c, ns, name, cairnv1.ReconcileRequestAnnotation, now.Format(time.RFC3339Nano), requests.ReconcileManager)
	case actionSuspend:
		return "a suspension", requests.Annotate(ctx, c, ns, name, cairnv1.SuspendAnnotation, "true", requests.SuspendManager)
	case actionResume:
		return "a resumption", requests.Annotate(ctx, c, ns, name, cairnv1.SuspendAnnotation, "", requests.SuspendManager)
	}
	at := metav1.NewTime(now.Truncate(time.Second))
	req := cairnv1.HoldRequest{By: id.User, At: &at}
	what := "a hold"
	switch act {
	case actionHold:
	case actionRelease:
		req.Release, what = true, "a release"
	case actionRollback:
		mi := &cairnv1.ModuleInstance{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mi); err != nil {
			return "", fmt.Errorf("failed to read ModuleInstance %s/%s: %w", ns, name, err)
		}
		target, err := status.RollbackTarget(mi, to)
		if err != nil {
			return "", err
		}
		req.To, what = target.RenderDigest, "a rollback to "+target.RenderDigest+" (revision "+short(target.Revision)+")"
	default:
		return "", fmt.Errorf("no request %q: the dashboard makes reconcile, suspend, resume, hold, release and rollback", act)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	return what, requests.Annotate(ctx, c, ns, name, cairnv1.HoldAnnotation, string(b), requests.HoldManager)
}

// record writes the Event of a request on the instance, as the server.
func (s *Server) record(ctx context.Context, ns, name, message string) {
	if s.opts.Live == nil {
		return
	}
	mi := &cairnv1.ModuleInstance{}
	if err := s.opts.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mi); err != nil {
		return
	}
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: name + ".", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{APIVersion: cairnv1.GroupVersion.String(), Kind: cairnv1.ModuleInstanceKind,
			Namespace: ns, Name: name, UID: mi.UID},
		Reason: EventReason, Message: message, Type: corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "cairn-dashboard"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if err := s.opts.Live.Create(ctx, ev); err != nil {
		s.opts.Log.Error(err, "failed to record the dashboard request", "instance", ns+"/"+name)
	}
}
