package declarations

import (
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// fieldLine returns the line of the field at path (e.g. "spec.dependsOn[1].name") in the
// document rooted at root, or the line of the deepest field on the way when path does not
// lead to a node.
func fieldLine(root *yaml.Node, path string) int {
	n, line := root, root.Line
	for depth := 0; path != "" && depth <= MaxDepth; depth++ {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		next, nextLine, rest, ok := step(n, path)
		if !ok {
			break
		}
		n, line, path = next, nextLine, rest
	}
	return line
}

// step descends one element of path: a key of a mapping or an index of a sequence.
func step(n *yaml.Node, path string) (next *yaml.Node, line int, rest string, ok bool) {
	switch n.Kind {
	case yaml.MappingNode:
		return stepKey(n, path)
	case yaml.SequenceNode:
		return stepIndex(n, path)
	}
	return nil, 0, "", false
}

// stepKey matches the longest key that path starts with, so that keys holding dots
// (labels, annotations) are found.
func stepKey(n *yaml.Node, path string) (*yaml.Node, int, string, bool) {
	best := -1
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		if keyPrefixes(path, k) && (best < 0 || len(k) > len(n.Content[best].Value)) {
			best = i
		}
	}
	if best < 0 {
		return nil, 0, "", false
	}
	rest := strings.TrimPrefix(path[len(n.Content[best].Value):], ".")
	return n.Content[best+1], n.Content[best].Line, rest, true
}

func keyPrefixes(path, key string) bool {
	if !strings.HasPrefix(path, key) {
		return false
	}
	return len(path) == len(key) || path[len(key)] == '.' || path[len(key)] == '['
}

func stepIndex(n *yaml.Node, path string) (*yaml.Node, int, string, bool) {
	end := strings.IndexByte(path, ']')
	if !strings.HasPrefix(path, "[") || end < 0 {
		return nil, 0, "", false
	}
	i, err := strconv.Atoi(path[1:end])
	if err != nil || i < 0 || i >= len(n.Content) {
		return nil, 0, "", false
	}
	item := n.Content[i]
	return item, item.Line, strings.TrimPrefix(path[end+1:], "."), true
}

// topValue returns the scalar value of key in mapping n, following an alias, or "" when it
// is absent or not a scalar.
func topValue(n *yaml.Node, key string) (value string, found bool) {
	if n == nil || n.Kind != yaml.MappingNode {
		return "", false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value != key {
			continue
		}
		v := n.Content[i+1]
		if v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		return v.Value, v.Kind == yaml.ScalarNode && v.ShortTag() != "!!null"
	}
	return "", false
}

// child returns the value of key in mapping n, following an alias, or nil.
func child(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := n.Content[i+1]
			if v.Kind == yaml.AliasNode && v.Alias != nil {
				v = v.Alias
			}
			return v
		}
	}
	return nil
}
