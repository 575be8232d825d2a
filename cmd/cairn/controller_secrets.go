package main

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/plans"
)

// registryRefIndex indexes the Registry CRs by the Secrets and ConfigMaps they name,
// as "Secret/<name>" and "ConfigMap/<name>".
const registryRefIndex = "cairn.dev/registry-refs"

// registryRefs are the index values of a Registry: its credentials Secret, CA bundle
// ConfigMap, cosign public key Secrets and signing key Secret.
func registryRefs(obj client.Object) []string {
	spec := obj.(*cairnv1.Registry).Spec
	var refs []string
	if spec.SecretRef != nil {
		refs = append(refs, "Secret/"+spec.SecretRef.Name)
	}
	if spec.CAConfigMap != "" {
		refs = append(refs, "ConfigMap/"+spec.CAConfigMap)
	}
	if spec.Verify != nil && spec.Verify.Cosign != nil {
		for _, k := range spec.Verify.Cosign.PublicKeys {
			refs = append(refs, "Secret/"+k.SecretRef.Name)
		}
	}
	if spec.Signing != nil {
		refs = append(refs, "Secret/"+spec.Signing.KeySecretRef.Name)
	}
	return refs
}

// namespaceCache restricts the manager's cache of Secrets and ConfigMaps to cairn's
// namespace: the controller's RBAC reads them there only. The cache keeps no field
// sets of managedFields (withoutFieldSets), and no managedFields at all for Secrets
// and ConfigMaps, of which only the data and creation time are read (content,
// changedSince).
func namespaceCache(namespace string) cache.Options {
	only := map[string]cache.Config{namespace: {}}
	none := cache.TransformStripManagedFields()
	return cache.Options{DefaultTransform: withoutFieldSets, ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Namespaces: only, Transform: withoutPlanData(none)}, &corev1.ConfigMap{}: {Namespaces: only, Transform: none},
	}}
}

// withoutPlanData is then, dropping the data of the Secrets holding pull requests'
// plans (up to 768 KiB each, read by the dashboard from the API server, never from
// the cache): the cache keeps their metadata, whose changes update the dashboard.
func withoutPlanData(then toolscache.TransformFunc) toolscache.TransformFunc {
	return func(in any) (any, error) {
		if s, ok := in.(*corev1.Secret); ok && s.Labels[plans.Label] == "true" {
			s.Data = nil
		}
		return then(in)
	}
}

// withoutFieldSets clears the field sets (FieldsV1) of a cached object's
// managedFields and keeps the rest of each entry: the cache serves lastWriteIsCairns,
// which reads only the manager, time and subresource of each, and the CRs an
// instance reconcile starts from, whose status writes are merge patches of the
// status subresource, where the API server keeps its own managedFields whatever the
// request holds. The sets were most of each cached ModuleInstance (a field manager
// for the spec, one for the status), copied again on every read (docs/benchmarks.md,
// B8 at scale).
func withoutFieldSets(in any) (any, error) {
	obj, err := meta.Accessor(in)
	if err != nil {
		return in, nil
	}
	fields := obj.GetManagedFields()
	if len(fields) == 0 {
		return in, nil
	}
	for i := range fields {
		fields[i].FieldsV1 = nil
	}
	obj.SetManagedFields(fields) // an unstructured object returns a copy
	return in, nil
}

// watchRegistrySecrets makes the leader render and verify again, without a commit,
// the instances whose artifacts come from a Registry when a Secret or ConfigMap that
// Registry names changes in cairn's namespace (a rotated credential, cosign key or
// CA bundle): refresh gets the Registries' names. Objects listed when the watch
// starts are not changes.
func watchRegistrySecrets(ctx context.Context, mgr manager.Manager, namespace string, refresh func(...string), log logr.Logger) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &cairnv1.Registry{}, registryRefIndex, registryRefs); err != nil {
		return fmt.Errorf("failed to index Registries by their Secrets: %w", err)
	}
	started := time.Now()
	for kind, obj := range map[string]client.Object{"Secret": &corev1.Secret{}, "ConfigMap": &corev1.ConfigMap{}} {
		name := "registry-" + strings.ToLower(kind) + "s"
		changed := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			names, err := registriesNaming(ctx, mgr.GetClient(), kind+"/"+req.Name)
			if err != nil || len(names) == 0 {
				return reconcile.Result{}, err
			}
			log.Info("a "+kind+" that Registries name changed: the instances that use them render and verify again",
				"name", req.Name, "registries", names)
			refresh(names...)
			return reconcile.Result{}, nil
		})
		err := ctrl.NewControllerManagedBy(mgr).Named(name).
			For(obj, builder.WithPredicates(inNamespace(namespace), changedSince(started))).Complete(changed)
		if err != nil {
			return fmt.Errorf("failed to watch %ss: %w", kind, err)
		}
	}
	return nil
}

// registriesNaming lists the names of the Registries whose index holds ref.
func registriesNaming(ctx context.Context, c client.Client, ref string) ([]string, error) {
	var list cairnv1.RegistryList
	if err := c.List(ctx, &list, client.MatchingFields{registryRefIndex: ref}); err != nil {
		return nil, fmt.Errorf("failed to list the Registries naming %s: %w", ref, err)
	}
	names := make([]string, 0, len(list.Items))
	for _, r := range list.Items {
		names = append(names, r.Name)
	}
	return names, nil
}

func inNamespace(namespace string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == namespace })
}

// changedSince passes a change of content, a deletion, and a creation after start
// (the watch's first list reports every object as created).
func changedSince(start time.Time) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			return !e.Object.GetCreationTimestamp().Time.Before(start.Truncate(time.Second))
		},
		UpdateFunc: func(e event.UpdateEvent) bool { return !reflect.DeepEqual(content(e.ObjectOld), content(e.ObjectNew)) },
	}
}

// content is the data of a Secret or ConfigMap (what a Registry reads of it).
func content(o client.Object) any {
	switch v := o.(type) {
	case *corev1.Secret:
		return []any{v.Type, v.Data, v.StringData}
	case *corev1.ConfigMap:
		return []any{v.Data, v.BinaryData}
	}
	return nil
}
