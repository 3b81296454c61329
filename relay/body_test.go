package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
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
	{`{"model":7}`, "", false, "model must be a string"},
	{`{"model":["m"]}`, "", false, "model must be a string"},
	{`{"model":null}`, "", false, "model is required"},
	{`{"model":"m"`, "", false, "request body is not valid JSON"},
	{`{"model":"m"} {}`, "", false, "request body is not valid JSON"},
	{``, "", false, "request body is not valid JSON"},
	{`[{"model":"m"}]`, "", false, "request body must be a JSON object"},
	{`"m"`, "", false, "request body must be a JSON object"},
	{"{\"model\":\"m\xff\"}", "", false, "request body is not valid UTF-8"},
	// A member named twice: parsers disagree on which counts, so none does.
	{`{"model":"secret-model","model":"allowed-ok"}`, "", false, `duplicate key "model" in the request body`},
	{`{"model":"a","Model":"b"}`, "", false, `duplicate key "model" in the request body`},
	{`{"model":"a","m\u006fdel":"b"}`, "", false, `duplicate key "model" in the request body`},
	{`{"stream":true,"model":"m","STREAM":false}`, "", false, `duplicate key "stream" in the request body`},
	{`{"model":"m","x_pool_options":{},"x_pool_options":null}`, "", false, `duplicate key "x_pool_options" in the request body`},
	{`{"model":"m","messages":[],"messages":[]}`, "", false, `duplicate key "messages" in the request body`},
	{`{"model":"m","t\u0065mp":1,"temp":2}`, "", false, `duplicate key "temp" in the request body`},
	{`{"model":"m","Temp":1,"temp":2}`, "m", false, ""},                          // not the relay's: a target sees two names
	{`{"model":"m","messages":[{"role":"user","role":"user"}]}`, "m", false, ""}, // below the top level
	{`{"model":"m",` + manyMembers(255) + `}`, "m", false, ""},
	{`{"model":"m",` + manyMembers(256) + `}`, "", false, "request body has more than 256 top-level members"},
}

// manyMembers is n distinct members "k0":0,"k1":0,...
func manyMembers(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf(`"k%d":0`, i)
	}
	return strings.Join(s, ",")
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

// FuzzParseInference: nothing panics; what is accepted is a JSON object with that model, read
// as encoding/json reads it; and what a target receives of it keeps its members (checkRewrite).
func FuzzParseInference(f *testing.F) {
	for _, c := range bodyCases {
		f.Add([]byte(c.body))
	}
	for _, o := range []string{`{"fallback_models":["b","c"],"max_latency_ms":250}`, `{"priority":"low","prefer_gpu":"gpu-1"}`,
		`null`, `{"fallback_models":[]}`, `{"max_latency_ms":"x"}`, `{"priority":"urgent"}`, `[]`,
		`{"Priority":"high","priority":null}`, `{"PRIORITY":"low","prefer_GPU":"g"}`, `{"max_latency_ms":1e400}`,
		`{"max_latency_ms":1e-400}`, `{"max_latency_ms":-0}`, `{"fallback_models":[null]}`, `{"fallback_models":["a",""]}`,
		`{"fallback_models":"a"}`, `{"prefer_gpu":""}`, `{"prefer_gpu":5}`, `{"fallback_models":["\u0061"]}`, `"x"`, `5`, `true`} {
		f.Add([]byte(`{"model":"m","x_pool_options":` + o + `,"messages":[]}`))
	}
	for _, b := range []string{`{"Model":"a","model":"b"}`, `{"mod\u0065l":"m","STREAM":true}`, `{"model":"\ud800x"}`,
		`{"model":"m","n":01}`, `{"model":"m","n":1.}`, `{"model":"m","s":"\x"}`, "{\"model\":\"m\u0001\"}", `{"model":"m",}`,
		`{"ſtream":true,"model":"m"}`, `{"model":"m"} x`, `[{"model":"m"}]`, `  `,
		`{"x_pool_options":{},"model":"m","stream":true,"stream_options":{"a":1}}`, `{"model":"m","stream_options":null}`,
		`{ "model" : "m" , "x_pool_options" : { } , "stream_options" : { "include_usage" : false } }`} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fields, err := parseInference(body)
		want, wantErr := referenceParseInference(body)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("%q: error %v; json.Unmarshal reading gives %v", body, err, wantErr)
		}
		if err != nil {
			if _, ok := err.(*relayError); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if fields.Model != want.Model || fields.Stream != want.Stream || (fields.options == nil) != (want.options == nil) ||
			(fields.options != nil && fmt.Sprint(*fields.options) != fmt.Sprint(*want.options)) {
			t.Fatalf("%q: read as %+v; json.Unmarshal reading gives %+v", body, fields, want)
		}
		checkRewrite(t, body, &fields)
	})
}

