package render

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

// TestRenderErrors asserts, for each failing module, the reason and the
// position (relative to the repository) that the error carries.
func TestRenderErrors(t *testing.T) {
	tests := []struct {
		dir     string
		values  string
		reason  string
		file    string
		line    int
		message string
	}{
		{dir: "modules/syntax", reason: ReasonRenderFailed, file: "modules/syntax/main.cue", line: 5,
			message: "missing ',' in struct literal"},
		{dir: "modules/badref", reason: ReasonRenderFailed, file: "modules/badref/main.cue", line: 9,
			message: `objects.cm.metadata.name: reference "foo" not found`},
		{dir: "modules/conflict", reason: ReasonRenderFailed, file: "modules/conflict/main.cue", line: 10,
			message: "objects.cm.data.port: conflicting values 443 and 80"},
		{dir: "modules/notconcrete", reason: ReasonNotConcrete, file: "modules/notconcrete/main.cue", line: 10,
			message: "objects.cm.data.image: incomplete value string"},
		{dir: "modules/invalid", reason: ReasonInvalidObject, file: "modules/invalid/main.cue", line: 7,
			message: "object objects.nokind has no kind"},
		{dir: "modules/duplicate", reason: ReasonInvalidObject, file: "modules/duplicate/main.cue", line: 7,
			message: "object objects.b duplicates objects.a"},
		{dir: "modules/scalar", reason: ReasonInvalidObject, file: "modules/scalar/main.cue", line: 6,
			message: "object objects.a is a string, not a struct"},
		{dir: "modules/embedparent", reason: ReasonUnsafeModule, file: "modules/embedparent/main.cue", line: 13,
			message: "cannot refer to parent directory"},
		{dir: "modules/embedabs", reason: ReasonUnsafeModule, file: "modules/embedabs/main.cue", line: 13,
			message: "only relative files are allowed"},
		{dir: "modules/importoutside", reason: ReasonModuleNotFound, file: "modules/importoutside/main.cue", line: 3,
			message: `cannot find package "example.com/other/secrets"`},
		// Values that the closed #config rejects name the field.
		{dir: "modules/basic", values: `{"replica": 3}`, reason: ReasonRenderFailed, file: "values.json", line: 1,
			message: "values.replica: field not allowed"},
		{dir: "modules/basic", values: `{"replicas": "three"}`, reason: ReasonRenderFailed, file: "modules/basic/main.cue", line: 4,
			message: `values.replicas: 2 errors in empty disjunction: conflicting values "three" and 1`},
		{dir: "modules/basic", values: `{"replicas": -1}`, reason: ReasonRenderFailed, file: "modules/basic/main.cue", line: 4,
			message: "invalid value -1 (out of bound >=0)"},
		{dir: "modules/basic", values: `{"labels": {"a": 1}}`, reason: ReasonRenderFailed, file: "modules/basic/main.cue", line: 6,
			message: "values.labels.a: conflicting values 1 and string"},
		{dir: "modules/basic", values: `[1, 2]`, reason: ReasonRenderFailed, file: "values.json",
			message: "values must be a JSON object"},
		{dir: "modules/basic", values: `{"replicas": `, reason: ReasonRenderFailed, file: "values.json", line: 1,
			message: "invalid JSON"},
		{dir: "modules/many", values: `{"count": 6000, "size": 1}`, reason: ReasonLimitExceeded,
			message: "module renders 6000 objects, more than MaxObjects (5000)"},
	}
	r := NewRenderer()
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s", tt.dir, tt.values), func(t *testing.T) {
			g := NewWithT(t)
			_, err := renderLocal(t, r, testRepo, tt.dir, tt.values)
			g.Expect(err).To(HaveOccurred())
			var e *Error
			g.Expect(errors.As(err, &e)).To(BeTrue(), "error %v is not an *Error", err)
			g.Expect(e.Reason).To(Equal(tt.reason), "error: %v", err)
			g.Expect(Reason(err)).To(Equal(tt.reason))
			g.Expect(e.File).To(Equal(tt.file), "error: %v", err)
			g.Expect(e.Line).To(Equal(tt.line), "error: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.message))
			if tt.line > 0 {
				g.Expect(err.Error()).To(HavePrefix(fmt.Sprintf("%s:%d:%d: ", tt.file, tt.line, e.Column)))
			}
			g.Expect(err.Error()).NotTo(ContainSubstring("/module/"), "virtual paths must not leak")
		})
	}
}

func TestErrorFormat(t *testing.T) {
	g := NewWithT(t)
	base := errors.New(`reference "foo" not found`)
	g.Expect((&Error{Reason: ReasonRenderFailed, File: "modules/app/main.cue", Line: 12, Column: 3, Err: base}).Error()).
		To(Equal(`modules/app/main.cue:12:3: reference "foo" not found`))
	g.Expect((&Error{File: "a.cue", Line: 2, Err: base}).Error()).To(Equal(`a.cue:2: reference "foo" not found`))
	g.Expect((&Error{File: "a.cue", Err: base}).Error()).To(Equal(`a.cue: reference "foo" not found`))
	g.Expect((&Error{Err: base}).Error()).To(Equal(`reference "foo" not found`))

	wrapped := fmt.Errorf("instance team-a/web: %w", &Error{Reason: ReasonCatalogSkew, Err: base})
	g.Expect(Reason(wrapped)).To(Equal(ReasonCatalogSkew))
	g.Expect(errors.Is(wrapped, base)).To(BeTrue())
	g.Expect(Reason(base)).To(BeEmpty())
	g.Expect(Reason(nil)).To(BeEmpty())
}
