package e2e

import (
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
)

func isTrue(mi *cairnv1.ModuleInstance, t string) bool { return conditions.IsTrue(mi, t) }

func replaceOnce(s, old, new string) string { return strings.Replace(s, old, new, 1) }

// instancePlan is the plan of the instance name (the zero plan when it has none).
func instancePlan(plan *reconciler.Plan, name string) reconciler.InstancePlan {
	for _, ip := range plan.Instances {
		if ip.Name == name {
			return ip
		}
	}
	return reconciler.InstancePlan{}
}
