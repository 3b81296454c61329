package relay_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"modelrelay/relay"
)

// A known path called with a method it does not take answers 405 in its route's error shape,
// with the Allow header net/http would send: API clients parse the error instead of failing
// on a text body.
func TestWrongMethodIsJSONInTheRoutesShape(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), AdminToken: adminToken})
	cases := []struct {
		method, path string
		shape        string // openai, anthropic or plain
		allow        string
	}{
		{http.MethodGet, "/v1/chat/completions", "openai", "POST"},
		{http.MethodPut, "/v1/completions", "openai", "POST"},
		{http.MethodGet, "/v1/responses", "openai", "POST"},
		{http.MethodDelete, "/v1/embeddings", "openai", "POST"},
		{http.MethodPost, "/v1/models", "openai", "GET, HEAD"},
		{http.MethodGet, "/v1/messages", "anthropic", "POST"},
		{http.MethodGet, "/v1/messages/count_tokens", "anthropic", "POST"},
		{http.MethodDelete, "/health", "plain", "GET, HEAD"},
		{http.MethodPost, "/livez", "plain", "GET, HEAD"},
		{http.MethodPost, "/readyz", "plain", "GET, HEAD"},
		{http.MethodPost, "/metrics", "plain", "GET, HEAD"},
		{http.MethodPost, "/v1/worker/connect", "plain", "GET, HEAD"},
		{http.MethodGet, "/admin/workers/worker-1/drain", "plain", "POST"},
		{http.MethodPut, "/admin/keys", "plain", "GET, HEAD, POST"},
		{http.MethodGet, "/admin/keys/k1", "plain", "DELETE, PATCH"},
		{http.MethodOptions, "/admin/stats", "plain", "GET, HEAD"},
	}
	for _, c := range cases {
		// The admin token is sent: the method is refused before anyone is asked who they are.
		r := wait(t, goCall(context.Background(), c.method, ts.URL+c.path, "",
			http.Header{"Authorization": {"Bearer " + adminToken}}))
		what := c.method + " " + c.path
		if r.resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: status %d, want 405; body %s", what, r.resp.StatusCode, r.body)
			continue
		}
		if got := r.resp.Header.Get("Allow"); got != c.allow {
			t.Errorf("%s: Allow %q, want %q", what, got, c.allow)
		}
		if ct := r.resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q, want application/json", what, ct)
		}
		wantMessage := "method " + c.method + " is not allowed on " + c.path + " (allowed: " + c.allow + ")"
		var body struct {
			Type  string          `json:"type"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Errorf("%s: body %q is not JSON: %v", what, r.body, err)
			continue
		}
		switch c.shape {
		case "plain":
			var message string
			if err := json.Unmarshal(body.Error, &message); err != nil || message != wantMessage {
				t.Errorf("%s: body %s, want {\"error\": %q}", what, r.body, wantMessage)
			}
		case "openai", "anthropic":
			var e struct{ Type, Message string }
			if err := json.Unmarshal(body.Error, &e); err != nil {
				t.Errorf("%s: error %s is not an object: %v", what, body.Error, err)
				continue
			}
			if e.Type != "invalid_request_error" || e.Message != wantMessage {
				t.Errorf("%s: error %s, want type invalid_request_error and message %q", what, body.Error, wantMessage)
			}
			if anthropic := c.shape == "anthropic"; anthropic != (body.Type == "error") {
				t.Errorf("%s: top-level type %q in %s, want \"error\" exactly in the Anthropic shape", what, body.Type, r.body)
			}
		}
	}
}

// The right method still reaches the route: the 405 answer is only for the others, and HEAD
// is served where GET is.
func TestRightMethodStillServed(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/health", 200},
		{http.MethodHead, "/livez", 200},
		{http.MethodGet, "/v1/models", 200},
		{http.MethodPost, "/v1/chat/completions", 404}, // a model nobody serves: the route ran
		{http.MethodGet, "/v1/nothing-here", 404},
	} {
		body := ""
		if c.method == http.MethodPost {
			body = chatBody("nobody", false)
		}
		r := wait(t, goCall(context.Background(), c.method, ts.URL+c.path, body, nil))
		if r.resp.StatusCode != c.want {
			t.Errorf("%s %s: status %d, want %d; body %s", c.method, c.path, r.resp.StatusCode, c.want, r.body)
		}
		if allow := r.resp.Header.Get("Allow"); allow != "" {
			t.Errorf("%s %s: Allow %q on a call the route took", c.method, c.path, allow)
		}
	}
}
