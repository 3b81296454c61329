// Package rawjson is the relay's one JSON scanner: it reads JSON text as bytes, without
// decoding it into values, and every reader of JSON bytes in the relay uses it (the first read
// of a client's body, its edits, the prompt reader of cache-aware placement, the request
// translation, the usage reader of answers):
//
//   - SkipValue, SkipString and Valid step over a value checking it as encoding/json does;
//     ValueEnd and StringEnd step over a value of text already checked, faster;
//   - Object and Array read the members and elements of one object or array in order,
//     checking what they step over or not (Trust), without allocating;
//   - Unescape, AppendUnescaped, String, KeyIs and FieldIs decode strings and names only where
//     a reader needs them;
//   - Edits change a text in one pass that builds one new text.
//
// It also says where a body is wrong in the terms of the API the client speaks, with the JSON
// path of the value as the client wrote it and the JSON type it must have ("messages[2].content
// must be a string or an array", "max_tokens must be an integer"). encoding/json's own errors
// name Go types and struct fields ("cannot unmarshal string into Go struct field
// anthropicRequest.messages of type []translate.anthropicMessage"), which mean nothing to a
// client and show the relay's insides; no text of theirs reaches a client.
//
// It imports nothing of the relay, so the relay, its translation, its placement and usage
// readers and its demo model server all use it.
package rawjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxKeyBytes bounds a client's key quoted in a message: a key is the client's text, and one
// of a megabyte must not make a megabyte answer or log line.
const maxKeyBytes = 64

// Explain turns err, returned by decoding body with encoding/json (json.Unmarshal into a
// struct), into one sentence for the client. A type error names the value's path and the type
// it must have; a syntax error says the body is not valid JSON, and where.
func Explain(body []byte, err error) string { return ExplainIn("", body, err) }

// ExplainIn is Explain for a value that is part of a request, named name ("content"), whose
// own text is body: its paths start at name ("content[0].text must be a string").
func ExplainIn(name string, body []byte, err error) string {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return path(name, body, te) + " must be " + want(te.Type, te.Value)
	}
	if len(body) == 0 && name == "" {
		return "request body is empty"
	}
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		// Offset counts the bytes read up to and including the one that is wrong: the
		// position of that byte counted from 1 (or the length, when the text ends early).
		return "request body is not valid JSON (at byte " + strconv.FormatInt(se.Offset, 10) + ")"
	}
	return "request body is not valid JSON"
}

// path is where te happened in body, as a JSON path from name: members by name, array
// elements by index ("messages[2].content"); "request body" for the top level of an unnamed
// body. It reads body, which json.Unmarshal has checked (a type error comes only after the
// whole text was found valid); if body is not that text it falls back to the field names
// encoding/json kept (no indices).
func path(name string, body []byte, te *json.UnmarshalTypeError) string {
	// te.Offset is just past the value for a literal and just past the opening bracket for
	// an object or array: either way the byte before it is the value's own.
	p, ok := pathAt(name, body, int(te.Offset)-1)
	switch {
	case !ok && te.Field != "" && name != "":
		p = name + "." + bound(te.Field)
	case !ok && te.Field != "":
		p = bound(te.Field)
	case !ok:
		p = name
	}
	if p == "" {
		return "request body"
	}
	return p
}

// want says what a value of type t is in JSON; value is encoding/json's description of what
// was found ("number 1e99": a number that does not fit).
func want(t reflect.Type, value string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "of another type"
	}
	number, found := strings.CutPrefix(value, "number ")
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if found && !strings.ContainsAny(number, ".eE") {
			return "an integer within range"
		}
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if found && !strings.ContainsAny(number, ".eE-") {
			return "a non-negative integer within range"
		}
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		if found {
			return "a number within range"
		}
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "of another type"
}

// Quote is a client's key for a message: JSON-quoted, cut to a bounded length.
func Quote(key string) string {
	var b strings.Builder
	b.WriteByte('"')
	cut := cutAt(key, maxKeyBytes)
	for _, r := range cut {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&0xf])
		default:
			b.WriteRune(r)
		}
	}
	if len(cut) < len(key) {
		b.WriteString("…")
	}
	b.WriteByte('"')
	return b.String()
}

// cutAt is s cut to at most n bytes on a rune boundary.
func cutAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// bound keeps a path built by encoding/json (from the struct's field names) short.
func bound(s string) string { return cutAt(s, 4*maxKeyBytes) }
