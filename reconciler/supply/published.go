package supply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/sign"
)

// Release is a published render to apply again (a rollback, docs/rollback.md).
type Release struct {
	// Registry and Repository are the Platform's render.publish; Namespace and
	// Name the instance's; Digest the artifact's manifest digest and RenderDigest
	// the render it must say it is.
	Registry, Repository, Namespace, Name string
	Digest, RenderDigest                  string
}

// PullPublished pulls the published render r by digest, once its signature
// verifies under the publish Registry's own key (the key it was signed with: an
// artifact signed by any other key, or by none, is refused, naming why), and
// checks that its annotations name r's instance and render. It returns the
// objects as published: Secrets hold "<redacted>" in place of their values.
func (sc *Chain) PullPublished(ctx context.Context, r Release) ([]*unstructured.Unstructured, *outcome.Failure) {
	st := sc.regs[r.Registry]
	if st == nil {
		return nil, outcome.NewStalled(cairnv1.ReasonPublishFailed, fmt.Errorf("publish Registry %s is not declared", r.Registry))
	}
	if st.failure != nil {
		return nil, st.failure
	}
	signer, f := sc.signer(ctx, st)
	if f != nil {
		return nil, f
	}
	dgst, err := digest.Parse(r.Digest)
	if err != nil {
		return nil, outcome.NewStalled(cairnv1.ReasonInvalidDeclaration, fmt.Errorf("published render digest %q: %w", r.Digest, err))
	}
	repo := instanceRepository(r.Repository, r.Namespace, r.Name)
	ref := st.reg.Spec.Hostname + "/" + repo + "@" + r.Digest
	if _, err := st.client.Verify(ctx, repo, dgst, []*sign.PublicKey{signer.Public()}); err != nil {
		return nil, pulledFailure(ref, fmt.Errorf("its signature does not verify under Registry %s's key %s: %w", r.Registry, signer.Public().ID(), err))
	}
	files, ann, err := st.client.PullArtifact(ctx, repo, dgst)
	if err != nil {
		return nil, pulledFailure(ref, err)
	}
	if ann[annotationInstance] != r.Namespace+"/"+r.Name || ann[annotationRenderDig] != r.RenderDigest {
		return nil, outcome.NewStalled(cairnv1.ReasonSignatureInvalid, fmt.Errorf("%s is not the render %s of %s/%s (it says %q of %q)",
			ref, r.RenderDigest, r.Namespace, r.Name, ann[annotationRenderDig], ann[annotationInstance]))
	}
	if len(files) != 1 || files[0].Name != RenderObjectsFile {
		return nil, outcome.NewStalled(cairnv1.ReasonSignatureInvalid, fmt.Errorf("%s holds no %s alone", ref, RenderObjectsFile))
	}
	objects, err := parseObjects(files[0].Data)
	if err != nil {
		return nil, outcome.NewStalled(cairnv1.ReasonSignatureInvalid, fmt.Errorf("%s: %w", ref, err))
	}
	return objects, nil
}

func pulledFailure(ref string, err error) *outcome.Failure {
	err = fmt.Errorf("failed to pull the published render %s: %w", ref, err)
	switch {
	case sign.Transient(err):
		return outcome.NewTransient(cairnv1.ReasonPublishFailed, err)
	case sign.Reason(err) == sign.ReasonNotFound:
		return outcome.NewStalled(cairnv1.ReasonPublishFailed, err)
	}
	return outcome.NewStalled(cairnv1.ReasonSignatureInvalid, err)
}

// parseObjects reads the YAML stream objectsYAML wrote.
func parseObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if obj == nil {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}
