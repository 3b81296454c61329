package relay

import (
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"
)

func TestRewriteObject(t *testing.T) {
	cases := []struct{ in, model, want string }{
		{`{"model":"a","x_pool_options":{"fallback_models":["b"]},"stream":true}`, "", `{"model":"a","stream":true}`},
		{`{"model":"a","messages":[{"role":"user","content":"} \" {"}]}`, "b", `{"model":"b","messages":[{"role":"user","content":"} \" {"}]}`},
		{` { "stream" : false , "model" : "a" , "m\u006fdel":"c"} `, "b", `{"model":"b","stream" : false}`},
		{`{}`, "b", `{"model":"b"}`},
		{`{"x_pool_options":1}`, "", `{}`},
		// The relay reads its members case-insensitively: no other spelling stays behind.
		{`{"MODEL":"a","X_Pool_Options":{},"n":1}`, "b", `{"model":"b","n":1}`},
	}
	for _, c := range cases {
		got, err := rewriteObject([]byte(c.in), c.model, "x_pool_options")
		if err != nil || string(got) != c.want {
			t.Errorf("rewriteObject(%s, %q) = %s, %v; want %s", c.in, c.model, got, err, c.want)
		}
	}
	for _, bad := range []string{``, `[]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":"x`, `{"a":[1}`, `{"a":1`} {
		if _, err := rewriteObject([]byte(bad), "m"); err == nil {
			t.Errorf("rewriteObject(%q) accepted it", bad)
		}
	}
}

// FuzzRewriteObject: for any valid JSON object, the rewrite is valid JSON that decodes to the
// same members minus the dropped ones, with the model set.
func FuzzRewriteObject(f *testing.F) {
	for _, s := range []string{
		`{"model":"a","x_pool_options":{"fallback_models":["b"]},"stream":true}`,
		`{"model":"a","messages":[{"role":"user","content":"}\"{"}],"n":1e3,"t":null}`,
		`{"m\u006fdel":"a","x_pool_options":[],"model":"z"}`,
		`{ }`, `{"a":{"b":[{"c":"]"}]}}`,
	} {
		f.Add([]byte(s), "alt")
	}
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		out, err := rewriteObject(body, model, "x_pool_options")
		var in map[string]any
		if json.Unmarshal(body, &in) != nil || in == nil {
			return // not an object: any error (or a lenient answer) is fine, as long as no panic
		}
		if err != nil {
			t.Fatalf("valid object refused: %s: %v", body, err)
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("rewrite of %s is not JSON: %s", body, out)
		}
		want := maps.Clone(in)
		maps.DeleteFunc(want, func(k string, _ any) bool {
			return strings.EqualFold(k, "x_pool_options") || model != "" && strings.EqualFold(k, "model")
		})
		if model != "" {
			var m string
			json.Unmarshal(mustJSON(model), &m) // what the model string reads back as (invalid UTF-8 is replaced)
			want["model"] = m
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("rewrite of %s = %s", body, out)
		}
	})
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// withMeta adds x_pool_meta to any object and leaves everything else as it came, whatever
// bytes a target sends.
func FuzzWithMeta(f *testing.F) {
	for _, s := range []string{`{"id":"x","choices":[]}`, `{}`, ` }`, `}`, `[1]`, "{\"a\":1}\n", ``, `{"a":1} x`} {
		f.Add([]byte(s))
	}
	o := &metaSink{where: &servedBy{target: "t"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		out := o.withMeta(body)
		var in map[string]any
		if json.Unmarshal(body, &in) != nil || in == nil {
			return
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil || got["x_pool_meta"] == nil {
			t.Fatalf("withMeta(%q) = %q", body, out)
		}
	})
}
