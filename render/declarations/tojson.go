package declarations

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// budget is what the documents of one file may still expand to: nodes visited and JSON
// bytes written, aliases counted every time they are followed.
type budget struct {
	nodes int64
	bytes int64
}

// nodeError is a problem at one node of a document.
type nodeError struct {
	reason  string
	line    int
	field   string
	message string
}

func (e *nodeError) Error() string { return e.message }

// converter writes a YAML node tree as JSON, bounded in depth and expansion.
type converter struct {
	buf    bytes.Buffer
	budget *budget
	// path is the field being converted, for errors.
	path []segment
}

// segment is a key of a mapping, or an index of a sequence when key is empty.
type segment struct {
	key   string
	index int
}

// maxFieldSegments caps the field path reported in an error (deep nesting is an error).
const maxFieldSegments = 12

func (c *converter) fail(reason string, n *yaml.Node, message string) error {
	var b strings.Builder
	for i, s := range c.path {
		switch {
		case i == maxFieldSegments:
			b.WriteString("...")
			return &nodeError{reason, n.Line, b.String(), message}
		case s.key == "":
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		case i > 0:
			b.WriteString("." + s.key)
		default:
			b.WriteString(s.key)
		}
	}
	return &nodeError{reason, n.Line, b.String(), message}
}

// toJSON converts n to JSON. It fails on nesting deeper than MaxDepth, on expansion beyond
// the budget, on non-scalar, merge or duplicate keys and on tags JSON cannot represent.
func toJSON(n *yaml.Node, b *budget) ([]byte, error) {
	c := &converter{budget: b}
	if err := c.value(n, 0); err != nil {
		return nil, err
	}
	return c.buf.Bytes(), nil
}

func (c *converter) value(n *yaml.Node, depth int) error {
	if depth > MaxDepth {
		return c.fail(ReasonInvalidDeclaration, n, fmt.Sprintf("nesting is deeper than %d levels", MaxDepth))
	}
	if c.budget.nodes--; c.budget.nodes < 0 {
		return c.fail(ReasonTooLarge, n, "document expands to too many nodes (alias bomb?)")
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return c.write([]byte("null"), n)
		}
		return c.value(n.Content[0], depth)
	case yaml.AliasNode:
		if n.Alias == nil {
			return c.fail(ReasonInvalidDeclaration, n, "unresolved alias")
		}
		return c.value(n.Alias, depth+1)
	case yaml.MappingNode:
		return c.mapping(n, depth+1)
	case yaml.SequenceNode:
		return c.sequence(n, depth+1)
	default:
		return c.scalar(n)
	}
}

func (c *converter) sequence(n *yaml.Node, depth int) error {
	c.buf.WriteByte('[')
	for i, item := range n.Content {
		if i > 0 {
			c.buf.WriteByte(',')
		}
		c.path = append(c.path, segment{index: i})
		if err := c.value(item, depth); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
	}
	c.buf.WriteByte(']')
	return nil
}

func (c *converter) mapping(n *yaml.Node, depth int) error {
	seen := make(map[string]bool, len(n.Content)/2)
	c.buf.WriteByte('{')
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, err := c.mappingKey(n.Content[i], seen)
		if err != nil {
			return err
		}
		if i > 0 {
			c.buf.WriteByte(',')
		}
		if err := c.writeJSON(key, n.Content[i]); err != nil {
			return err
		}
		c.buf.WriteByte(':')
		c.path = append(c.path, segment{key: key})
		if err := c.value(n.Content[i+1], depth); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
	}
	c.buf.WriteByte('}')
	return nil
}

// mappingKey returns the text of a key, refusing complex, merge and duplicate keys.
func (c *converter) mappingKey(k *yaml.Node, seen map[string]bool) (string, error) {
	if k.Kind == yaml.AliasNode && k.Alias != nil {
		k = k.Alias
	}
	switch {
	case k.Kind != yaml.ScalarNode:
		return "", c.fail(ReasonInvalidDeclaration, k, "mapping keys must be scalars")
	case k.ShortTag() == "!!merge":
		return "", c.fail(ReasonInvalidDeclaration, k, "merge keys (<<) are not supported")
	case seen[k.Value]:
		c.path = append(c.path, segment{key: k.Value}) // the conversion stops here
		return "", c.fail(ReasonInvalidDeclaration, k, fmt.Sprintf("duplicate key %q", k.Value))
	}
	seen[k.Value] = true
	return k.Value, nil
}

func (c *converter) scalar(n *yaml.Node) error {
	switch tag := n.ShortTag(); tag {
	case "!!str", "!!binary", "!!timestamp":
		return c.writeString(n.Value, n)
	case "!!null":
		return c.write([]byte("null"), n)
	case "!!bool", "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			return c.fail(ReasonInvalidDeclaration, n, fmt.Sprintf("invalid %s %q", tag[2:], n.Value))
		}
		return c.writeJSON(v, n)
	default:
		return c.fail(ReasonInvalidDeclaration, n, fmt.Sprintf("unsupported tag %s", tag))
	}
}

// writeString writes s as a JSON string, without reflection when it needs no escaping.
func (c *converter) writeString(s string, n *yaml.Node) error {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b >= 0x7f || b == '"' || b == '\\' || b == '<' || b == '>' || b == '&' {
			return c.writeJSON(s, n)
		}
	}
	if c.budget.bytes -= int64(len(s) + 2); c.budget.bytes < 0 {
		return c.fail(ReasonTooLarge, n, "document expands to too many bytes (alias bomb?)")
	}
	c.buf.WriteByte('"')
	c.buf.WriteString(s)
	c.buf.WriteByte('"')
	return nil
}

func (c *converter) writeJSON(v any, n *yaml.Node) error {
	b, err := json.Marshal(v)
	if err != nil {
		return c.fail(ReasonInvalidDeclaration, n, fmt.Sprintf("value %q cannot be represented in JSON", n.Value))
	}
	return c.write(b, n)
}

func (c *converter) write(b []byte, n *yaml.Node) error {
	if c.budget.bytes -= int64(len(b)); c.budget.bytes < 0 {
		return c.fail(ReasonTooLarge, n, "document expands to too many bytes (alias bomb?)")
	}
	c.buf.Write(b)
	return nil
}
