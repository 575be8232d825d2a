package reconciler

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/placement"
	"cairn.dev/cairn/reconciler/secretgen"
	"cairn.dev/cairn/render"
)

// Generated Secrets (spec.secrets) are read, decided and written by secretgen; this
// file says when a sync does each, as which identity, and reports what was done.

// SecretPlan is what a sync would do to one generated Secret (spec.secrets) or
// copy; it never holds a value.
type SecretPlan = secretgen.Plan

// desiredInventory is everything r owns after this sync: its rendered objects and
// its generated Secrets.
func (r *instanceState) desiredInventory(key []byte) apply.Inventory {
	return desiredInventory(r.mi, r.objects, key)
}

func (r *instanceReconcile) desiredInventory(key []byte) apply.Inventory {
	return desiredInventory(r.mi, r.objects, key)
}

func desiredInventory(mi *cairnv1.ModuleInstance, objects []*unstructured.Unstructured, key []byte) apply.Inventory {
	return apply.InventoryOf(objects, key).Union(secretgen.Inventory(mi))
}

// checkGeneratedSecrets refuses, before anything is written, a generated Secret
// that the instance may not place (see placement: a namespace it may not use, a name
// reserved for inventories), and one that has the name of a rendered object.
func checkGeneratedSecrets(objects []*unstructured.Unstructured, mi *cairnv1.ModuleInstance, pl placement.Placement) error {
	return secretgen.Check(objects, mi, func(u *unstructured.Unstructured) error { return pl.Check(u, true) })
}

// readInstanceSecrets reads, as the instance's identity c, the live generated
// Secrets of r and decides what to do with each, before anything of r is written: a
// Secret that is not the instance's, or a read that is forbidden, fails the
// instance with nothing written.
func (in *revisionInput) readInstanceSecrets(ctx context.Context, c client.Client, r *instanceReconcile) *outcome.Failure {
	if len(r.mi.Spec.Secrets) == 0 {
		return nil
	}
	decls, err := secretgen.Read(ctx, c, r.mi, string(r.live.UID), in.now, nil)
	if err != nil {
		return outcome.Classify(cairnv1.ReasonApplyFailed, err)
	}
	r.secrets = decls
	return nil
}

// writeSecrets writes what readInstanceSecrets decided, once the rendered objects
// are applied (so they were validated first, and the namespaces the render creates
// exist); a workload started a moment earlier finds its Secret at its next retry.
// What writeSecretsForHooks wrote already is left as it is.
func (in *revisionInput) writeSecrets(ctx context.Context, c client.Client, r *instanceReconcile) *outcome.Failure {
	return in.writeInstanceSecrets(ctx, c, r, false)
}

// writeSecretsForHooks writes what readInstanceSecrets decided before the pre hooks
// of event run, when there are any: a hook Job that mounts a generated Secret finds
// it (it would wait for it until the hook's timeout, on every retry). A copy whose
// namespace the render creates is written after the apply, by writeSecrets.
func (in *revisionInput) writeSecretsForHooks(ctx context.Context, c client.Client, r *instanceReconcile, event string) *outcome.Failure {
	if event == "" || len(render.HooksFor(r.hooks(), event)) == 0 {
		return nil
	}
	return in.writeInstanceSecrets(ctx, c, r, true)
}

func (in *revisionInput) writeInstanceSecrets(ctx context.Context, c client.Client, r *instanceReconcile, early bool) *outcome.Failure {
	for _, d := range r.secrets {
		write := d.Write
		if early {
			write = d.WriteEarly
		}
		if err := write(ctx, c, in.now, in.reporter(ctx, r.key())); err != nil {
			return outcome.Classify(cairnv1.ReasonApplyFailed, err)
		}
	}
	return nil
}

// reporter returns the callback that reports each write of a generated Secret of
// the instance key (names and actions only).
func (in *revisionInput) reporter(ctx context.Context, key string) func(*secretgen.Target) {
	return func(t *secretgen.Target) { in.reportSecret(ctx, key, t) }
}

func (in *revisionInput) reportSecret(ctx context.Context, key string, t *secretgen.Target) {
	in.step(key, "secret %s: %s %s (%s)", key, t.Action(), t.Describe(), t.Why())
	in.e.logger(ctx).Info("generated Secret", "instance", key, "revision", in.rev.SHA, "secret", t.Key().String(), "action", string(t.Action()))
}

