package render

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// canonicalJSON writes the bytes json.Marshal writes for the values of
// unstructured objects, without reflection: maps, slices, strings, int64,
// bool and nil directly, anything else (floats, strings that need escaping)
// through json.Marshal itself. FuzzCanonicalJSON checks that they agree.
type canonicalJSON struct {
	buf  []byte
	keys []string // scratch: the sorted keys of the maps being written
}

func (w *canonicalJSON) value(v any) error {
	switch x := v.(type) {
	case nil:
		w.buf = append(w.buf, "null"...)
	case bool:
		w.buf = strconv.AppendBool(w.buf, x)
	case int64:
		w.buf = strconv.AppendInt(w.buf, x, 10)
	case string:
		w.string(x)
	case map[string]any:
		return w.object(x)
	case []any:
		return w.array(x)
	default:
		return w.marshal(x)
	}
	return nil
}

func (w *canonicalJSON) object(m map[string]any) error {
	if m == nil {
		w.buf = append(w.buf, "null"...)
		return nil
	}
	// The keys of nested maps go on the same scratch slice, after these.
	start := len(w.keys)
	for k := range m {
		w.keys = append(w.keys, k)
	}
	keys := w.keys[start:]
	slices.Sort(keys)
	w.buf = append(w.buf, '{')
	for i, k := range keys {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		w.string(k)
		w.buf = append(w.buf, ':')
		if err := w.value(m[k]); err != nil {
			return err
		}
	}
	w.buf = append(w.buf, '}')
	w.keys = w.keys[:start]
	return nil
}

func (w *canonicalJSON) array(a []any) error {
	if a == nil {
		w.buf = append(w.buf, "null"...)
		return nil
	}
	w.buf = append(w.buf, '[')
	for i, v := range a {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		if err := w.value(v); err != nil {
			return err
		}
	}
	w.buf = append(w.buf, ']')
	return nil
}

// string writes s quoted; a string with a character that encoding/json
// escapes (quotes, backslashes, control and HTML characters, non-ASCII) goes
// through json.Marshal.
func (w *canonicalJSON) string(s string) {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b >= utf8.RuneSelf || b == '"' || b == '\\' || b == '<' || b == '>' || b == '&' {
			_ = w.marshal(s) // strings always encode
			return
		}
	}
	w.buf = append(w.buf, '"')
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '"')
}

func (w *canonicalJSON) marshal(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.buf = append(w.buf, data...)
	return nil
}