// referenceParseInference is parseInference written plainly with encoding/json, the meaning
// the fast one must keep. (It trims JSON's whitespace only: the first version trimmed with
// bytes.TrimSpace, which also took a form feed, not JSON whitespace, for one, so "0\f" was
// called "not an object" instead of "not valid JSON".) encoding/json takes a member named
// twice (the last wins), so the top-level names are read on their own, one token at a time.
func referenceParseInference(body []byte) (bodyView, error) {
	if !utf8.Valid(body) {
		return bodyView{}, badRequest("request body is not valid UTF-8")
	}
	if trimmed := bytes.Trim(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] != '{' && json.Valid(trimmed) {
		return bodyView{}, badRequest("request body must be a JSON object")
	}
	var raw struct {
		Model   json.RawMessage `json:"model"`
		Stream  json.RawMessage `json:"stream"`
		Options json.RawMessage `json:"x_pool_options"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return bodyView{}, badRequest("request body is not valid JSON")
	}
	if err := referenceNames(body); err != nil {
		return bodyView{}, err
	}
	var f bodyView
	if len(raw.Model) > 0 && raw.Model[0] != '"' && string(raw.Model) != "null" {
		return bodyView{}, badRequest("model must be a string")
	}
	if len(raw.Model) == 0 || json.Unmarshal(raw.Model, &f.Model) != nil || f.Model == "" {
		return bodyView{}, badRequest("model is required")
	}
	if given(raw.Stream) && json.Unmarshal(raw.Stream, &f.Stream) != nil {
		return bodyView{}, badRequest("stream must be a boolean")
	}
	if len(raw.Options) > 0 {
		o, err := referencePoolOptions(raw.Options)
		if err != nil {
			return bodyView{}, err
		}
		f.options = o
	}
	return f, nil
}

// referencePoolOptions is parsePoolOptions written plainly with encoding/json.
func referencePoolOptions(raw json.RawMessage) (*poolOptions, error) {
	given := func(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
	var v struct {
		FallbackModels json.RawMessage `json:"fallback_models"`
		MaxLatencyMS   json.RawMessage `json:"max_latency_ms"`
		Priority       json.RawMessage `json:"priority"`
		PreferGPU      json.RawMessage `json:"prefer_gpu"`
	}
	if string(raw) != "null" && json.Unmarshal(raw, &v) != nil {
		return nil, badRequest("x_pool_options must be an object")
	}
	o := &poolOptions{}
	if given(v.FallbackModels) {
		if json.Unmarshal(v.FallbackModels, &o.fallbacks) != nil || slices.Contains(o.fallbacks, "") {
			return nil, badRequest("x_pool_options.fallback_models must be a list of model names")
		}
		if o.fallbacks == nil {
			o.fallbacks = []string{} // an empty list: no fallback for this request
		}
	}
	if given(v.MaxLatencyMS) {
		var ms float64
		if json.Unmarshal(v.MaxLatencyMS, &ms) != nil || ms <= 0 || ms > 1e9 {
			return nil, badRequest("x_pool_options.max_latency_ms must be a positive number of milliseconds")
		}
		o.maxLatency = time.Duration(ms * float64(time.Millisecond))
	}
	if given(v.Priority) {
		err := json.Unmarshal(v.Priority, &o.priority)
		if _, ok := parsePriority(o.priority); err != nil || !ok {
			return nil, badRequest("x_pool_options.priority must be high, normal or low")
		}
	}
	if given(v.PreferGPU) && json.Unmarshal(v.PreferGPU, &o.preferGPU) != nil {
		return nil, badRequest("x_pool_options.prefer_gpu must be a target id or name")
	}
	return o, nil
}

// referenceNames checks the top-level names of a valid JSON object: at most maxTopMembers,
// each once, the relay's own once in any spelling encoding/json matches.
func referenceNames(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.Token() // {
	seen := map[string]bool{}
	for n := 0; dec.More(); n++ {
		tok, _ := dec.Token()
		name := tok.(string)
		var skip json.RawMessage
		dec.Decode(&skip)
		if n == maxTopMembers {
			return errTooManyMembers
		}
		for _, own := range []string{"model", "stream", "x_pool_options"} {
			if strings.EqualFold(name, own) {
				if seen[own] {
					return duplicateMember(own)
				}
				seen[own] = true
			}
		}
		if seen["="+name] {
			return duplicateMember(name)
		}
		seen["="+name] = true
	}
	return nil
}

func BenchmarkParseInference(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","stream":false,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"` +
		strings.Repeat("hello world ", 80) + `"}],"temperature":0.7,"max_tokens":256}`)
	for _, c := range []struct {
		name  string
		parse func([]byte) (bodyView, error)
	}{{"fast", parseInference}, {"encoding_json", referenceParseInference}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.parse(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
