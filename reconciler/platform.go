package reconciler

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler/status"
)

// mirrorPlatform applies the Platform and Registries from Git and deletes Registry CRs
// whose declaration left Git.
func (s *RevisionState) mirrorPlatform(ctx context.Context) error {
	c := s.e.cluster.client
	p := s.set.Platform.DeepCopy()
	if err := mirror(ctx, c, p, nil); err != nil {
		return err
	}
	s.platform = p
	keep := map[string]bool{}
	for _, r := range s.set.Registries {
		keep[r.Name] = true
		if err := s.mirrorRegistry(ctx, r.DeepCopy()); err != nil {
			return err
		}
	}
	return s.deleteStaleRegistries(ctx, keep)
}

func (s *RevisionState) mirrorRegistry(ctx context.Context, r *cairnv1.Registry) error {
	c := s.e.cluster.client
	if err := mirror(ctx, c, r, nil); err != nil {
		return err
	}
	before := r.DeepCopy()
	r.Status.ObservedGeneration = r.Generation
	r.Status.LastAppliedRevision = s.rev.SHA
	if f := s.supplyChain(ctx).RegistryFailure(r.Name); f != nil {
		status.SetReady(r, false, f.Reason, f.Error())
	} else {
		status.SetReady(r, true, cairnv1.ReasonSucceeded, fmt.Sprintf("declared at %s", gitsource.ShortSHA(s.rev.SHA)))
	}
	defer s.e.emitTransition(before, r)
	return patchStatus(ctx, c, r, before)
}

func (in *revisionInput) deleteStaleRegistries(ctx context.Context, keep map[string]bool) error {
	if !in.removeOK {
		return nil
	}
	var list cairnv1.RegistryList
	c := in.e.cluster.client
	if err := c.List(ctx, &list, client.MatchingLabels{cairnv1.ManagedByLabel: cairnv1.ManagedByValue}); err != nil {
		return fmt.Errorf("failed to list Registries: %w", err)
	}
	for i := range list.Items {
		if r := &list.Items[i]; !keep[r.Name] {
			if err := c.Delete(ctx, r); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("failed to delete Registry %s: %w", r.Name, err)
			}
		}
	}
	return nil
}
