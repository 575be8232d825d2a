package reconciler

import (
	"context"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/supply"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// publish pushes r's rendered objects to the Platform's publish Registry as an OCI
// artifact tagged by the render digest, signed with that Registry's key (see
// supply.Chain.Publish), and returns it. Failing to publish fails the instance
// before anything is applied: every applied state has its signed artifact.
func (s *RevisionState) publish(ctx context.Context, r *instanceState, objects []*unstructured.Unstructured, renderDigest string) (*cairnv1.PublishedArtifact, *outcome.Failure) {
	target := s.platform.Spec.Render.Publish
	if target == nil || s.readOnly {
		return nil, nil
	}
	p, f := s.supplyChain(ctx).Publish(ctx, supply.Publication{
		Registry: target.Registry, Repository: target.Repository,
		Namespace: r.mi.Namespace, Name: r.mi.Name, Objects: objects, RenderDigest: renderDigest,
		Revision: s.rev.SHA, Source: s.e.opts.Repository,
	})
	if f != nil {
		return nil, f
	}
	published := &cairnv1.PublishedArtifact{Ref: p.Ref, Digest: p.Digest, Revision: s.rev.SHA, KeyID: p.KeyID}
	if p.Existed {
		published.Revision = s.previousPublishRevision(r, p.Digest)
	}
	s.step(r.key(), "publish %s: %s@%s", r.key(), p.Ref, p.Digest)
	return published, nil
}

// previousPublishRevision keeps the revision the artifact was first published for.
func (in *revisionInput) previousPublishRevision(r *instanceState, dgst string) string {
	if r.was != nil && r.was.Status.Published != nil && r.was.Status.Published.Digest == dgst && r.was.Status.Published.Revision != "" {
		return r.was.Status.Published.Revision
	}
	return in.rev.SHA
}
