package reconciler

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/sign"
)

// Media types of a published render.
const (
	RenderArtifactType  = "application/vnd.cairn.render.v1+json"
	RenderObjectsMedia  = "application/vnd.cairn.render.objects.v1+yaml"
	RenderObjectsFile   = "objects.yaml"
	annotationRevision  = "org.opencontainers.image.revision"
	annotationSource    = "org.opencontainers.image.source"
	annotationInstance  = "dev.cairn.instance"
	annotationRenderDig = "dev.cairn.render-digest"
)

// publish pushes r's rendered objects to the Platform's publish Registry as an OCI
// artifact tagged by the render digest, signed with that Registry's key, and
// records it on r. A render already published is not pushed again (its signature
// is added if it lacks one). Failing to publish fails the instance before anything
// is applied: every applied state has its signed artifact.
func (s *syncRun) publish(ctx context.Context, r *instanceRun) *outcome.Failure {
	target := s.platform.Spec.Render.Publish
	if target == nil || s.readOnly {
		return nil
	}
	st := s.supplyChain(ctx).regs[target.Registry]
	if st == nil {
		return outcome.NewStalled(cairnv1.ReasonPublishFailed, fmt.Errorf("publish Registry %s is not declared", target.Registry))
	}
	if st.failure != nil {
		return st.failure
	}
	signer, f := s.supplyChain(ctx).signer(ctx, st)
	if f != nil {
		return f
	}
	data, err := renderedYAML(r)
	if err != nil {
		return outcome.NewStalled(cairnv1.ReasonPublishFailed, err)
	}
	repo := strings.Trim(target.Repository, "/") + "/" + r.mi.Namespace + "/" + r.mi.Name
	tag := strings.ReplaceAll(r.rendered.Digest, ":", "-")
	ref := st.reg.Spec.Hostname + "/" + repo + ":" + tag
	// Content-addressed: a tag that exists holds this render already (pushed for an
	// earlier commit); it is not pushed again.
	desc, err := st.client.Resolve(ctx, repo, tag)
	existed := err == nil
	if err != nil && sign.Reason(err) != sign.ReasonNotFound {
		return publishFailure(ref, err)
	}
	if !existed {
		desc, _, err = st.client.PushArtifact(ctx, repo, tag, RenderArtifactType,
			[]sign.File{{Name: RenderObjectsFile, MediaType: RenderObjectsMedia, Data: data}},
			map[string]string{
				annotationRevision: s.rev.SHA, annotationSource: s.e.opts.Repository,
				annotationInstance: r.key(), annotationRenderDig: r.rendered.Digest,
			})
		if err != nil {
			return publishFailure(ref, err)
		}
	}
	signed := false
	if existed {
		_, err := st.client.Verify(ctx, repo, desc.Digest, []*sign.PublicKey{signer.Public()})
		signed = err == nil
	}
	if !signed {
		if err := st.client.Sign(ctx, repo, desc.Digest, signer); err != nil {
			return publishFailure(ref, err)
		}
	}
	r.published = &cairnv1.PublishedArtifact{Ref: ref, Digest: desc.Digest.String(), Revision: s.rev.SHA}
	if existed {
		r.published.Revision = s.previousPublishRevision(r, desc.Digest.String())
	}
	s.step(r.key(), "publish %s: %s@%s", r.key(), ref, desc.Digest)
	return nil
}

// previousPublishRevision keeps the revision the artifact was first published for.
func (s *syncRun) previousPublishRevision(r *instanceRun, dgst string) string {
	if r.live != nil && r.live.Status.Published != nil && r.live.Status.Published.Digest == dgst && r.live.Status.Published.Revision != "" {
		return r.live.Status.Published.Revision
	}
	return s.rev.SHA
}

func publishFailure(ref string, err error) *outcome.Failure {
	err = fmt.Errorf("failed to publish %s: %w", ref, err)
	if sign.Transient(err) {
		return outcome.NewTransient(cairnv1.ReasonPublishFailed, err)
	}
	return outcome.NewStalled(cairnv1.ReasonPublishFailed, err)
}

// renderedYAML is the objects as applied, without the instance UID (the artifact
// is the render, the same for the same inputs) and with the values of Secrets
// replaced by "<redacted>" (an artifact never carries Secret data; the keys stay).
func renderedYAML(r *instanceRun) ([]byte, error) {
	return objectsYAML(r.objects)
}

func objectsYAML(objects []*unstructured.Unstructured) ([]byte, error) {
	var b bytes.Buffer
	for i, u := range objects {
		c := u.DeepCopy()
		labels := c.GetLabels()
		delete(labels, cairnv1.InstanceUIDLabel)
		c.SetLabels(labels)
		redactSecret(c)
		data, err := yaml.Marshal(c.Object)
		if err != nil {
			return nil, fmt.Errorf("failed to encode %s: %w", c.GetName(), err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(data)
	}
	return b.Bytes(), nil
}

// signer loads st's signing key once per sync.
func (sc *supplyChain) signer(ctx context.Context, st *registryState) (*sign.PrivateKey, *outcome.Failure) {
	st.signOnce.Do(func() {
		if st.reg.Spec.Signing == nil {
			st.signErr = outcome.NewStalled(cairnv1.ReasonPublishFailed, fmt.Errorf("Registry %s has no signing key (spec.signing.keySecretRef): cairn publishes only signed artifacts", st.reg.Name))
			return
		}
		name := st.reg.Spec.Signing.KeySecretRef.Name
		s, f := sc.secret(ctx, st.reg.Name, name)
		if f != nil {
			st.signErr = f
			return
		}
		key := s.Data["cosign.key"]
		if len(key) == 0 {
			st.signErr = outcome.NewStalled(cairnv1.ReasonPublishFailed, fmt.Errorf("Registry %s: Secret %s has no cosign.key", st.reg.Name, name))
			return
		}
		pk, err := sign.LoadPrivateKey(key, s.Data["cosign.password"])
		if err != nil {
			st.signErr = outcome.NewStalled(cairnv1.ReasonPublishFailed, fmt.Errorf("Registry %s: Secret %s: the signing key cannot be loaded (wrong cosign.password?): %s", st.reg.Name, name, sign.Reason(err)))
			return
		}
		st.signer = pk
	})
	return st.signer, st.signErr
}

// redactSecret replaces the values of a core Secret's data and stringData.
func redactSecret(u *unstructured.Unstructured) {
	if u.GetKind() != "Secret" || u.GroupVersionKind().Group != "" {
		return
	}
	for _, field := range []string{"data", "stringData"} {
		m, ok := u.Object[field].(map[string]any)
		if !ok {
			continue
		}
		for k := range m {
			m[k] = "<redacted>"
		}
	}
}
