package secretgen

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// Generated Secrets are written with plain create and update requests, never with
// server-side apply: a create never overwrites a Secret that appeared meanwhile, and
// an update carries the resourceVersion that was read, so a Secret changed since it
// was read is never overwritten either; both are retried by the next sync, which
// reads it again. Values are generated only right before the write that stores
// them, and only for a creation or a rotation.

// resolve fixes the values and annotations every target of d holds.
func (d *Decl) resolve(now time.Time) error {
	if d.data != nil {
		return nil
	}
	if d.regenerate {
		data, err := Generate(d.spec, now)
		if err != nil {
			return outcome.NewStalled(cairnv1.ReasonApplyFailed, fmt.Errorf("spec.secrets[%d] (%s): %w", d.index, d.spec.Name, err))
		}
		d.data, d.generatedAt, d.specAnnotation = data, now.UTC().Format(time.RFC3339), d.digest
		return nil
	}
	data, err := Fill(d.spec, d.source.Data, now)
	if err != nil {
		return outcome.NewStalled(cairnv1.ReasonApplyFailed, fmt.Errorf("spec.secrets[%d] (%s): %w", d.index, d.spec.Name, err))
	}
	d.data = data
	d.generatedAt = d.source.Annotations[cairnv1.GeneratedAtAnnotation]
	if d.generatedAt == "" {
		d.generatedAt = d.source.CreationTimestamp.UTC().Format(time.RFC3339)
	}
	d.specAnnotation = d.source.Annotations[cairnv1.SecretSpecAnnotation]
	if d.specAnnotation == "" || len(Missing(d.spec, d.source.Data)) > 0 {
		d.specAnnotation = d.digest
	}
	return nil
}

// Write writes, as c, the targets of d that change and are not written yet, the
// original first, and calls done after each write. Values are generated (at now)
// only for a creation or a rotation, right before the first write that stores them.
func (d *Decl) Write(ctx context.Context, c client.Client, now time.Time, done func(*Target)) error {
	return d.writeTargets(ctx, c, now, done, false)
}

// WriteEarly is Write before the render is applied: a copy whose namespace does not
// exist yet (the render creates it) is left for a later Write.
func (d *Decl) WriteEarly(ctx context.Context, c client.Client, now time.Time, done func(*Target)) error {
	return d.writeTargets(ctx, c, now, done, true)
}

// writeTargets is Write; with early, it is WriteEarly.
func (d *Decl) writeTargets(ctx context.Context, c client.Client, now time.Time, done func(*Target), early bool) error {
	for _, t := range d.targets {
		if t.action == Keep || t.written {
			continue
		}
		if err := d.resolve(now); err != nil {
			return err
		}
		err := d.writeTarget(ctx, c, t)
		if early && t.copy && t.live == nil && apierrors.IsNotFound(err) {
			continue // its namespace is missing
		}
		if err != nil {
			return err
		}
		t.written = true
		done(t)
	}
	return nil
}

func (d *Decl) writeTarget(ctx context.Context, c client.Client, t *Target) error {
	if t.live == nil {
		return d.create(ctx, c, t)
	}
	if t.live.Type != Type(d.spec) {
		return d.recreate(ctx, c, t)
	}
	obj := d.secretFor(t, t.live.DeepCopy())
	if err := c.Update(ctx, obj, client.FieldOwner(cairnv1.FieldManager)); err != nil {
		return outcome.Classify(cairnv1.ReasonApplyFailed, fmt.Errorf("%s: failed to %s: %w", t.Describe(), t.action, err))
	}
	return nil
}

func (d *Decl) create(ctx context.Context, c client.Client, t *Target) error {
	obj := d.secretFor(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: t.key.Namespace, Name: t.key.Name}})
	err := c.Create(ctx, obj, client.FieldOwner(cairnv1.FieldManager))
	switch {
	case apierrors.IsAlreadyExists(err):
		return outcome.NewTransient(cairnv1.ReasonApplyFailed, fmt.Errorf(
			"%s: created by someone else since it was read: left as it is, the next sync reads it again", t.Describe()))
	case err != nil:
		return outcome.Classify(cairnv1.ReasonApplyFailed, fmt.Errorf("%s: failed to create: %w", t.Describe(), err))
	}
	return nil
}

// recreate replaces a Secret whose type must change (the type is immutable): it is
// deleted on the condition that it is still the one read, then created.
func (d *Decl) recreate(ctx context.Context, c client.Client, t *Target) error {
	uid := t.live.UID
	err := c.Delete(ctx, t.live, client.Preconditions{UID: &uid, ResourceVersion: &t.live.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) {
		return outcome.Classify(cairnv1.ReasonApplyFailed, fmt.Errorf("%s: failed to delete to change its type: %w", t.Describe(), err))
	}
	return d.create(ctx, c, t)
}

// secretFor sets on obj what target t holds: type, values, cairn's labels and
// annotations (the others on a live Secret are kept).
func (d *Decl) secretFor(t *Target, obj *corev1.Secret) *corev1.Secret {
	obj.Type = Type(d.spec)
	obj.Data = d.data
	obj.StringData = nil
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels[cairnv1.ManagedByLabel] = cairnv1.ManagedByValue
	obj.Labels[cairnv1.InstanceLabel] = d.owner
	obj.Labels[cairnv1.GeneratedLabel] = "true"
	if d.uid != "" {
		obj.Labels[cairnv1.InstanceUIDLabel] = d.uid
	}
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[cairnv1.GeneratedAtAnnotation] = d.generatedAt
	obj.Annotations[cairnv1.SecretSpecAnnotation] = d.specAnnotation
	if t.copy {
		obj.Annotations[cairnv1.CopiedFromAnnotation] = d.originalName()
	} else {
		delete(obj.Annotations, cairnv1.CopiedFromAnnotation)
	}
	return obj
}
