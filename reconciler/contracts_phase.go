package reconciler

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// inferContracts reads the provider contracts of the revision once its renders
// are done: from the render of each instance rendered this time, and from the
// status of the others (what they provide, as last recorded).
func (s *syncRun) inferContracts() {
	objects := map[string][]*unstructured.Unstructured{}
	provided := map[string][]schema.GroupKind{}
	for _, r := range s.runs {
		switch {
		case r.rendered != nil:
			objects[r.key()] = r.objects
		case r.live != nil:
			provided[r.key()] = parseKindNames(r.live.Status.Provides)
		}
	}
	s.contracts = inferContractsWith(objects, provided)
}

// recordContracts sets what a successfully synced instance provides and requires.
func (s *syncRun) recordContracts(r *instanceRun, mi *cairnv1.ModuleInstance) {
	mi.Status.Provides = s.contracts.providedNames(r.key())
	mi.Status.Requires = s.contracts.requirements(r.key())
}
