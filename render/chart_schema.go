package render

import (
	"bytes"
	"path"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v3/pkg/chart"
)

const (
	// maxSchemaBytes caps one values.schema.json.
	maxSchemaBytes = 1 << 20
	// maxSchemaDepth caps the nesting of a values.schema.json.
	maxSchemaDepth = 100
)

// schemaRefs are the keywords by which a JSON schema refers to another one.
var schemaRefs = []string{"$ref", "$dynamicRef", "$recursiveRef"}

// metaSchemas are the $schema values the validator knows without loading
// anything (its built-in drafts), without scheme and empty fragment.
var metaSchemas = []string{
	"json-schema.org/schema",
	"json-schema.org/draft/2020-12/schema",
	"json-schema.org/draft/2019-09/schema",
	"json-schema.org/draft-07/schema",
	"json-schema.org/draft-06/schema",
	"json-schema.org/draft-04/schema",
}

// checkSchemas checks the values.schema.json of the chart and of its
// subcharts before Helm compiles them: Helm's validator loads file:, http:
// and https: references, so every reference must stay inside its schema.
func checkSchemas(c *chart.Chart) error {
	if c.Schema != nil {
		if err := checkSchema(path.Join(c.ChartFullPath(), "values.schema.json"), c.Schema); err != nil {
			return err
		}
	}
	for _, d := range c.Dependencies() {
		if err := checkSchemas(d); err != nil {
			return err
		}
	}
	return nil
}

// checkSchema parses a schema as the validator does and walks it.
func checkSchema(file string, data []byte) error {
	if len(data) > maxSchemaBytes {
		return newError(ReasonLimitExceeded, "%s is %d bytes, more than the %d-byte cap", file, len(data), maxSchemaBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return newError(ReasonChartInvalid, "%s is not valid JSON: %v", file, err)
	}
	return walkSchema(file, doc, 0)
}

// walkSchema checks every reference and $schema in v, in key order. It
// walks data keywords (enum, default) too: a value there that looks like a
// reference is refused as well.
func walkSchema(file string, v any, depth int) error {
	if depth > maxSchemaDepth {
		return newError(ReasonLimitExceeded, "%s is nested more than %d levels deep", file, maxSchemaDepth)
	}
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if err := checkKeyword(file, k, v[k]); err != nil {
				return err
			}
			if err := walkSchema(file, v[k], depth+1); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := walkSchema(file, e, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkKeyword refuses references that leave the schema and meta-schemas
// the validator would load.
func checkKeyword(file, key string, v any) error {
	s, ok := v.(string)
	switch {
	case !ok:
	case slices.Contains(schemaRefs, key) && !strings.HasPrefix(s, "#"):
		return newError(ReasonChartInvalid, `%s: %s %q refers outside the schema (only references inside it, "#...", are allowed)`, file, key, s)
	case key == "$schema" && !knownMetaSchema(s):
		return newError(ReasonChartInvalid, `%s: $schema %q is not a JSON Schema draft (draft-04 to 2020-12 at json-schema.org)`, file, s)
	}
	return nil
}

func knownMetaSchema(s string) bool {
	s = strings.TrimSuffix(s, "#")
	s, ok := strings.CutPrefix(s, "https://")
	if !ok {
		s, ok = strings.CutPrefix(s, "http://")
	}
	return ok && slices.Contains(metaSchemas, s)
}
