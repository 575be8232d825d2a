package render

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
)

// TestRenderChartSchemaReferences: a values.schema.json (the chart's or a
// subchart's) that refers to anything outside itself is refused before
// Helm's validator, which would load it, sees it.
func TestRenderChartSchemaReferences(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, `{"type": "string"}`)
	}))
	defer srv.Close()
	files := chartFiles(t, "podinfo")
	const root, sub = "values.schema.json", "charts/cache/values.schema.json"
	for _, tc := range []struct {
		name, file, keyword, value string
	}{
		{"https", root, "$ref", srv.URL + "/schema.json"},
		{"http in a subchart", sub, "$ref", srv.URL + "/schema.json"},
		{"file", root, "$ref", "file:///dev/zero"},
		{"absolute path", root, "$ref", "/dev/zero"},
		{"relative file", root, "$ref", "../x.json"},
		{"relative file with pointer", sub, "$ref", "other.json#/definitions/a"},
		{"urn", root, "$ref", "urn:example:schema"},
		{"dynamic ref", root, "$dynamicRef", srv.URL + "/schema.json#meta"},
		{"recursive ref", root, "$recursiveRef", "file:///etc/passwd"},
		{"meta-schema", root, "$schema", srv.URL + "/meta.json"},
		{"meta-schema file", sub, "$schema", "file:///dev/zero"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			schema := fmt.Sprintf(`{"type": "object", "properties": {"message": {%q: %q}}}`, tc.keyword, tc.value)
			archive := chartArchive(t, "podinfo", withFiles(files, map[string]string{tc.file: schema}))
			_, err := RenderChart(context.Background(), chartRequest(archive, `{"message": "hi"}`))
			g.Expect(Reason(err)).To(Equal(ReasonChartInvalid), "error: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("podinfo/%s: %s %q", tc.file, tc.keyword, tc.value)))
			g.Expect(hits.Load()).To(BeZero(), "the schema reached the server")
		})
	}
}

// TestRenderChartSchemaAllowed: references inside the schema and the JSON
// Schema drafts are allowed; keys named like keywords are not references.
func TestRenderChartSchemaAllowed(t *testing.T) {
	files := chartFiles(t, "podinfo")
	for _, schema := range []string{
		`{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"m": {"type": "string"}},
		  "properties": {"message": {"$ref": "#/$defs/m"}}}`,
		`{"$schema": "http://json-schema.org/schema#", "properties": {"message": {"$ref": "#/definitions/m"}},
		  "definitions": {"m": {"type": "string"}}}`,
		`{"$id": "https://example.com/podinfo.json", "properties": {"$ref": {"type": "string"}, "message": {"type": "string"}}}`,
	} {
		g := NewWithT(t)
		archive := chartArchive(t, "podinfo", withFiles(files, map[string]string{"values.schema.json": schema}))
		_, err := RenderChart(context.Background(), chartRequest(archive, `{"message": "hi"}`))
		g.Expect(err).NotTo(HaveOccurred(), "schema %s", schema)
		_, err = RenderChart(context.Background(), chartRequest(archive, `{"message": 1}`))
		g.Expect(Reason(err)).To(Equal(ReasonValuesInvalid), "schema %s", schema)
	}
}

// TestRenderChartSchemaCaps: a schema must be JSON, at most 1 MiB and 100
// levels deep.
func TestRenderChartSchemaCaps(t *testing.T) {
	files := chartFiles(t, "podinfo")
	deep := strings.Repeat(`{"properties": {"a": `, 60) + "{}" + strings.Repeat("}}", 60)
	big := `{"description": "` + strings.Repeat("x", maxSchemaBytes) + `"}`
	for _, tc := range []struct{ name, schema, reason, want string }{
		{"deep", deep, ReasonLimitExceeded, "podinfo/values.schema.json is nested more than 100 levels deep"},
		{"big", big, ReasonLimitExceeded, "podinfo/values.schema.json is 1048595 bytes, more than the 1048576-byte cap"},
		{"not JSON", `{"type": "object",}`, ReasonChartInvalid, "podinfo/values.schema.json is not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			archive := chartArchive(t, "podinfo", withFiles(files, map[string]string{"values.schema.json": tc.schema}))
			_, err := RenderChart(context.Background(), chartRequest(archive, ""))
			g.Expect(Reason(err)).To(Equal(tc.reason), "error: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}
}
