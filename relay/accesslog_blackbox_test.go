package relay_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"modelrelay/relay"
)

// The access log: one INFO "request" line per inference and pass-through request,
// served or refused, with snake_case attributes, durations as millisecond numbers, tokens when
// the answer reported them, and nothing a client could use to get in or said in its body.

// recordedLog keeps every record the relay logs, for tests to read attributes by name.
type recordedLog struct {
	mu      sync.Mutex
	records []logRecord
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
	text  string // every attribute, rendered, for "is this string anywhere in the line"
}

func (h *recordedLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordedLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordedLog) WithGroup(string) slog.Handler            { return h }

func (h *recordedLog) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]slog.Value{}}
	var text strings.Builder
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Resolve()
		fmt.Fprintf(&text, "%s=%v ", a.Key, a.Value)
		return true
	})
	rec.text = text.String()
	h.mu.Lock()
	h.records = append(h.records, rec)
	h.mu.Unlock()
	return nil
}

// access returns the access log lines written so far.
func (h *recordedLog) access() []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logRecord
	for _, r := range h.records {
		if r.msg == "request" {
			out = append(out, r)
		}
	}
	return out
}

func (r logRecord) str(key string) string {
	v, ok := r.attrs[key]
	if !ok {
		return ""
	}
	return v.String()
}

// num reads a number attribute; ok is false when it is absent or not a number.
func (r logRecord) num(key string) (n int64, ok bool) {
	v, present := r.attrs[key]
	if !present || v.Kind() != slog.KindInt64 {
		return 0, false
	}
	return v.Int64(), true
}

// accessRelay is a relay requiring keys, with the access log on, in front of a backend that
// speaks both families and reports usage (models m and alt), one that speaks only OpenAI
// (model oa), a fallback chain ghost -> m, and a small body limit. pass is a second listener
// that passes every request through to an upstream pool of the first backend, as a circuit's
// host does.
func accessRelay(t *testing.T, accessLog bool) (ts, pass *httptest.Server, logs *recordedLog) {
	t.Helper()
	logs = &recordedLog{}
	both := newUsageBackend(t)
	oa := newBackend(t, openAIOnly)
	srv, ts := startServer(t, relay.Options{
		RequireAPIKeys: true, AdminToken: adminToken, Timings: quietTimings(),
		Logger: slog.New(logs), AccessLog: accessLog, MaxBodyBytes: 4096,
		Fallbacks: map[string][]string{"ghost": {"m"}},
		Backends: []relay.Backend{
			{Name: "both", URL: both.URL, Models: []string{"m", "alt"}, Dialects: []relay.Dialect{relay.OpenAI, relay.Anthropic}},
			{Name: "oa", URL: oa.URL, Models: []string{"oa"}, Dialects: []relay.Dialect{relay.OpenAI}},
		},
	})
	if err := srv.SetUpstreamPool("circuit", relay.PoolSpec{Upstreams: []relay.UpstreamSpec{{ID: "replica", URL: both.URL}}}); err != nil {
		t.Fatal(err)
	}
	pass = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServePassThrough(w, r, "circuit")
	}))
	t.Cleanup(pass.Close)
	return ts, pass, logs
}

