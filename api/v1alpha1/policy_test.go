package v1alpha1

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEffectiveLimits(t *testing.T) {
	yes, no := true, false
	docs := int32(50)
	mem := resource.MustParse("1Gi")
	small := resource.MustParse("64Mi")
	platform := PlatformSpec{Limits: Limits{MaxTimeout: &metav1.Duration{Duration: 12 * time.Hour}, RenderMemory: &mem,
		AllowPruneProtected: &yes, AllowEmpty: &yes}}
	cases := []struct {
		name   string
		tenant *Tenant
		want   EffectiveLimits
	}{
		{name: "the platform's own", want: EffectiveLimits{MaxTimeout: 12 * time.Hour, RenderMemory: 1 << 30,
			MaxFileBytes: DefaultMaxFileBytes, MaxFileDocuments: DefaultMaxFileDocuments, MaxModuleBytes: DefaultMaxModuleBytes,
			AllowPruneProtected: true, AllowEmpty: true}},
		{name: "a tenant that sets nothing inherits", tenant: &Tenant{}, want: EffectiveLimits{MaxTimeout: 12 * time.Hour,
			RenderMemory: 1 << 30, MaxFileBytes: DefaultMaxFileBytes, MaxFileDocuments: DefaultMaxFileDocuments,
			MaxModuleBytes: DefaultMaxModuleBytes, AllowPruneProtected: true, AllowEmpty: true}},
		{name: "a tenant tightens", tenant: &Tenant{Limits: Limits{MaxTimeout: &metav1.Duration{Duration: time.Minute},
			RenderMemory: &small, MaxFileDocuments: &docs, AllowEmpty: &no}}, want: EffectiveLimits{MaxTimeout: time.Minute,
			RenderMemory: 64 << 20, MaxFileBytes: DefaultMaxFileBytes, MaxFileDocuments: 50, MaxModuleBytes: DefaultMaxModuleBytes,
			AllowPruneProtected: true}},
		{name: "a tenant cannot loosen", tenant: &Tenant{Limits: Limits{MaxTimeout: &metav1.Duration{Duration: 48 * time.Hour},
			RenderMemory: resourcePtr("8Gi")}}, want: EffectiveLimits{MaxTimeout: 12 * time.Hour, RenderMemory: 1 << 30,
			MaxFileBytes: DefaultMaxFileBytes, MaxFileDocuments: DefaultMaxFileDocuments, MaxModuleBytes: DefaultMaxModuleBytes,
			AllowPruneProtected: true, AllowEmpty: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(platform.Effective(tc.tenant)).To(Equal(tc.want))
		})
	}
	NewWithT(t).Expect((&PlatformSpec{}).Effective(&Tenant{Limits: Limits{AllowEmpty: &yes}}).AllowEmpty).To(BeFalse(),
		"a tenant cannot grant what the Platform does not")
}

func resourcePtr(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}
