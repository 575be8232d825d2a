package main

import (
	"context"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
)

// watchRequests kicks a `cairn sync --interval` loop when a request annotation of a
// ModuleInstance changes (cairn hold, release, rollback, suspend, resume,
// reconcile), as the controller's watch does: the command that asked waits for
// the result, and the loop acts on it at once instead of at its next poll. It
// watches the instances' metadata only, until ctx ends.
func watchRequests(ctx context.Context, kube *kubeFlags, kick func()) error {
	cfg, err := kube.restConfig()
	if err != nil {
		return err
	}
	c, err := cache.New(cfg, cache.Options{Scheme: reconciler.Scheme})
	if err != nil {
		return fmt.Errorf("failed to watch ModuleInstances: %w", err)
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(cairnv1.GroupVersion.WithKind("ModuleInstance"))
	inf, err := c.GetInformer(ctx, meta, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("failed to watch ModuleInstances: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(old, new any) {
		o, ok1 := old.(client.Object)
		n, ok2 := new.(client.Object)
		if ok1 && ok2 && !maps.Equal(syncAnnotations(o), syncAnnotations(n)) {
			kick()
		}
	}}); err != nil {
		return fmt.Errorf("failed to watch ModuleInstances: %w", err)
	}
	go func() { _ = c.Start(ctx) }()
	return nil
}
