package apply

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func job(status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": "migrate", "namespace": "team-a"}}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func TestDecideJob(t *testing.T) {
	started := job(map[string]any{"startTime": "2026-12-01T10:00:00Z", "active": int64(1)})
	finished := job(map[string]any{"succeeded": int64(1), "conditions": []any{map[string]any{"type": "Complete", "status": "True"}}})
	pending := job(map[string]any{})
	cases := []struct {
		name    string
		applied bool
		live    *unstructured.Unstructured
		force   bool
		want    jobAction
	}{
		{"new Job", false, nil, false, jobApply},
		{"not started yet (e.g. suspended)", true, pending, false, jobApply},
		{"running: left alone", true, started, false, jobKeep},
		{"finished: left alone", true, finished, false, jobKeep},
		{"finished, forced: recreated", true, finished, true, jobRecreate},
		{"finished and removed by its TTL: not created again", true, nil, false, jobKeep},
		{"removed by its TTL, forced: created again", true, nil, true, jobApply},
		{"someone else's finished Job of the same name: not updated", false, finished, false, jobKeep},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(decideJob(tc.applied, tc.live, tc.force)).To(Equal(tc.want))
		})
	}
}

func TestWithoutAppliedJobs(t *testing.T) {
	g := NewWithT(t)
	ran, fresh := job(nil), job(nil)
	fresh.SetName("fresh")
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "team-a"}}}
	inv := InventoryOf([]*unstructured.Unstructured{ran, cm}, []byte("key"))
	inv[ObjectID(fresh)] = InventoryOf([]*unstructured.Unstructured{fresh}, nil)[ObjectID(fresh)]
	e := inv[ObjectID(fresh)]
	e.Hash = "" // pending: recorded before its apply, never applied
	inv[ObjectID(fresh)] = e
	g.Expect(WithoutAppliedJobs([]*unstructured.Unstructured{ran, fresh, cm}, inv)).To(Equal([]*unstructured.Unstructured{fresh, cm}))
}
