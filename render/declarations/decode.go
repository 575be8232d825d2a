package declarations

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// allowedMetadata are the only metadata fields a declaration may set.
var allowedMetadata = map[string]bool{"name": true, "namespace": true, "labels": true, "annotations": true}

// decodeDocument decodes d strictly into its typed object and checks its metadata. The
// object is nil when the document cannot be decoded at all.
func decodeDocument(d *document, b *budget) (metav1.Object, []*Error) {
	reserved := reservedFields(d)
	errs := d.errorsAt(reserved)
	js, err := toJSON(d.root, b)
	if err != nil {
		return nil, append(errs, d.nodeError(err))
	}
	obj := newObject(d.kind)
	strict, err := sigsjson.UnmarshalStrict(js, obj)
	if err != nil {
		if p := decodeProblem(d, js, err); !slices.ContainsFunc(reserved, func(r problem) bool { return r.field == p.field }) {
			errs = append(errs, d.errorAt(p))
		}
		return nil, errs
	}
	for _, s := range strict {
		errs = append(errs, d.errorAt(strictProblem(s)))
	}
	return obj, append(errs, d.errorsAt(validateMetadata(d.kind, obj))...)
}

func newObject(kind string) metav1.Object {
	switch kind {
	case cairnv1.PlatformKind:
		return &cairnv1.Platform{}
	case cairnv1.RegistryKind:
		return &cairnv1.Registry{}
	default:
		return &cairnv1.ModuleInstance{}
	}
}

// reservedFields reports status (written by cairn only) and metadata fields other than
// name, namespace, labels and annotations, which the typed objects would accept.
func reservedFields(d *document) []problem {
	var ps []problem
	if child(d.root, "status") != nil {
		ps = append(ps, problem{ReasonInvalidDeclaration, "status", "not allowed: status is written by cairn"})
	}
	meta := child(d.root, "metadata")
	if meta == nil || meta.Kind != yaml.MappingNode {
		return ps
	}
	for i := 0; i+1 < len(meta.Content); i += 2 {
		if k := meta.Content[i].Value; !allowedMetadata[k] {
			ps = append(ps, problem{ReasonInvalidDeclaration, "metadata." + k, "unknown field: only name, namespace, labels and annotations are allowed"})
		}
	}
	return ps
}

func (d *document) nodeError(err error) *Error {
	var ne *nodeError
	if !errors.As(err, &ne) {
		return d.errorAt(problem{ReasonInvalidDeclaration, "", err.Error()})
	}
	e := d.errorAt(problem{ne.reason, ne.field, ne.message})
	e.Line = ne.line
	return e
}

// strictProblem turns an unknown or duplicate field reported by sigs.k8s.io/json into a
// problem at that field.
func strictProblem(err error) problem {
	var fe sigsjson.FieldError
	if !errors.As(err, &fe) {
		return problem{ReasonInvalidDeclaration, "", strings.TrimPrefix(err.Error(), "json: ")}
	}
	msg, _, _ := strings.Cut(err.Error(), " \"")
	return problem{ReasonInvalidDeclaration, fe.FieldPath(), msg}
}

// decodeProblem describes a document that does not decode. sigs.k8s.io/json keeps its
// type errors internal, so the document is decoded again with encoding/json to find the
// path of the offending field; a duration that does not parse is found in the nodes.
func decodeProblem(d *document, js []byte, err error) problem {
	var te *json.UnmarshalTypeError
	if err2 := json.Unmarshal(js, newObject(d.kind)); errors.As(err2, &te) && te.Field != "" {
		return problem{ReasonInvalidDeclaration, te.Field, fmt.Sprintf("cannot be %s, want %s", te.Value, typeName(te))}
	}
	if field, value, ok := badDuration(d.root, "", 0); ok {
		return problem{ReasonInvalidDeclaration, field, fmt.Sprintf("invalid duration %q, want e.g. 5m or 1h30m", value)}
	}
	return problem{ReasonInvalidDeclaration, "", strings.TrimPrefix(err.Error(), "json: ")}
}

// durationFields are the keys that hold a metav1.Duration in the API.
var durationFields = map[string]bool{"timeout": true, "rotateAfter": true, "validFor": true}

// badDuration returns the path and value of the first duration field under n that does
// not parse.
func badDuration(n *yaml.Node, path string, depth int) (field, value string, ok bool) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if depth > MaxDepth {
		return "", "", false
	}
	for i, item := range n.Content {
		var sub string
		switch {
		case n.Kind == yaml.SequenceNode:
			sub = path + "[" + strconv.Itoa(i) + "]"
		case n.Kind != yaml.MappingNode || i%2 == 0:
			continue
		case path == "spec" && n.Content[i-1].Value == "values":
			continue // free-form, not decoded into the API types
		default:
			sub = strings.TrimPrefix(path+"."+n.Content[i-1].Value, ".")
			if durationFields[n.Content[i-1].Value] && item.ShortTag() == "!!str" && !isDuration(item.Value) {
				return sub, item.Value, true
			}
		}
		if field, value, ok := badDuration(item, sub, depth+1); ok {
			return field, value, true
		}
	}
	return "", "", false
}

func isDuration(s string) bool {
	_, err := time.ParseDuration(s)
	return err == nil
}

func typeName(te *json.UnmarshalTypeError) string {
	if te.Type == nil {
		return "another type"
	}
	return te.Type.String()
}
