package demo

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRequest: whatever body arrives on whichever route, the demo answers a status of its
// API (200, 400, 404, 413) in that API's shape, never panics, and a stream it starts it ends.
func FuzzRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"demo","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"demo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"a b"}]}]}`,
		`{"model":"demo","max_tokens":2,"stream":true,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"x"}]}]}]}`,
		`{"model":"demo","prompt":["a","b"],"stream":true}`,
		`{"model":"demo","messages":null}`, `null`, `{"model":7}`, `{"model":"demo","max_tokens":-1}`,
	} {
		for i := range routes {
			f.Add(i, seed)
		}
	}
	s := New(Options{FirstToken: -1, PerToken: -1})
	f.Fuzz(func(t *testing.T, route int, body string) {
		if route < 0 || route >= len(routes) {
			return
		}
		path := routes[route]
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		out := rec.Body.String()
		switch rec.Code {
		case 200:
			if rec.Header().Get("Content-Type") == "text/event-stream" {
				end := "data: [DONE]\n\n"
				if strings.HasPrefix(path, "/v1/messages") {
					end = "data: {\"type\":\"message_stop\"}\n\n"
				}
				if !strings.HasSuffix(out, end) {
					t.Fatalf("%s %q: the stream does not end with %q: %q", path, body, end, out)
				}
				return
			}
		case 400, 404, 413:
		default:
			t.Fatalf("%s %q: status %d", path, body, rec.Code)
		}
		if !json.Valid([]byte(out)) {
			t.Fatalf("%s %q: %d answer is not JSON: %q", path, body, rec.Code, out)
		}
	})
}

var routes = []string{"/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens"}
