package reconciler

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/supply"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/render/declarations"
)

// Rollbacks (`cairn rollback`, the hold annotation's `to`; docs/rollback.md): an
// instance is put back at a render of its history, then held there. Its render
// phase takes the render from the artifact that render was published as, pulled by
// digest once its signature verifies under the publish Registry's key; everything
// after it is a sync's: placement, ownership, the dry-run, the apply as the
// instance's identity, the prune guards for what was added since, health, status.

// rollbackRender is the render phase of r's rollback: the published render of
// r.rollback, its Secrets' data taken from the live Secrets (a published render
// carries none).
func (s *RevisionState) rollbackRender(ctx context.Context, r *instanceState) (rendering, *outcome.Failure) {
	t := r.rollback
	pub := s.platform.Spec.Render.Publish
	if pub == nil || t.Published == nil {
		return s.renderAgain(ctx, r)
	}
	objects, f := s.supplyChain(ctx).PullPublished(ctx, supply.Release{Registry: pub.Registry, Repository: pub.Repository,
		Namespace: r.mi.Namespace, Name: r.mi.Name, Digest: t.Published.Digest, RenderDigest: t.RenderDigest})
	if f != nil {
		return rendering{}, f
	}
	m, err := s.e.cluster.Manager(r.mi.Namespace, s.serviceAccount(r.mi))
	if err != nil {
		return rendering{}, outcome.Classify(cairnv1.ReasonApplyFailed, err)
	}
	for _, u := range objects {
		if err := restoreSecret(ctx, m.Client(), u); err != nil {
			return rendering{}, outcome.NewStalled(cairnv1.ReasonApplyFailed, fmt.Errorf("rollback of %s: %w", r.key(), err))
		}
	}
	d, err := render.ResultDigest(objects, nil)
	if err != nil {
		return rendering{}, outcome.NewStalled(cairnv1.ReasonApplyFailed, err)
	}
	s.step(r.key(), "rollback %s: %s verified and pulled", r.key(), t.Published.Ref)
	return rendering{res: &render.Result{Objects: objects, Digest: d}, fromArtifact: true}, nil
}

// renderAgain is the render phase of r's rollback to a render that was not
// published: the instance rendered again as it was declared at the revision it was
// applied at (read from the repository: this needs Git). Its place phase checks
// that the render is the one the history recorded, to the digest.
func (s *RevisionState) renderAgain(ctx context.Context, r *instanceState) (rendering, *outcome.Failure) {
	t := r.rollback
	if s.e.opts.Revisions == nil {
		return rendering{}, outcome.NewStalled(declarations.ReasonNotAvailable, fmt.Errorf(
			"rollback of %s to %s: the render was not published (render.publish), and this process cannot read revision %s",
			r.key(), t.RenderDigest, t.Revision))
	}
	rev, err := s.e.opts.Revisions(ctx, t.Revision)
	if err != nil {
		return rendering{}, outcome.NewTransient(cairnv1.ReasonSourceFailed, fmt.Errorf(
			"rollback of %s: the render of revision %s was not published, and the revision cannot be read: %w", r.key(), t.Revision, err))
	}
	root, err := rev.Tree.Sub(s.e.opts.Path)
	if err != nil {
		return rendering{}, outcome.NewStalled(cairnv1.ReasonInvalidDeclaration, err)
	}
	set, err := s.e.load(ctx, root)
	if err != nil {
		return rendering{}, outcome.NewStalled(cairnv1.ReasonInvalidDeclaration, fmt.Errorf("rollback of %s: revision %s: %w", r.key(), t.Revision, err))
	}
	mi := set.Instance(r.mi.Namespace, r.mi.Name)
	if mi == nil {
		return rendering{}, outcome.NewStalled(cairnv1.ReasonInvalidDeclaration, fmt.Errorf("rollback of %s: not declared at revision %s", r.key(), t.Revision))
	}
	then, err := s.e.newRevisionFrom(ctx, rev, root, set, true, s.e.instances())
	if err != nil {
		return rendering{}, outcome.Classify(cairnv1.ReasonRenderFailed, err)
	}
	source, _ := then.repositorySource(mi)
	s.step(r.key(), "rollback %s: rendering revision %s again", r.key(), t.Revision)
	return then.renderOne(ctx, mi, source)
}

// restoreSecret gives u, a Secret of a published render (its values redacted),
// the values of its keys from the live Secret, read as the instance's identity;
// other objects are left as they are. A Secret that is gone, or lacks a key the
// render had, cannot be restored from a render that never held its data.
func restoreSecret(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	if u.GetKind() != "Secret" || u.GroupVersionKind().Group != "" {
		return nil
	}
	name := u.GetNamespace() + "/" + u.GetName()
	var live corev1.Secret
	err := c.Get(ctx, client.ObjectKey{Namespace: u.GetNamespace(), Name: u.GetName()}, &live)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("Secret %s is gone, and a published render holds no Secret data to restore it from", name)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("Secret %s", name), err)
	}
	data := map[string]any{}
	for _, field := range []string{"data", "stringData"} {
		keys, _ := u.Object[field].(map[string]any)
		for k := range keys {
			v, ok := live.Data[k]
			if !ok {
				return fmt.Errorf("Secret %s has no key %q any more, and a published render holds no Secret data to restore it from", name, k)
			}
			data[k] = base64.StdEncoding.EncodeToString(v) // as the API's JSON holds it
		}
	}
	delete(u.Object, "stringData")
	u.Object["data"] = data
	return nil
}
