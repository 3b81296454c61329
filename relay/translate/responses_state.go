package translate

import (
	"bytes"
	"errors"

	"modelrelay/relay/rawjson"
)

// The Responses API keeps conversations: a stored response is its input items and its
// output, and a request naming it with previous_response_id continues after them. The relay
// keeps them (store: ConversationItems) and expands the id into the input before mapping
// (WithHistory).

var errHistory = errors.New("history must be a JSON array of items")

// InputItems returns the body's input as a JSON array of items: a string input is one user
// message; no input is [].
func InputItems(body []byte) ([]byte, error) {
	if err := checkBody(body); err != nil {
		return nil, err
	}
	input := topMember(body, "input")
	switch kind(input) {
	case 0, 'n':
		return []byte("[]"), nil
	case '[':
		return appendCompact(nil, input), nil
	case '"':
		b := append([]byte(nil), `[{"type":"message","role":"user","content":[{"type":"input_text","text":`...)
		b = append(b, input...)
		return append(b, "}]}]"...), nil
	}
	return nil, &typeError{path: "input", want: "a string or an array"}
}

// OutputItems returns a response object's output array, [] when it has none.
func OutputItems(response []byte) []byte {
	if !rawjson.Valid(response) {
		return []byte("[]")
	}
	if output := topMember(response, "output"); kind(output) == '[' {
		return appendCompact(nil, output)
	}
	return []byte("[]")
}

// WithHistory returns body with its input preceded by history (a JSON array of items) and
// previous_response_id removed; every other member is kept as it is.
func WithHistory(body, history []byte) ([]byte, error) {
	items, err := InputItems(body)
	if err != nil {
		return nil, err
	}
	history = bytes.TrimSpace(history)
	if !rawjson.Valid(history) || kind(history) != '[' {
		return nil, errHistory
	}
	out := make([]byte, 0, len(body)+len(history)+16)
	out = append(out, '{')
	var members comma
	var buf [32]byte
	top := body[skipSpace(body, 0):]
	o := rawjson.ObjectAt(top, 0, rawjson.Checked)
	var m rawjson.Member
	for o.Next(&m) {
		switch string(fieldName(m.Key, buf[:])) {
		case "input", "previous_response_id":
			continue
		}
		if members {
			out = append(out, ',')
		}
		members = true
		out = append(out, top[m.Start:m.End]...)
	}
	if members {
		out = append(out, ',')
	}
	out = append(out, `"input":`...)
	out = appendJoined(out, history, items)
	return append(out, '}'), nil
}

// ConversationItems is what the store keeps of a finished response: the items of the body
// that asked for it (after WithHistory: the whole conversation before it) and then its output.
// A later WithHistory continues after them.
func ConversationItems(body, response []byte) ([]byte, error) {
	items, err := InputItems(body)
	if err != nil {
		return nil, err
	}
	return appendJoined(nil, items, OutputItems(response)), nil
}

// appendJoined appends one JSON array of the elements of the arrays a and b, in order.
func appendJoined(dst, a, b []byte) []byte {
	a, b = arrayInner(a), arrayInner(b)
	dst = append(dst, '[')
	dst = append(dst, a...)
	if len(a) > 0 && len(b) > 0 {
		dst = append(dst, ',')
	}
	dst = append(dst, b...)
	return append(dst, ']')
}

// topMember is the value of the top-level member name of the object body (checked JSON),
// the last one of that name as encoding/json reads it; nil when there is none.
func topMember(body []byte, name string) []byte {
	var v []byte
	var buf [32]byte
	eachMember(body[skipSpace(body, 0):], func(key, val []byte) error {
		if string(fieldName(key, buf[:])) == name {
			v = val
		}
		return nil
	})
	return v
}

// arrayInner is the elements of the JSON array arr, without its brackets and outer space.
func arrayInner(arr []byte) []byte {
	arr = bytes.TrimSpace(arr)
	return bytes.TrimSpace(arr[1 : len(arr)-1])
}
