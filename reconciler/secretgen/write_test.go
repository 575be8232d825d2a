package secretgen

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

var errNo = errors.New("no")

func forbidden() error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errNo)
}

// TestReadFailures: a read that fails fails the declaration with nothing decided.
func TestReadFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		get  func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error
		err  string
		kind outcome.Kind
	}{
		{name: "forbidden", err: "Secret/team-a/db: failed to read: secrets is forbidden", kind: outcome.Stalled,
			get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return forbidden()
			}},
		{name: "unavailable", err: "Secret/team-a/db: failed to read:", kind: outcome.Transient,
			get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return apierrors.NewServiceUnavailable("later")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{Get: tc.get}).Build()
			decls, err := Read(context.Background(), c, secretsInstance(randomSpec("db", 8)), "uid-2", secretsNow, nil)
			g.Expect(decls).To(BeNil())
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
			var f *outcome.Failure
			g.Expect(errors.As(err, &f)).To(BeTrue())
			g.Expect(f.Kind).To(Equal(tc.kind))
		})
	}
}

// TestWrite: what a write leaves in the cluster for each decision, and how it fails.
func TestWrite(t *testing.T) {
	once := randomSpec("db", 8)
	once.Once = true
	rotating := randomSpec("db", 8)
	rotating.RotateAfter = &metav1.Duration{Duration: time.Hour}
	tlsSpec := cairnv1.GeneratedSecret{Name: "db", TLS: &cairnv1.TLSSecretSource{CommonName: "db.team-a.svc"}}
	noGenerator := cairnv1.GeneratedSecret{Name: "db", Data: map[string]cairnv1.SecretValueSource{"password": {}}}
	withLabel := liveSecret("team-a", rotating, 2*time.Hour, "old")
	withLabel.Labels["team"] = "payments"
	oldUID := liveSecret("team-a", once, time.Hour, "kept")
	oldUID.Labels[cairnv1.InstanceUIDLabel] = "uid-1"
	refuseUpdate := interceptor.Funcs{Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
		return forbidden()
	}}

	for _, tc := range []struct {
		name   string
		spec   cairnv1.GeneratedSecret
		live   []client.Object
		funcs  interceptor.Funcs
		writes []string // the targets written, in order
		err    string
		check  func(g *WithT, s *corev1.Secret)
	}{
		{name: "absent: created with new values", spec: once, writes: []string{"team-a/db"},
			check: func(g *WithT, s *corev1.Secret) {
				g.Expect(s.Type).To(Equal(corev1.SecretTypeOpaque))
				g.Expect(s.Data["password"]).To(HaveLen(8))
				g.Expect(s.Labels).To(Equal(map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue,
					cairnv1.InstanceLabel: "team-a.app", cairnv1.GeneratedLabel: "true", cairnv1.InstanceUIDLabel: "uid-2"}))
				g.Expect(s.Annotations).To(Equal(map[string]string{cairnv1.GeneratedAtAnnotation: secretsNow.Format(time.RFC3339),
					cairnv1.SecretSpecAnnotation: SpecDigest(once)}))
			}},
		{name: "kept: nothing written", spec: once, live: []client.Object{liveSecret("team-a", once, time.Hour, "kept")},
			funcs: refuseUpdate,
			check: func(g *WithT, s *corev1.Secret) { g.Expect(string(s.Data["password"])).To(Equal("kept")) }},
		{name: "updated: values kept, the UID label brought up to date", spec: once, live: []client.Object{oldUID},
			writes: []string{"team-a/db"},
			check: func(g *WithT, s *corev1.Secret) {
				g.Expect(string(s.Data["password"])).To(Equal("kept"))
				g.Expect(s.Labels[cairnv1.InstanceUIDLabel]).To(Equal("uid-2"))
				g.Expect(s.Annotations[cairnv1.GeneratedAtAnnotation]).To(Equal(secretsNow.Add(-time.Hour).Format(time.RFC3339)))
			}},
		{name: "rotated: new values, other labels kept", spec: rotating, live: []client.Object{withLabel},
			writes: []string{"team-a/db"},
			check: func(g *WithT, s *corev1.Secret) {
				g.Expect(string(s.Data["password"])).NotTo(Equal("old"))
				g.Expect(s.Data["password"]).To(HaveLen(8))
				g.Expect(s.Labels["team"]).To(Equal("payments"))
				g.Expect(s.Annotations[cairnv1.GeneratedAtAnnotation]).To(Equal(secretsNow.Format(time.RFC3339)))
			}},
		{name: "type change: deleted and created", spec: tlsSpec, live: []client.Object{liveSecret("team-a", rotating, 0, "old")},
			writes: []string{"team-a/db"},
			check: func(g *WithT, s *corev1.Secret) {
				g.Expect(s.Type).To(Equal(corev1.SecretTypeTLS))
				g.Expect(s.Data).To(HaveKey(CertKey))
				g.Expect(s.Data).NotTo(HaveKey("password"))
			}},
		{name: "update refused", spec: rotating, live: []client.Object{withLabel}, funcs: refuseUpdate,
			err:   "Secret/team-a/db: failed to rotate: secrets is forbidden",
			check: func(g *WithT, s *corev1.Secret) { g.Expect(string(s.Data["password"])).To(Equal("old")) }},
		{name: "no generator", spec: noGenerator,
			err: "spec.secrets[0] (db): failed to generate key password: it declares no generator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			c := fake.NewClientBuilder().WithObjects(tc.live...).WithInterceptorFuncs(tc.funcs).Build()
			decls, err := Read(ctx, c, secretsInstance(tc.spec), "uid-2", secretsNow, nil)
			g.Expect(err).NotTo(HaveOccurred())
			var written []string
			err = decls[0].Write(ctx, c, secretsNow, func(t *Target) { written = append(written, t.Key().String()) })
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(written).To(Equal(tc.writes))
			if tc.check == nil {
				return
			}
			var s corev1.Secret
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "db"}, &s)).To(Succeed())
			tc.check(g, &s)
		})
	}
}
