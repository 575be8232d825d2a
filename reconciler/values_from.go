package reconciler

import (
	"context"
	"fmt"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/valuesfrom"
)

// instanceValues returns the values of mi's render and the strings to mask (see
// valuesfrom.Read), reading spec.valuesFrom as mi's identity; never from cairn's
// own namespace.
func (in *revisionInput) instanceValues(ctx context.Context, mi *cairnv1.ModuleInstance) ([]byte, []string, *outcome.Failure) {
	if len(mi.Spec.ValuesFrom) == 0 {
		return valuesfrom.Read(ctx, nil, mi)
	}
	if mi.Namespace == in.e.namespace() { // refused with the declaration already; never read here
		return nil, nil, outcome.NewStalled(cairnv1.ReasonNamespaceDenied, fmt.Errorf("spec.valuesFrom: namespace %s is cairn's own namespace, never read", mi.Namespace))
	}
	m, err := in.e.cluster.Manager(mi.Namespace, in.serviceAccount(mi))
	if err != nil {
		return nil, nil, outcome.NewTransient(cairnv1.ReasonValuesFromFailed, err)
	}
	return valuesfrom.Read(ctx, m.Client(), mi)
}
