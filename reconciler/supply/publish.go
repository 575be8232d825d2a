package supply

import (
	"bytes"
	"context"
	"fmt"

	"github.com/opencontainers/go-digest"
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

// Publication is one instance's render to publish.
type Publication struct {
	// Registry names the publish Registry; Repository is the Platform's repository
	// in it, under which each instance has namespace/name.
	Registry, Repository string
	// Namespace and Name are the instance's.
	Namespace, Name string
	// Objects are the rendered objects as applied.
	Objects []*unstructured.Unstructured
	// RenderDigest is the digest of the render: the artifact's tag.
	RenderDigest string
	// Revision is the commit rendered and Source the repository URL, both recorded
	// as annotations of the artifact.
	Revision, Source string
}

// Published is a published render.
type Published struct {
	// Ref is host/repository:tag and Digest the artifact's manifest digest.
	Ref, Digest string
	// KeyID names the key that signed it (sign.PublicKey.ID).
	KeyID string
	// Existed: the artifact was there already (pushed for an earlier commit).
	Existed bool
}

// Publish pushes p's objects to the publish Registry as an OCI artifact tagged by the
// render digest, signed with that Registry's key. A render already published is not
// pushed again (its signature is added if it lacks one). The artifact carries no
// Secret data and no instance UID (see objectsYAML).
func (sc *Chain) Publish(ctx context.Context, p Publication) (Published, *outcome.Failure) {
	st := sc.regs[p.Registry]
	if st == nil {
		return Published{}, outcome.NewStalled(cairnv1.ReasonPublishFailed, fmt.Errorf("publish Registry %s is not declared", p.Registry))
	}
	if st.failure != nil {
		return Published{}, st.failure
	}
	signer, f := sc.signer(ctx, st)
	if f != nil {
		return Published{}, f
	}
	data, err := objectsYAML(p.Objects)
	if err != nil {
		return Published{}, outcome.NewStalled(cairnv1.ReasonPublishFailed, err)
	}
	repo := instanceRepository(p.Repository, p.Namespace, p.Name)
	tag := RenderTag(p.RenderDigest)
	ref := st.reg.Spec.Hostname + "/" + repo + ":" + tag
	// Content-addressed: a tag that exists holds this render already (pushed for an
	// earlier commit); it is not pushed again.
	desc, err := st.client.Resolve(ctx, repo, tag)
	existed := err == nil
	if err != nil && sign.Reason(err) != sign.ReasonNotFound {
		return Published{}, publishFailure(ref, err)
	}
	if existed && !holdsRender(ctx, st.client, repo, desc.Digest, data, p) {
		// Someone else's content under the render's tag (anyone with the Registry's
		// push credentials, a render Job's pod among them): never signed, replaced.
		existed = false
	}
	if !existed {
		desc, _, err = st.client.PushArtifact(ctx, repo, tag, RenderArtifactType,
			[]sign.File{{Name: RenderObjectsFile, MediaType: RenderObjectsMedia, Data: data}},
			map[string]string{
				annotationRevision: p.Revision, annotationSource: p.Source,
				annotationInstance: p.Namespace + "/" + p.Name, annotationRenderDig: p.RenderDigest,
			})
		if err != nil {
			return Published{}, publishFailure(ref, err)
		}
	}
	signed := false
	if existed {
		_, err := st.client.Verify(ctx, repo, desc.Digest, []*sign.PublicKey{signer.Public()})
		signed = err == nil
	}
	if !signed {
		if err := st.client.Sign(ctx, repo, desc.Digest, signer); err != nil {
			return Published{}, publishFailure(ref, err)
		}
	}
	return Published{Ref: ref, Digest: desc.Digest.String(), KeyID: signer.Public().ID(), Existed: existed}, nil
}

// holdsRender tells whether the artifact dgst of repo holds exactly the render p
// (its objects as published, data, and its instance and render digest): what a
// publication finds under a render's tag is signed only when it is that render.
func holdsRender(ctx context.Context, c *sign.Client, repo string, dgst digest.Digest, data []byte, p Publication) bool {
	files, ann, err := c.PullArtifact(ctx, repo, dgst)
	if err != nil || len(files) != 1 || files[0].Name != RenderObjectsFile || !bytes.Equal(files[0].Data, data) {
		return false
	}
	return ann[annotationInstance] == p.Namespace+"/"+p.Name && ann[annotationRenderDig] == p.RenderDigest
}

func publishFailure(ref string, err error) *outcome.Failure {
	err = fmt.Errorf("failed to publish %s: %w", ref, err)
	if sign.Transient(err) {
		return outcome.NewTransient(cairnv1.ReasonPublishFailed, err)
	}
	return outcome.NewStalled(cairnv1.ReasonPublishFailed, err)
}

// objectsYAML is the objects as a published artifact holds them: without the
// instance UID (the artifact is the render, the same for the same inputs) and with
// the values of Secrets replaced by "<redacted>" (an artifact never carries Secret
// data; the keys stay). The objects given are not changed.
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
func (sc *Chain) signer(ctx context.Context, st *registryState) (*sign.PrivateKey, *outcome.Failure) {
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

// RegistryAccess is a declared Registry as a sync reaches it.
type RegistryAccess struct {
	// Client talks to it with its credentials and CAs.
	Client *sign.Client
	// Registry is its declaration; Credentials its credentials (nil: none), for
	// masking them in what others report of it.
	Registry    *cairnv1.Registry
	Credentials *sign.Credentials
}

// Registry is the declared Registry name, for what pushes and pulls beside a
// publication (the sources and results of render Jobs); a Registry that did not
// load gives its failure.
func (sc *Chain) Registry(name string) (RegistryAccess, *outcome.Failure) {
	st := sc.regs[name]
	if st == nil {
		return RegistryAccess{}, outcome.NewStalled(cairnv1.ReasonPublishFailed, fmt.Errorf("Registry %s is not declared", name))
	}
	if st.failure != nil {
		return RegistryAccess{}, st.failure
	}
	return RegistryAccess{Client: st.client, Registry: st.reg, Credentials: st.creds}, nil
}
