package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"modelrelay/relay/rawjson"
)

// This file edits the top level of a JSON object without decoding the rest: a fallback sends
// the client's body with another model, and x_pool_options is the relay's, never a target's.
// Everything else travels byte for byte.

var errNotObject = errors.New("not a JSON object")

// objMember is one top-level "key": value of an object, as byte offsets into the body.
type objMember struct {
	key        string
	start, end int // from the key's opening quote to the end of the value
}

// objectMembers lists the top-level members of a JSON object, in order. It trusts nothing: on
// anything that is not an object it returns errNotObject, never panics.
func objectMembers(b []byte) ([]objMember, error) {
	var out []objMember
	var bad error
	err := walkObject(b, func(rawKey []byte, start, _, end int) {
		key, err := unquoteKey(rawKey)
		if err != nil {
			bad = err
		}
		out = append(out, objMember{key: key, start: start, end: end})
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// walkObject calls visit for each top-level member of the JSON object b, in order, with the
// member's key as written (quotes and escapes included) and the offsets of the key's opening
// quote, the value and the end of the value. It allocates nothing; on anything that is not an
// object it returns errNotObject, never panics.
func walkObject(b []byte, visit func(rawKey []byte, start, value, end int)) error {
	i := rawjson.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errNotObject
	}
	i = rawjson.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return errNotObject
		}
		start := i
		keyEnd, ok := rawjson.SkipString(b, i)
		if !ok {
			return errNotObject
		}
		i = rawjson.SkipSpace(b, keyEnd)
		if i >= len(b) || b[i] != ':' {
			return errNotObject
		}
		value := rawjson.SkipSpace(b, i+1)
		valEnd, ok := rawjson.SkipValue(b, value)
		if !ok {
			return errNotObject
		}
		visit(b[start:keyEnd], start, value, valEnd)
		i = rawjson.SkipSpace(b, valEnd)
		if i >= len(b) {
			return errNotObject
		}
		switch b[i] {
		case ',':
			i = rawjson.SkipSpace(b, i+1)
		case '}':
			return nil
		default:
			return errNotObject
		}
	}
}

// keyIs reports whether a key as written (quoted) names field, as encoding/json matches a
// struct field: case-insensitively, after unescaping.
func keyIs(rawKey []byte, field string) bool {
	if bytes.IndexByte(rawKey, '\\') < 0 {
		inner := rawKey[1 : len(rawKey)-1]
		// Unicode folding can match keys of other lengths ("ſtream"); ASCII cannot.
		if len(inner) != len(field) && !hasNonASCII(inner) {
			return false
		}
		return strings.EqualFold(string(inner), field)
	}
	key, err := unquoteKey(rawKey)
	return err == nil && strings.EqualFold(key, field)
}

func hasNonASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// rewriteObject returns the object without its top-level members named in drop and, when
// model is not empty, with "model" set to it (the first member; every earlier "model" goes).
// Keys compare as the relay reads them (keyIs): after unescaping and case-insensitively, so
// that a "Model" or "X_POOL_OPTIONS" the relay took for its own never reaches a target
// beside the one the relay put there (a target that matches names case-insensitively, as
// encoding/json does, could read the client's instead).
func rewriteObject(b []byte, model string, drop ...string) ([]byte, error) {
	members, err := objectMembers(b)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b)+len(model)+16)
	out = append(out, '{')
	if model != "" {
		q, _ := json.Marshal(model) // a Go string always encodes
		out = append(append(append(out, `"model":`...), q...), ',')
	}
	for _, m := range members {
		if (model != "" && strings.EqualFold(m.key, "model")) || slices.ContainsFunc(drop, func(d string) bool { return strings.EqualFold(m.key, d) }) {
			continue
		}
		out = append(append(out, b[m.start:m.end]...), ',')
	}
	if out[len(out)-1] == ',' {
		out = out[:len(out)-1]
	}
	return append(out, '}'), nil
}

// unquoteKey reads a quoted key; the common key without escapes costs no decoding.
func unquoteKey(q []byte) (string, error) {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1]), nil
	}
	var s string
	if json.Unmarshal(q, &s) != nil {
		return "", errNotObject
	}
	return s, nil
}
