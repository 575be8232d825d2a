package valuesfrom

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func instance(values string, from ...cairnv1.SecretKeyReference) *cairnv1.ModuleInstance {
	mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
	if values != "" {
		mi.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(values)}
	}
	for _, ref := range from {
		mi.Spec.ValuesFrom = append(mi.Spec.ValuesFrom, cairnv1.ValuesReference{SecretRef: ref})
	}
	return mi
}

// TestRead: valuesFrom objects merge in order under spec.values, and every failure
// names the Secret and key, never what they hold, with the kind its retry needs.
func TestRead(t *testing.T) {
	db := secret("db", map[string]string{"values.yaml": "db:\n  password: Hunter2-Secret\n  port: 5432\n"})
	extra := secret("extra", map[string]string{"v": `{"db": {"port": 6543}, "replicas": 3}`, "bad": "- a list"})
	ref := func(name, key string) cairnv1.SecretKeyReference {
		return cairnv1.SecretKeyReference{Name: name, Key: key}
	}
	for _, tc := range []struct {
		name   string
		mi     *cairnv1.ModuleInstance
		getErr error
		values string
		masks  []string
		kind   outcome.Kind
		err    string
	}{{
		name: "no valuesFrom: spec.values as it is", mi: instance(`{"a":1}`), values: `{"a":1}`,
	}, {
		name: "merged in order, spec.values last", mi: instance(`{"replicas": 5}`, ref("db", "values.yaml"), ref("extra", "v")),
		values: `{"db":{"password":"Hunter2-Secret","port":6543},"replicas":5}`,
		masks:  []string{"db:\n  password: Hunter2-Secret\n  port: 5432", `{"db": {"port": 6543}, "replicas": 3}`, "Hunter2-Secret", "6543", "5432"},
	}, {
		name: "a missing Secret is transient", mi: instance("", ref("gone", "v")), kind: outcome.Transient,
		err: `spec.valuesFrom[0]: Secret team-a/gone not found`,
	}, {
		name: "a missing key stalls", mi: instance("", ref("db", "nope")), kind: outcome.Stalled,
		err: `spec.valuesFrom[0]: Secret team-a/db has no key "nope"`,
	}, {
		name: "not an object stalls", mi: instance("", ref("extra", "bad")), kind: outcome.Stalled,
		err: `spec.valuesFrom[0]: Secret team-a/extra key "bad" does not hold a YAML object of values`,
	}, {
		name: "spec.values not an object stalls", mi: instance(`[1]`, ref("db", "values.yaml")), kind: outcome.Stalled,
		err: "spec.values is not an object",
	}, {
		name: "a denied read keeps its kind", mi: instance("", ref("db", "values.yaml")), kind: outcome.Stalled,
		getErr: apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "db", errors.New("no")),
		err:    "failed to read spec.valuesFrom[0]: Secret team-a/db",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := fake.NewClientBuilder().WithObjects(db, extra)
			if tc.getErr != nil {
				b = b.WithInterceptorFuncs(interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return tc.getErr
				}})
			}
			values, masks, f := Read(context.Background(), b.Build(), tc.mi)
			if tc.err != "" {
				g.Expect(f).NotTo(BeNil())
				g.Expect(f.Error()).To(ContainSubstring(tc.err))
				g.Expect(f.Error()).NotTo(ContainSubstring("Hunter2"))
				g.Expect(f.Kind).To(Equal(tc.kind))
				g.Expect(f.Reason).To(Equal(cairnv1.ReasonValuesFromFailed))
				return
			}
			g.Expect(f).To(BeNil())
			g.Expect(string(values)).To(MatchJSON(tc.values))
			g.Expect(masks).To(ConsistOf(tc.masks))
		})
	}
}

// TestMask: the longest secret string is masked first, short ones never, and a
// failure's message loses them while it keeps its kind and reason.
func TestMask(t *testing.T) {
	g := NewWithT(t)
	raw := "password: Hunter2-Secret-Long"
	masks := secretStrings(map[string]any{"password": "Hunter2-Secret-Long", "n": 7, "short": "abc", "list": []any{"Second-Value"}}, raw)
	g.Expect(masks).To(Equal([]string{raw, "Hunter2-Secret-Long", "Second-Value"}), "longest first; 7 and abc too short to mask")
	g.Expect(Mask("got Hunter2-Secret-Long and Second-Value", masks)).To(Equal("got *** and ***"))
	g.Expect(Masker(nil)).To(BeNil())
	g.Expect(Masker(masks)("x Second-Value")).To(Equal("x ***"))
	f := outcome.NewStalled(cairnv1.ReasonApplyFailed, errors.New("bad value Hunter2-Secret-Long"))
	masked := MaskFailure(f, masks)
	g.Expect(masked.Error()).To(Equal("bad value ***"))
	g.Expect(masked.Kind).To(Equal(outcome.Stalled))
	g.Expect(masked.Reason).To(Equal(cairnv1.ReasonApplyFailed))
	g.Expect(MaskFailure(f, nil)).To(BeIdenticalTo(f))
	g.Expect(MaskFailure(nil, masks)).To(BeNil())
}

// TestReadWithoutValuesFromReadsNothing: the engine calls Read without a client
// when an instance has no valuesFrom.
func TestReadWithoutValuesFromReadsNothing(t *testing.T) {
	g := NewWithT(t)
	values, masks, f := Read(context.Background(), nil, instance(`{"a":1}`))
	g.Expect(f).To(BeNil())
	g.Expect(string(values)).To(Equal(`{"a":1}`))
	g.Expect(masks).To(BeEmpty())
}
