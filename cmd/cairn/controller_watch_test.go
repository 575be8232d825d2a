package main

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/reconciler/loop"
)

func TestRegistryRefsNameEverySecretAndConfigMap(t *testing.T) {
	g := NewWithT(t)
	reg := &cairnv1.Registry{Spec: cairnv1.RegistrySpec{
		Hostname: "r.example.com", CAConfigMap: "ca",
		SecretRef: &cairnv1.LocalObjectReference{Name: "creds"},
		Verify: &cairnv1.RegistryVerify{Cosign: &cairnv1.CosignVerify{PublicKeys: []cairnv1.PublicKeySource{
			{SecretRef: cairnv1.SecretKeyReference{Name: "pub-a"}}, {SecretRef: cairnv1.SecretKeyReference{Name: "pub-b"}},
		}}},
		Signing: &cairnv1.RegistrySigning{KeySecretRef: cairnv1.LocalObjectReference{Name: "signer"}},
	}}
	g.Expect(registryRefs(reg)).To(Equal([]string{"Secret/creds", "ConfigMap/ca", "Secret/pub-a", "Secret/pub-b", "Secret/signer"}))
	g.Expect(registryRefs(&cairnv1.Registry{})).To(BeEmpty())
}

func TestOnlyAChangeOfContentRefreshes(t *testing.T) {
	start := time.Now()
	secret := func(created time.Time, data string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
			Data: map[string][]byte{"cosign.pub": []byte(data)}}
	}
	p := changedSince(start)
	tests := []struct {
		name string
		pass bool
		got  func() bool
	}{
		{"listed when the watch started", false, func() bool { return p.Create(event.CreateEvent{Object: secret(start.Add(-time.Hour), "k")}) }},
		{"created after the start", true, func() bool { return p.Create(event.CreateEvent{Object: secret(start.Add(2*time.Second), "k")}) }},
		{"data rotated", true, func() bool {
			return p.Update(event.UpdateEvent{ObjectOld: secret(start, "k1"), ObjectNew: secret(start, "k2")})
		}},
		{"metadata only", false, func() bool {
			n := secret(start, "k")
			n.Annotations = map[string]string{"a": "b"}
			return p.Update(event.UpdateEvent{ObjectOld: secret(start, "k"), ObjectNew: n})
		}},
		{"ConfigMap bundle changed", true, func() bool {
			return p.Update(event.UpdateEvent{ObjectOld: &corev1.ConfigMap{Data: map[string]string{"ca.crt": "1"}},
				ObjectNew: &corev1.ConfigMap{Data: map[string]string{"ca.crt": "2"}}})
		}},
		{"deleted", true, func() bool { return p.Delete(event.DeleteEvent{Object: secret(start, "k")}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { NewWithT(t).Expect(tt.got()).To(Equal(tt.pass)) })
	}
}

// TestAPushToAReplicaThatDoesNotLeadIsPassedOn: a verified push wakes the sync loop
// of the replica that leads; another replica queues a request to the leader.
func TestAPushToAReplicaThatDoesNotLeadIsPassedOn(t *testing.T) {
	g := NewWithT(t)
	h := newControllerHooks(&forgeWiring{}, "", loop.New(loop.Options{}), nil, logr.Discard())
	h.onPush(forge.Push{SHAHint: "abc"})
	g.Expect(h.requests.C()).To(Receive(), "passed on")

	led := make(chan bool, 1)
	g.Expect(h.lead(context.Background(), func(context.Context) error {
		h.onPush(forge.Push{SHAHint: "abc"})
		led <- h.leading.Load()
		return nil
	})).To(Succeed())
	g.Expect(led).To(Receive(BeTrue()))
	g.Expect(h.requests.C()).NotTo(Receive(), "the leader syncs it itself")
	g.Expect(h.leading.Load()).To(BeFalse(), "not leading once the loop has stopped")
}

// TestAPlanRequestDoesNotKickASync: the plan request annotations a replica passes on
// ask for a plan, not a sync; any other annotation change still kicks.
func TestAPlanRequestDoesNotKickASync(t *testing.T) {
	g := NewWithT(t)
	platform := func(ann map[string]string) *cairnv1.Platform {
		p := &cairnv1.Platform{}
		p.Annotations = ann
		return p
	}
	before := platform(map[string]string{"a": "1"})
	g.Expect(syncAnnotationsChanged.Update(event.UpdateEvent{ObjectOld: before,
		ObjectNew: platform(map[string]string{"a": "1", cairnv1.PlanRequestAnnotationPrefix + "7": "t"})})).To(BeFalse())
	g.Expect(syncAnnotationsChanged.Update(event.UpdateEvent{ObjectOld: before,
		ObjectNew: platform(map[string]string{"a": "1", cairnv1.ReconcileRequestAnnotation: "t"})})).To(BeTrue())
}

// TestARemovedAnnotationKicksASync: `cairn release` removes the hold annotation
// with a manager that owned nothing else, so that cairn's mirror is the latest
// write left: the removal still kicks a sync, while cairn's own write does not.
func TestARemovedAnnotationKicksASync(t *testing.T) {
	g := NewWithT(t)
	now := metav1.Now()
	mine := []metav1.ManagedFieldsEntry{{Manager: cairnv1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, Time: &now}}
	held := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{cairnv1.HoldAnnotation: "{}"}, ManagedFields: mine}}
	released := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{ManagedFields: mine}}
	g.Expect(notOwnWrite.Update(event.UpdateEvent{ObjectOld: held, ObjectNew: released})).To(BeTrue())
	g.Expect(notOwnWrite.Update(event.UpdateEvent{ObjectOld: released, ObjectNew: released.DeepCopy()})).To(BeFalse(), "cairn's own write")
}