func TestAccessLogOneLinePerRequest(t *testing.T) {
	ts, pass, logs := accessRelay(t, true)
	key := createKey(t, ts, "")
	secret, keyID := key["secret"].(string), key["id"].(string)
	only := createKey(t, ts, `,"allowed_models":["m"]`)["secret"].(string)
	limited := createKey(t, ts, `,"rate_limit_rpm":1`)["secret"].(string)
	const prompt = "tell-nobody-this-prompt"

	type want struct {
		route, model, served, translated, target string
		reason                                   string // a 4xx the relay answered: its message
		status                                   int
		stream                                   bool
		in, out                                  int64 // -1: no tokens in the line
	}
	cases := []struct {
		name   string
		path   string
		header http.Header
		body   string
		want   want
	}{
		{"served", "/v1/chat/completions", keyHeader(secret), markedBody("m", false, prompt),
			want{route: "/v1/chat/completions", model: "m", target: "both", status: 200, in: backendIn, out: backendOut}},
		{"served streaming", "/v1/chat/completions", keyHeader(secret), markedBody("alt", true, prompt),
			want{route: "/v1/chat/completions", model: "alt", target: "both", status: 200, stream: true, in: backendIn, out: backendOut}},
		{"translated", "/v1/messages", keyHeader(secret), `{"model":"oa","max_tokens":8,"messages":[{"role":"user","content":"` + prompt + `"}]}`,
			want{route: "/v1/messages", model: "oa", translated: "anthropic->openai", target: "oa", status: 200, in: 3, out: 1}},
		{"fallback", "/v1/chat/completions", keyHeader(secret), markedBody("ghost", false, prompt),
			want{route: "/v1/chat/completions", model: "ghost", served: "m", target: "both", status: 200, in: backendIn, out: backendOut}},
		{"no pool serves the model", "/v1/chat/completions", keyHeader(secret), markedBody("nobody-serves-this", false, prompt),
			want{route: "/v1/chat/completions", model: "nobody-serves-this", status: 404, in: -1,
				reason: "no provider for model nobody-serves-this"}},
		{"no key", "/v1/chat/completions", http.Header{"Content-Type": {"application/json"}}, markedBody("m", false, prompt),
			want{route: "/v1/chat/completions", status: 401, in: -1, reason: "API key required"}},
		{"model not allowed", "/v1/chat/completions", keyHeader(only), markedBody("alt", false, prompt),
			want{route: "/v1/chat/completions", model: "alt", status: 403, in: -1, reason: "model alt is not allowed for this API key"}},
		{"malformed body", "/v1/chat/completions", keyHeader(secret), `{"model":"m","messages":[` + prompt,
			want{route: "/v1/chat/completions", status: 400, in: -1, reason: "request body is not valid JSON"}},
		{"model twice", "/v1/chat/completions", keyHeader(secret), `{"model":"alt","model":"m","messages":[]}`,
			want{route: "/v1/chat/completions", status: 400, in: -1, reason: `duplicate key "model" in the request body`}},
		{"untranslatable", "/v1/messages", keyHeader(secret), `{"model":"oa","max_tokens":8,"messages":"` + prompt + `"}`,
			want{route: "/v1/messages", model: "oa", target: "oa", status: 400, in: -1, reason: "messages must be an array"}},
		{"body too large", "/v1/chat/completions", keyHeader(secret), markedBody("m", false, strings.Repeat(prompt, 400)),
			want{route: "/v1/chat/completions", status: 413, in: -1, reason: "request body exceeds 4096 bytes"}},
		{"first of one a minute", "/v1/messages", keyHeader(limited), anthropicBody("m", false),
			want{route: "/v1/messages", model: "m", target: "both", status: 200, in: backendIn, out: backendOut}},
		{"over the rate limit", "/v1/messages", keyHeader(limited), anthropicBody("m", false),
			want{route: "/v1/messages", model: "m", status: 429, in: -1, reason: "API key over its rate_limit_rpm"}},
	}
	for i, tc := range cases {
		r := callWith(t, ts, tc.path, tc.header, tc.body)
		if r.resp.StatusCode != tc.want.status {
			t.Fatalf("%s: status %d, want %d: %s", tc.name, r.resp.StatusCode, tc.want.status, r.body)
		}
		// The line is written once the answer is done, which the client may see first.
		eventually(t, tc.name+"'s access log line", func() bool { return len(logs.access()) == i+1 })
		line := logs.access()[i]
		w := tc.want
		checkAccessLine(t, tc.name, line)
		for attr, v := range map[string]string{"route": w.route, "model": w.model, "served_model": w.served,
			"translated": w.translated, "target": w.target, "method": "POST", "client_ip": "127.0.0.1", "reason": w.reason} {
			if got := line.str(attr); got != v {
				t.Errorf("%s: %s=%q, want %q (%s)", tc.name, attr, got, v, line.text)
			}
		}
		if n, _ := line.num("status"); n != int64(w.status) {
			t.Errorf("%s: status=%d, want %d", tc.name, n, w.status)
		}
		if v, ok := line.attrs["stream"]; w.model != "" && (!ok || v.Kind() != slog.KindBool || v.Bool() != w.stream) {
			t.Errorf("%s: stream=%v, want %v", tc.name, v, w.stream)
		}
		if w.target != "" && line.str("pool") != "local" {
			t.Errorf("%s: pool=%q, want local", tc.name, line.str("pool"))
		}
		if w.target != "" && line.str("request_id") == "" {
			t.Errorf("%s: no request_id", tc.name)
		}
		in, inOK := line.num("input_tokens")
		out, outOK := line.num("output_tokens")
		switch {
		case w.in < 0 && (inOK || outOK):
			t.Errorf("%s: tokens in a line whose answer reported none: %s", tc.name, line.text)
		case w.in >= 0 && (in != w.in || out != w.out || !inOK || !outOK):
			t.Errorf("%s: tokens %d/%d (%v %v), want %d/%d", tc.name, in, out, inOK, outOK, w.in, w.out)
		}
		switch auth := tc.header.Get("Authorization"); {
		case auth == "Bearer "+secret && line.str("key_id") != keyID, auth == "" && line.str("key_id") != "":
			t.Errorf("%s: key_id=%q (the key's id is %q)", tc.name, line.str("key_id"), keyID)
		}
		for _, never := range []string{secret, only, limited, prompt, "Bearer"} {
			if strings.Contains(line.text, never) {
				t.Errorf("%s: the access log line holds %q: %s", tc.name, never, line.text)
			}
		}
	}

	// A pass-through (a circuit's other paths): any method, no model, still one line.
	r := wait(t, goCall(context.Background(), http.MethodGet, pass.URL+"/v1/files/abc?x=1", "", nil))
	if r.resp.StatusCode != 200 {
		t.Fatalf("pass-through: %d %s", r.resp.StatusCode, r.body)
	}
	eventually(t, "the pass-through's access log line", func() bool { return len(logs.access()) == len(cases)+1 })
	line := logs.access()[len(cases)]
	checkAccessLine(t, "pass-through", line)
	if line.str("method") != "GET" || line.str("route") != "/v1/files/abc" || line.str("pool") != "circuit" ||
		line.str("target") != "replica" || line.attrs["model"].Any() != nil {
		t.Errorf("pass-through line: %s", line.text)
	}
	if n, _ := line.num("status"); n != 200 {
		t.Errorf("pass-through status=%d", n)
	}
}

