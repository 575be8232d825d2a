package declarations

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// parseFile splits a file into YAML documents and reads each of them into f. A file
// that does not parse is recorded as unparsed as a whole (false). Of a file holding more
// than maxDocs documents none is read: admit refuses it under the cap that applies.
func (l *loader) parseFile(f *file, data []byte, maxDocs int) bool {
	docs, err := splitDocuments(data, maxDocs+1)
	f.docs = len(docs)
	for _, n := range docs {
		f.docLines = append(f.docLines, contentLine(n))
	}
	switch {
	case err != nil:
		l.unparsed(&Error{Reason: ReasonInvalidYAML, File: f.path, Line: yamlErrorLine(err), Message: yamlErrorMessage(err)})
		return false
	case len(docs) > maxDocs:
		return true
	}
	b := expansionBudget(len(data))
	for _, n := range docs {
		l.readDocument(f, n, &b)
	}
	return true
}

// splitDocuments parses at most max documents of data.
func splitDocuments(data []byte, max int) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for len(docs) < max {
		n, err := decodeNode(dec)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, n)
	}
	return docs, nil
}

// contentLine is the line where a document's content starts, after any "---".
func contentLine(n *yaml.Node) int {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		return n.Content[0].Line
	}
	return n.Line
}

// decodeNode parses the next document, turning a panic of the parser into an error so
// that no input can crash the caller.
func decodeNode(dec *yaml.Decoder) (n *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = nil, fmt.Errorf("yaml: failed to parse: %v", r)
		}
	}()
	n = &yaml.Node{}
	return n, dec.Decode(n)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

func yamlErrorLine(err error) int {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	line, _ := strconv.Atoi(m[1])
	return line
}

func yamlErrorMessage(err error) string {
	msg := yamlLine.ReplaceAllString(err.Error(), "")
	return "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")
}