// rotateUnaffected rotates, in a sync, the generated Secrets of instances the
// revision does not affect once their rotateAfter has elapsed (no Git change is
// needed); nothing else of those instances is read or written.
func (s *RevisionState) rotateUnaffected(ctx context.Context) {
	for _, r := range s.runs {
		if r.affected || r.suspended() || r.held || r.was == nil || !secretgen.InstanceRotates(r.mi) {
			continue
		}
		if err := s.rotateDue(ctx, r); err != nil {
			r.secretNote = fmt.Sprintf("; rotation of generated Secrets failed: %v", err)
			s.e.logger(ctx).Error(err, "failed to rotate generated Secrets", "instance", r.key(), "revision", s.rev.SHA)
			s.step(r.key(), "secret %s: rotation failed: %v", r.key(), err)
		}
	}
}

// rotateDue writes the declarations of r with rotateAfter that must be generated
// again (elapsed, or absent).
func (in *revisionInput) rotateDue(ctx context.Context, r *instanceState) error {
	m, err := in.e.cluster.Manager(r.mi.Namespace, in.serviceAccount(r.mi))
	if err != nil {
		return err
	}
	decls, err := secretgen.Read(ctx, m.Client(), r.mi, string(r.was.UID), in.now, secretgen.HasRotation)
	if err != nil {
		return err
	}
	var rotated []*secretgen.Decl
	for _, d := range decls {
		if !d.Regenerates() {
			continue
		}
		rotated = append(rotated, d)
		if err := d.Write(ctx, m.Client(), in.now, in.reporter(ctx, r.key())); err != nil {
			return err
		}
	}
	if len(rotated) > 0 {
		r.secretNote = "; " + secretgen.Summary(rotated)
	}
	return nil
}

// driftSecrets checks the generated Secrets of an instance in a drift check:
// those whose rotateAfter elapsed are rotated (whatever the drift policy: the
// declaration asks for it); other differences (a Secret or copy deleted or edited
// by hand, labels) are drift, corrected under Correct and reported under Warn.
func (in *revisionInput) driftSecrets(ctx context.Context, c client.Client, mi, live *cairnv1.ModuleInstance, rep *DriftReport) error {
	decls, err := secretgen.Read(ctx, c, mi, string(live.UID), time.Now(), nil)
	if err != nil {
		return err
	}
	for _, d := range decls {
		rotation := d.Rotates()
		if !rotation && d.Changes() {
			rep.Drifted = append(rep.Drifted, d.Changed()...)
		}
		if !d.Changes() || (!rotation && rep.Policy != cairnv1.DriftCorrect) {
			continue
		}
		if err := d.Write(ctx, c, time.Now(), in.reporter(ctx, mi.Namespace+"/"+mi.Name)); err != nil {
			return err
		}
		if rotation {
			rep.Rotated = append(rep.Rotated, d.Changed()...)
		} else {
			rep.Corrected += len(d.Changed())
		}
	}
	return nil
}

// previewSecrets is what a sync would do to r's generated Secrets, read as its
// identity and without generating anything. For an instance the revision does not
// affect, a sync only rotates: its other Secrets are kept.
func (in *revisionInput) previewSecrets(ctx context.Context, r *instanceState) ([]SecretPlan, error) {
	if len(r.mi.Spec.Secrets) == 0 || r.suspended() {
		return nil, nil
	}
	m, err := in.e.cluster.Manager(r.mi.Namespace, in.serviceAccount(r.mi))
	if err != nil {
		return nil, err
	}
	uid := ""
	if r.was != nil {
		uid = string(r.was.UID)
	}
	decls, err := secretgen.Read(ctx, m.Client(), r.mi, uid, in.now, nil)
	if err != nil {
		return nil, err
	}
	return secretgen.Plans(decls, r.affected, r.was != nil), nil
}

// previewGenerated adds to ip what a sync would do to r's generated Secrets.
func (in *revisionInput) previewGenerated(ctx context.Context, r *instanceState, ip *InstancePlan) {
	plans, err := in.previewSecrets(ctx, r)
	if err != nil {
		f := outcome.Classify(cairnv1.ReasonApplyFailed, err)
		ip.Action, ip.Reason, ip.Error = outcome.PlanError, f.Reason, f.Error()
		return
	}
	ip.Secrets = plans
}