// checkAccessLine checks what every access log line has: INFO, and its timings as numbers (and
// the answer's size, when a target answered).
func checkAccessLine(t *testing.T, name string, line logRecord) {
	t.Helper()
	if line.level != slog.LevelInfo {
		t.Errorf("%s: access log at %v, want INFO", name, line.level)
	}
	attrs := []string{"status", "queue_ms", "ttfb_ms", "duration_ms"}
	if line.str("target") != "" {
		attrs = append(attrs, "bytes")
	}
	for _, attr := range attrs {
		if n, ok := line.num(attr); !ok || n < 0 {
			t.Errorf("%s: %s=%v, want a number of at least 0 (%s)", name, attr, line.attrs[attr], line.text)
		}
	}
	for _, attr := range []string{"method", "route", "client_ip"} {
		if line.str(attr) == "" {
			t.Errorf("%s: no %s (%s)", name, attr, line.text)
		}
	}
}

func TestAccessLogOff(t *testing.T) {
	ts, pass, logs := accessRelay(t, false)
	secret := createKey(t, ts, "")["secret"].(string)
	for _, body := range []string{chatBody("m", false), chatBody("ghost", true), `{"model":`} {
		callWith(t, ts, "/v1/chat/completions", keyHeader(secret), body)
	}
	callWith(t, ts, "/v1/chat/completions", nil, chatBody("m", false))
	wait(t, goCall(context.Background(), http.MethodGet, pass.URL+"/v1/files", "", nil))
	// Close waits for every handler to return: a line, if any, has been written by then.
	ts.Close()
	pass.Close()
	if lines := logs.access(); len(lines) != 0 {
		t.Fatalf("access_log off, yet %d lines, the first: %s", len(lines), lines[0].text)
	}
	logs.mu.Lock()
	n := len(logs.records)
	logs.mu.Unlock()
	if n == 0 {
		t.Fatal("nothing was logged at all: the capture is broken, so the test proves nothing")
	}
}
