package relay

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"

	"modelrelay/relay/usage"
)

func TestRewrite(t *testing.T) {
	cases := []struct {
		in   string
		ask  bool
		want string
	}{
		{`{"model":"a","x_pool_options":{"fallback_models":["b"]},"stream":true}`, false, `{"model":"a","stream":true}`},
		{`{"x_pool_options":{"priority":"low"}, "model":"a"}`, false, `{"model":"a"}`},
		{`{ "model" : "a" , "X_Pool_Options" : null } `, false, `{ "model" : "a" } `},
		{`{"model":"a","stream":true}`, false, `{"model":"a","stream":true}`},
		{`{"model":"a","stream":true}`, true, `{"model":"a","stream":true,"stream_options":{"include_usage":true}}`},
		{`{"model":"a","stream":true,"x_pool_options":{}}`, true, `{"model":"a","stream":true,"stream_options":{"include_usage":true}}`},
		{`{"x_pool_options":{},"stream_options":{"include_usage":false},"model":"a"}`, true, `{"stream_options":{"include_usage":true},"model":"a"}`},
		{`{"model":"a","stream_options":{"include_usage":true},"x_pool_options":{}}`, true, `{"model":"a","stream_options":{"include_usage":true}}`},
	}
	for _, c := range cases {
		v, err := parseInference([]byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		got, at, _ := v.rewrite([]byte(c.in), c.ask)
		if string(got) != c.want || !strings.HasSuffix(string(got[at.from:at.to]), `"a"`) {
			t.Errorf("rewrite(%s, ask %v) = %s (model at %q); want %s", c.in, c.ask, got, got[at.from:at.to], c.want)
		}
		moved, at, err := withModel(got, at, "b")
		if err != nil || !strings.Contains(string(moved), `"model":"b"`) || string(moved[at.from:at.to]) != `"model":"b"` ||
			strings.Contains(strings.ToLower(string(moved)), `"a"`) {
			t.Errorf("withModel(%s) = %s, %v", got, moved, err)
		}
	}
	// The relay reads its members case-insensitively: no other spelling stays behind.
	body := []byte(`{"MODEL":"a","X_Pool_Options":{},"n":1}`)
	v, _ := parseInference(body)
	got, at, _ := v.rewrite(body, false)
	if got, _, _ = withModel(got, at, "b"); string(got) != `{"model":"b","n":1}` {
		t.Errorf("got %s", got)
	}
	if _, _, err := withModel(body, span{}, "b"); err == nil {
		t.Error("withModel without a model member went on")
	}
}

// checkRewrite: what a target receives of a body parseInference accepted, as v.rewrite and
// withModel make it, is valid JSON that decodes to the client's members but x_pool_options,
// with stream_options.include_usage true when usage is asked for, and the model set.
func checkRewrite(t *testing.T, body []byte, v *bodyView) {
	t.Helper()
	var in map[string]json.RawMessage
	if err := json.Unmarshal(body, &in); err != nil {
		t.Fatalf("accepted %q: %v", body, err)
	}
	maps.DeleteFunc(in, func(k string, _ json.RawMessage) bool { return strings.EqualFold(k, "x_pool_options") })
	for _, ask := range []bool{false, true} {
		out, at, clientAsked := v.rewrite(body, ask)
		if !ask && v.options == nil && &out[0] != &body[0] {
			t.Fatalf("%q: a body with nothing to change was copied", body)
		}
		want := maps.Clone(in)
		if ask {
			// The edit of stream_options is AskForUsage's, made on a body without x_pool_options.
			stripped, _ := json.Marshal(in)
			asked, wasAsked := usage.AskForUsage(stripped)
			if wasAsked != clientAsked {
				t.Fatalf("%q: client asked %v, AskForUsage says %v", body, clientAsked, wasAsked)
			}
			want = nil
			json.Unmarshal(asked, &want)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil || !reflect.DeepEqual(compactAll(got), compactAll(want)) {
			t.Fatalf("rewrite(%q, ask %v) = %q; want the members %v", body, ask, out, want)
		}
		var model struct{ Model string }
		if json.Unmarshal([]byte("{"+string(out[at.from:at.to])+"}"), &model) != nil || model.Model != v.Model {
			t.Fatalf("rewrite(%q): model at %q", body, out[at.from:at.to])
		}
		moved, at, err := withModel(out, at, "alt")
		maps.DeleteFunc(want, func(k string, _ json.RawMessage) bool { return strings.EqualFold(k, "model") })
		want["model"] = json.RawMessage(`"alt"`)
		got = nil
		if err != nil || json.Unmarshal(moved, &got) != nil || !reflect.DeepEqual(compactAll(got), compactAll(want)) ||
			string(moved[at.from:at.to]) != `"model":"alt"` {
			t.Fatalf("withModel(%q) = %q, %v", out, moved, err)
		}
	}
}

// compactAll is the members decoded, for comparing.
func compactAll(m map[string]json.RawMessage) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		var x any
		dec.Decode(&x)
		out[k] = x
	}
	return out
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
