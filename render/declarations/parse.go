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

// parseFile splits a file into YAML documents and reads each of them. Only exceeding
// MaxDocuments is fatal; a file that does not parse is recorded as unparsed as a whole.
func (l *loader) parseFile(file string, data []byte) error {
	docs, err := l.splitDocuments(file, data)
	if err != nil {
		var fatal *Error
		if errors.As(err, &fatal) {
			return fatal
		}
		l.unparsed(&Error{Reason: ReasonInvalidYAML, File: file, Line: yamlErrorLine(err), Message: yamlErrorMessage(err)})
		return nil
	}
	b := expansionBudget(len(data))
	for _, n := range docs {
		l.readDocument(file, n, &b)
	}
	return nil
}

func (l *loader) splitDocuments(file string, data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		n, err := decodeNode(dec)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if l.documents++; l.documents > l.opts.MaxDocuments {
			return nil, &Error{Reason: ReasonTooManyDocuments, File: file, Line: contentLine(n),
				Message: fmt.Sprintf("the repository holds more than %d documents", l.opts.MaxDocuments)}
		}
		docs = append(docs, n)
	}
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
