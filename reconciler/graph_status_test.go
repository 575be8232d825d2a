package reconciler

import (
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/graph"
)

func statusOf(name string, ready metav1.ConditionStatus, reason string) cairnv1.ModuleInstance {
	mi := cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name}}
	switch ready {
	case metav1.ConditionTrue:
		conditions.MarkTrue(&mi, "Ready", reason, "")
	case metav1.ConditionFalse:
		conditions.MarkFalse(&mi, "Ready", reason, "")
	default:
		conditions.MarkUnknown(&mi, "Ready", reason, "")
	}
	return mi
}

func TestMarkFromStatus(t *testing.T) {
	g := NewWithT(t)
	in := graph.Graph{
		Nodes: []graph.Node{{Key: "a/ok"}, {Key: "a/waits"}, {Key: "a/provider"}, {Key: "a/broken"}, {Key: "a/busy"},
			{Key: "a/unrendered", State: graph.StateFailed}, {Key: "a/new"}},
		Edges: []graph.Edge{{From: "a/waits", To: "a/broken", Kind: graph.DependsOn}},
	}
	live := []cairnv1.ModuleInstance{
		statusOf("ok", metav1.ConditionTrue, cairnv1.ReasonSucceeded),
		statusOf("waits", metav1.ConditionFalse, cairnv1.ReasonDependencyNotReady),
		statusOf("provider", metav1.ConditionFalse, cairnv1.ReasonProviderNotReady),
		statusOf("broken", metav1.ConditionFalse, cairnv1.ReasonApplyFailed),
		statusOf("busy", metav1.ConditionUnknown, cairnv1.ReasonProgressing),
		statusOf("unrendered", metav1.ConditionTrue, cairnv1.ReasonSucceeded),   // fails to render now: stays failed
		statusOf("elsewhere", metav1.ConditionFalse, cairnv1.ReasonApplyFailed), // not in the graph
	}
	out := MarkFromStatus(in, live)
	states := map[string]graph.State{}
	for _, n := range out.Nodes {
		states[n.Key] = n.State
	}
	g.Expect(states).To(Equal(map[string]graph.State{
		"a/ok": graph.StateOK, "a/waits": graph.StateWaiting, "a/provider": graph.StateWaiting, "a/broken": graph.StateFailed,
		"a/busy": graph.StateOK, "a/unrendered": graph.StateFailed, "a/new": graph.StateOK,
	}))
	g.Expect(out.Edges).To(Equal(in.Edges))
}
