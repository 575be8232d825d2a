package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
)

// SecretPlan is what a sync would do to one generated Secret (spec.secrets) or
// copy; it never holds a value.
type SecretPlan struct {
	// Secret is Secret/<namespace>/<name>.
	Secret string `json:"secret"`
	// Action is create, keep, rotate or update.
	Action string `json:"action"`
	Why    string `json:"why,omitempty"`
}

// readInstanceSecrets reads, as the instance's identity c, the live generated
// Secrets of r and decides what to do with each, before anything of r is written: a
// Secret that is not the instance's, or a read that is forbidden, fails the
// instance with nothing written.
func (s *syncRun) readInstanceSecrets(ctx context.Context, c client.Client, r *instanceRun) *outcome.Failure {
	if len(r.mi.Spec.Secrets) == 0 {
		return nil
	}
	decls, err := readSecrets(ctx, c, r.mi, string(r.live.UID), s.now, nil)
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
func (s *syncRun) writeSecrets(ctx context.Context, c client.Client, r *instanceRun) *outcome.Failure {
	return s.writeInstanceSecrets(ctx, c, r, false)
}

// writeSecretsForHooks writes what readInstanceSecrets decided before the pre hooks
// of event run, when there are any: a hook Job that mounts a generated Secret finds
// it (it would wait for it until the hook's timeout, on every retry). A copy whose
// namespace the render creates is written after the apply, by writeSecrets.
func (s *syncRun) writeSecretsForHooks(ctx context.Context, c client.Client, r *instanceRun, event string) *outcome.Failure {
	if event == "" || len(render.HooksFor(r.hooks(), event)) == 0 {
		return nil
	}
	return s.writeInstanceSecrets(ctx, c, r, true)
}

func (s *syncRun) writeInstanceSecrets(ctx context.Context, c client.Client, r *instanceRun, early bool) *outcome.Failure {
	for _, d := range r.secrets {
		if err := d.writeTargets(ctx, c, s.now, s.reporter(ctx, r), early); err != nil {
			return outcome.Classify(cairnv1.ReasonApplyFailed, err)
		}
	}
	return nil
}

// reporter returns the callback that reports each write of a generated Secret of r
// (names and actions only).
func (s *syncRun) reporter(ctx context.Context, r *instanceRun) func(*secretTarget) {
	return func(t *secretTarget) { s.reportSecret(ctx, r, t) }
}

func (s *syncRun) reportSecret(ctx context.Context, r *instanceRun, t *secretTarget) {
	name := "Secret/" + t.key.Namespace + "/" + t.key.Name
	s.step(r.key(), "secret %s: %s %s (%s)", r.key(), t.action, name, t.why)
	s.e.logger(ctx).Info("generated Secret", "instance", r.key(), "revision", s.rev.SHA, "secret", t.key.String(), "action", string(t.action))
}

func hasRotation(spec cairnv1.GeneratedSecret) bool {
	return spec.RotateAfter != nil && spec.RotateAfter.Duration > 0
}

func instanceRotates(mi *cairnv1.ModuleInstance) bool {
	for _, spec := range mi.Spec.Secrets {
		if hasRotation(spec) {
			return true
		}
	}
	return false
}

// rotateUnaffected rotates, in a sync, the generated Secrets of instances the
// revision does not affect once their rotateAfter has elapsed (no Git change is
// needed); nothing else of those instances is read or written.
func (s *syncRun) rotateUnaffected(ctx context.Context) {
	for _, r := range s.runs {
		if r.affected || r.suspended() || r.live == nil || !instanceRotates(r.mi) {
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
func (s *syncRun) rotateDue(ctx context.Context, r *instanceRun) error {
	m, err := s.e.cluster.Manager(r.mi.Namespace, s.serviceAccount(r.mi))
	if err != nil {
		return err
	}
	decls, err := readSecrets(ctx, m.Client(), r.mi, string(r.live.UID), s.now, hasRotation)
	if err != nil {
		return err
	}
	for _, d := range decls {
		if !d.regenerate {
			continue
		}
		r.secrets = append(r.secrets, d)
		if err := d.write(ctx, m.Client(), s.now, s.reporter(ctx, r)); err != nil {
			return err
		}
	}
	if len(r.secrets) > 0 {
		r.secretNote = "; " + secretSummary(r.secrets)
	}
	return nil
}

// secretSummary says, per declaration, what the sync did: "generated Secrets:
// db-credentials kept, webhook-tls rotated".
func secretSummary(decls []*secretDecl) string {
	if len(decls) == 0 {
		return ""
	}
	parts := make([]string, 0, len(decls))
	for _, d := range decls {
		parts = append(parts, d.spec.Name+" "+pastTense(d.outcome()))
	}
	return "generated Secrets: " + strings.Join(parts, ", ")
}

// outcome is the strongest action among the targets of d.
func (d *secretDecl) outcome() secretAction {
	rank := map[secretAction]int{secretKeep: 0, secretUpdate: 1, secretCreate: 2, secretRotate: 3}
	best := secretKeep
	for _, t := range d.targets {
		if rank[t.action] > rank[best] {
			best = t.action
		}
	}
	return best
}

func pastTense(a secretAction) string {
	return map[secretAction]string{secretKeep: "kept", secretUpdate: "updated", secretCreate: "created", secretRotate: "rotated"}[a]
}

// driftSecrets checks the generated Secrets of an instance in a drift check:
// those whose rotateAfter elapsed are rotated (whatever the drift policy: the
// declaration asks for it); other differences (a Secret or copy deleted or edited
// by hand, labels) are drift, corrected under Correct and reported under Warn.
func (s *syncRun) driftSecrets(ctx context.Context, c client.Client, r *instanceRun, rep *DriftReport) error {
	decls, err := readSecrets(ctx, c, r.mi, string(r.live.UID), time.Now(), nil)
	if err != nil {
		return err
	}
	for _, d := range decls {
		rotation := d.regenerate && d.source != nil
		if !rotation && d.changes() {
			rep.Drifted = append(rep.Drifted, d.changedNames()...)
		}
		if !d.changes() || (!rotation && rep.Policy != cairnv1.DriftCorrect) {
			continue
		}
		if err := d.write(ctx, c, time.Now(), s.reporter(ctx, r)); err != nil {
			return err
		}
		if rotation {
			rep.Rotated = append(rep.Rotated, d.changedNames()...)
		} else {
			rep.Corrected += len(d.changedNames())
		}
	}
	return nil
}

func (d *secretDecl) changedNames() []string {
	var out []string
	for _, t := range d.targets {
		if t.action != secretKeep {
			out = append(out, d.describe(t))
		}
	}
	return out
}

// previewSecrets is what a sync would do to r's generated Secrets, read as its
// identity and without generating anything. For an instance the revision does not
// affect, a sync only rotates: its other Secrets are kept.
func (s *syncRun) previewSecrets(ctx context.Context, r *instanceRun) ([]SecretPlan, error) {
	if len(r.mi.Spec.Secrets) == 0 || r.suspended() {
		return nil, nil
	}
	m, err := s.e.cluster.Manager(r.mi.Namespace, s.serviceAccount(r.mi))
	if err != nil {
		return nil, err
	}
	uid := ""
	if r.live != nil {
		uid = string(r.live.UID)
	}
	decls, err := readSecrets(ctx, m.Client(), r.mi, uid, s.now, nil)
	if err != nil {
		return nil, err
	}
	var out []SecretPlan
	for _, d := range decls {
		synced := r.affected || (r.live != nil && hasRotation(d.spec) && d.regenerate)
		for _, t := range d.targets {
			sp := SecretPlan{Secret: d.describe(t), Action: string(t.action), Why: t.why}
			if !synced {
				sp.Action, sp.Why = string(secretKeep), "the revision does not change the instance and no rotation is due"
			}
			out = append(out, sp)
		}
	}
	return out, nil
}

// previewGenerated adds to ip what a sync would do to r's generated Secrets.
func (s *syncRun) previewGenerated(ctx context.Context, r *instanceRun, ip *InstancePlan) {
	plans, err := s.previewSecrets(ctx, r)
	if err != nil {
		f := outcome.Classify(cairnv1.ReasonApplyFailed, err)
		ip.Action, ip.Reason, ip.Error = outcome.PlanError, f.Reason, f.Error()
		return
	}
	ip.Secrets = plans
}

// secretsChange reports whether a sync would write any of the generated Secrets.
func secretsChange(plans []SecretPlan) bool {
	for _, sp := range plans {
		if sp.Action != string(secretKeep) {
			return true
		}
	}
	return false
}

// SecretLine describes what a sync would do to one generated Secret in one line.
func SecretLine(sp SecretPlan) string {
	return sp.Action + " " + sp.Secret + " (" + sp.Why + ")"
}
