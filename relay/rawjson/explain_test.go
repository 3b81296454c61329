package rawjson

import (
	"encoding/json"
	"strings"
	"testing"
)

// shape is a request with one field of each kind a type error can name.
type shape struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	Max      *int            `json:"max_tokens"`
	Count    uint            `json:"count"`
	Temp     *float64        `json:"temperature"`
	Stop     []string        `json:"stop"`
	Pair     [2]int          `json:"pair"`
	Blob     []byte          `json:"blob"`
	Meta     map[string]int  `json:"meta"`
	Raw      json.RawMessage `json:"raw"`
	Messages []struct {
		Role  string `json:"role"`
		Calls []struct {
			Function struct {
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
}

func TestExplain(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"model":5}`, "model must be a string"},
		{`{"model":{"a":[1]}}`, "model must be a string"},
		{`{"model":[]}`, "model must be a string"},
		{`{"Model":true}`, "Model must be a string"}, // the name as the client wrote it
		{`{"stream":"yes"}`, "stream must be a boolean"},
		{`{"max_tokens":"5"}`, "max_tokens must be an integer"},
		{`{"max_tokens":1.5}`, "max_tokens must be an integer"},
		{`{"max_tokens":1e3}`, "max_tokens must be an integer"},
		{`{"max_tokens":99999999999999999999}`, "max_tokens must be an integer within range"},
		{`{"count":-1}`, "count must be a non-negative integer"},
		{`{"count":99999999999999999999}`, "count must be a non-negative integer within range"},
		{`{"count":"x"}`, "count must be a non-negative integer"},
		{`{"temperature":"hot"}`, "temperature must be a number"},
		{`{"temperature":1e999}`, "temperature must be a number within range"},
		{`{"stop":"x"}`, "stop must be an array"},
		{`{"stop":["a",7]}`, "stop[1] must be a string"},
		{`{"pair":{}}`, "pair must be an array"},
		{`{"blob":5}`, "blob must be a base64 string"},
		{`{"meta":[]}`, "meta must be an object"},
		{`{"meta":{"a":"b"}}`, "meta.a must be an integer"},
		{`{"messages":"hi"}`, "messages must be an array"},
		{`{"messages":{"role":"user"}}`, "messages must be an array"},
		{`{"messages":[{"role":"user"},"hi"]}`, "messages[1] must be an object"},
		{`{"messages":[{"role":"user"},{"role":7}]}`, "messages[1].role must be a string"},
		{` { "messages" : [ {} , { "role" : [ ] } ] } `, "messages[1].role must be a string"},
		{`{"raw":1,"messages":[{},{},{"tool_calls":[{"function":{"arguments":{}}}]}]}`,
			"messages[2].tool_calls[0].function.arguments must be a string"},
		{`{"messages":[{"role":"a\"]}"},{"role":false}]}`, "messages[1].role must be a string"}, // brackets in strings
		{`{"meta":{"a b":"x"}}`, `meta["a b"] must be an integer`},
		{`{"meta":{"":"x"}}`, `meta[""] must be an integer`},
		{`[]`, "request body must be an object"},
		{`"hi"`, "request body must be an object"},
		{`{"model":`, "request body is not valid JSON (at byte 9)"},
		{``, "request body is empty"},
		{`{"model":"m"} x`, "request body is not valid JSON (at byte 15)"},
	} {
		var v shape
		err := json.Unmarshal([]byte(c.body), &v)
		if err == nil {
			t.Errorf("%s: decoded", c.body)
			continue
		}
		if got := Explain([]byte(c.body), err); got != c.want {
			t.Errorf("%s: %q, want %q (encoding/json: %v)", c.body, got, c.want, err)
		}
	}
}

func TestExplainIn(t *testing.T) {
	var v []struct {
		Text string `json:"text"`
	}
	raw := []byte(`[{"text":"a"},{"type":"text","text":5}]`)
	err := json.Unmarshal(raw, &v)
	if got, want := ExplainIn("content", raw, err), "content[1].text must be a string"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	raw = []byte(`{}`)
	err = json.Unmarshal(raw, &v)
	if got, want := ExplainIn("content", raw, err), "content must be an array"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// A key is the client's text: quoted as JSON, and a long one cut short.
func TestQuote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"model", `"model"`},
		{"a\"b\\c\n\x01", `"a\"b\\c\u000a\u0001"`},
		{strings.Repeat("x", 100), `"` + strings.Repeat("x", 64) + `…"`},
		{strings.Repeat("x", 63) + "é", `"` + strings.Repeat("x", 63) + `…"`}, // not half a rune
	} {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// A message with a long key on the path stays short.
func TestExplainBoundsKeys(t *testing.T) {
	long := strings.Repeat("k", 10000)
	body := []byte(`{"meta":{"` + long + `":"x"}}`)
	var v shape
	got := Explain(body, json.Unmarshal(body, &v))
	if len(got) > 200 || !strings.HasSuffix(got, "must be an integer") {
		t.Errorf("%d bytes: %.300s", len(got), got)
	}
}

// FuzzExplain: whatever the body, the sentence never panics, never names a Go type, and says
// one of the things a client can act on.
func FuzzExplain(f *testing.F) {
	for _, s := range []string{`{"model":5}`, `{"messages":[{},{"role":[]}]}`, `{"meta":{"a":"b"}}`, `{"stop":["a",7]}`,
		`[`, `{"messages":[{"tool_calls":[{"function":{"arguments":1}}]}]}`, `{"max_tokens":1e999}`, `{"a\u0022":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, pos := range []int{-1, 0, len(body) / 3, len(body) / 2, len(body) - 1, len(body)} {
			pathAt("x", body, pos) // any bytes, any place: no panic
		}
		var v shape
		err := json.Unmarshal(body, &v)
		if err == nil {
			return
		}
		got := Explain(body, err)
		said := got[max(strings.LastIndex(got, " must be "), 0):] // the path before it is the client's own text
		for _, bad := range []string{"Go ", "struct", "rawjson", "json:", "unmarshal", "[]string", "int64", "float64"} {
			if strings.Contains(said, bad) {
				t.Fatalf("%q: %q names Go (%q)", body, got, bad)
			}
		}
		if !strings.Contains(got, " must be ") && !strings.HasPrefix(got, "request body is not valid JSON") {
			t.Fatalf("%q: %q", body, got)
		}
		// A path found in the body is one the body has: each member name on it appears there.
		if te, ok := err.(*json.UnmarshalTypeError); ok {
			if p, ok := pathAt("", body, int(te.Offset)-1); !ok || p == "" && te.Field != "" {
				t.Fatalf("%q: no path for %v (got %q)", body, err, p)
			}
		}
	})
}
