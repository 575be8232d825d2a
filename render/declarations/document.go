package declarations

import (
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// document is one cairn.dev/v1alpha1 YAML document and its identity.
type document struct {
	file      string
	line      int
	root      *yaml.Node
	kind      string
	namespace string
	name      string
}

// problem is a violation found on a typed object, placed in the file by its field path.
type problem struct {
	reason  string
	field   string
	message string
}

// readDocument identifies and decodes one document of f and keeps it in f until the
// file is admitted (see admit); documents of other apiVersions are ignored.
func (l *loader) readDocument(f *file, n *yaml.Node, b *budget) {
	file := f.path
	root := n
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return
	}
	apiVersion, _ := topValue(root, "apiVersion")
	if apiVersion != cairnv1.APIVersion {
		if strings.HasPrefix(apiVersion, cairnv1.GroupVersion.Group+"/") {
			l.unparsed(&Error{Reason: ReasonInvalidDeclaration, File: file, Line: fieldLine(root, "apiVersion"),
				Field: "apiVersion", Message: fmt.Sprintf("unsupported version %q, want %q", apiVersion, cairnv1.APIVersion)})
		}
		return
	}
	d := identify(file, root)
	if e := d.identityError(); e != nil {
		l.unparsed(e)
		return
	}
	obj, errs := decodeDocument(d, b)
	f.entries = append(f.entries, &entry{doc: d, obj: obj, errs: errs})
}

func identify(file string, root *yaml.Node) *document {
	d := &document{file: file, line: root.Line, root: root}
	d.kind, _ = topValue(root, "kind")
	meta := child(root, "metadata")
	d.name, _ = topValue(meta, "name")
	d.namespace, _ = topValue(meta, "namespace")
	return d
}

// identityError reports a document whose kind, name or namespace cannot be read: what it
// declares is unknown.
func (d *document) identityError() *Error {
	switch {
	case d.kind == "":
		return d.errorAt(problem{ReasonInvalidDeclaration, "kind", "required"})
	case d.kind != cairnv1.PlatformKind && d.kind != cairnv1.RegistryKind && d.kind != cairnv1.ModuleInstanceKind:
		return d.errorAt(problem{ReasonInvalidDeclaration, "kind", fmt.Sprintf("unknown kind %q, want Platform, Registry or ModuleInstance", d.kind)})
	case d.name == "":
		return d.errorAt(problem{ReasonInvalidDeclaration, "metadata.name", "required"})
	case d.kind == cairnv1.ModuleInstanceKind && d.namespace == "":
		return d.errorAt(problem{ReasonInvalidDeclaration, "metadata.namespace", "required"})
	}
	return nil
}

// object names the declared object: "namespace/name" or "name".
func (d *document) object() string {
	if d.kind == cairnv1.ModuleInstanceKind {
		return instanceID(d.namespace, d.name)
	}
	return d.name
}

func (d *document) key() string {
	return Key(d.kind, d.namespace, d.name)
}

// errorAt turns a problem into an *Error at the line of its field.
func (d *document) errorAt(p problem) *Error {
	line := d.line
	if p.field != "" {
		line = fieldLine(d.root, p.field)
	}
	return &Error{Reason: p.reason, File: d.file, Line: line, Kind: d.kind, Object: d.object(),
		Field: p.field, Message: p.message}
}

func (d *document) errorsAt(ps []problem) []*Error {
	errs := make([]*Error, 0, len(ps))
	for _, p := range ps {
		errs = append(errs, d.errorAt(p))
	}
	return errs
}
