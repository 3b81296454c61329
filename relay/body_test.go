package relay

import (
	"encoding/json"
	"testing"
)

var bodyCases = []struct {
	body   string
	model  string
	stream bool
	err    string
}{
	{`{"model":"m"}`, "m", false, ""},
	{`{"model":"m","stream":true,"messages":[]}`, "m", true, ""},
	{`{"model":"m","stream":null}`, "m", false, ""},
	{` {"stream":false,"model":"m"} `, "m", false, ""},
	{`{"model":"m","stream":"yes"}`, "", false, "stream must be a boolean"},
	{`{"model":"m","stream":1}`, "", false, "stream must be a boolean"},
	{`{"messages":[]}`, "", false, "model is required"},
	{`{"model":""}`, "", false, "model is required"},
	{`{"model":7}`, "", false, "model is required"},
	{`{"model":null}`, "", false, "model is required"},
	{`{"model":"m"`, "", false, "request body is not valid JSON"},
	{`{"model":"m"} {}`, "", false, "request body is not valid JSON"},
	{``, "", false, "request body is not valid JSON"},
	{`[{"model":"m"}]`, "", false, "request body must be a JSON object"},
	{`"m"`, "", false, "request body must be a JSON object"},
	{"{\"model\":\"m\xff\"}", "", false, "request body is not valid UTF-8"},
}

func TestParseInference(t *testing.T) {
	for _, c := range bodyCases {
		f, err := parseInference([]byte(c.body))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.err || f.Model != c.model || f.Stream != c.stream {
			t.Errorf("%q: got (%q, %v, %q), want (%q, %v, %q)", c.body, f.Model, f.Stream, got, c.model, c.stream, c.err)
		}
	}
}

// FuzzParseInference: nothing panics; what is accepted is a JSON object with that model.
func FuzzParseInference(f *testing.F) {
	for _, c := range bodyCases {
		f.Add([]byte(c.body))
	}
	for _, o := range []string{`{"fallback_models":["b","c"],"max_latency_ms":250}`, `{"priority":"low","prefer_gpu":"gpu-1"}`,
		`null`, `{"fallback_models":[]}`, `{"max_latency_ms":"x"}`, `{"priority":"urgent"}`, `[]`} {
		f.Add([]byte(`{"model":"m","x_pool_options":` + o + `,"messages":[]}`))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fields, err := parseInference(body)
		if err != nil {
			if _, ok := err.(*relayError); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil || fields.Model == "" {
			t.Fatalf("accepted %q as %+v", body, fields)
		}
		if fields.options != nil {
			if _, err := rewriteObject(body, "", "x_pool_options"); err != nil {
				t.Fatalf("accepted %q but cannot strip its x_pool_options: %v", body, err)
			}
		}
	})
}
