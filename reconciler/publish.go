package reconciler

import (
	"context"
	"time"

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

// collectTimeout bounds the collection of one instance's published renders.
const collectTimeout = 10 * time.Second

// collectPublished deletes from the publish Registry the artifacts of r's renders
// that are not kept (supply.KeptRenders: the newest render.publish.keep of its
// history, the one just applied, the held ones), with their signatures. It runs
// once the status is written, only after a render was published and applied, and
// is best effort: bounded by collectTimeout, it never fails the instance; a
// Registry that refuses deletes is logged once and not asked again by this process.
// Render Jobs' results and sources (<repository>/<ns>/<name>/render and /source)
// are collected as their tasks are (renderJob.collectArtifacts).
func (s *RevisionState) collectPublished(ctx context.Context, r *instanceReconcile) {
	target := s.platform.Spec.Render.Publish
	if target == nil || s.readOnly || r.published == nil || !r.wrote.applied || ctx.Err() != nil {
		return
	}
	if _, refused := s.e.refusedDeletes.Load(target.Registry); refused {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, collectTimeout)
	defer cancel()
	keep := supply.KeptRenders(r.live.Status.History, target.KeepOrDefault(), r.rendered.Digest, heldRenders(r.live))
	got, err := s.supplyChain(ctx).CollectRenders(ctx, supply.Collection{Registry: target.Registry,
		Repository: target.Repository, Namespace: r.mi.Namespace, Name: r.mi.Name, Keep: keep})
	log := s.e.logger(ctx).WithValues("instance", r.key(), "registry", target.Registry)
	if supply.DeletesRefused(err) {
		if _, had := s.e.refusedDeletes.LoadOrStore(target.Registry, true); !had {
			log.Info("the publish Registry refuses deletes: published renders are not collected", "error", err.Error())
		}
		return
	}
	if err != nil {
		log.Info("failed to collect published renders; the next render applied tries again", "error", err.Error())
	}
	if n := len(got.Renders); n > 0 {
		s.step(r.key(), "collect %s: %d published render(s) deleted, %d signature(s)", r.key(), n, len(got.Signatures))
	}
}

// heldRenders are the render digests of mi whose artifacts are kept whatever
// render.publish.keep says: its last good state's (a failed render applied after
// it may fill the history) and the one a hold names.
func heldRenders(mi *cairnv1.ModuleInstance) []string {
	out := []string{mi.Status.RenderDigest}
	if h := mi.Status.Held; h != nil {
		out = append(out, h.RenderDigest)
	}
	return out
}
