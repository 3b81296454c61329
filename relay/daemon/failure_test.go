package daemon

import (
	"encoding/json"
	"testing"
)

// A failure the daemon makes up is shaped and typed as the endpoint's family shapes its
// errors, so the client's SDK parses it like any other.
func TestFailureBody(t *testing.T) {
	for _, c := range []struct {
		f         failure
		path      string
		anthropic bool
		typ       string
	}{
		{failPath, "/v1/chat/completions", false, "invalid_request_error"},
		{backendFailure("down"), "/v1/chat/completions", false, "upstream_error"},
		{failBusy, "/v1/completions?x=1", false, "server_error"},
		{failPath, "/v1/messages", true, "invalid_request_error"},
		{backendFailure("down"), "/v1/messages/count_tokens", true, "api_error"},
		{failDraining, "/v1/messages?beta=true", true, "overloaded_error"},
		{failBusy, "/tokenize", false, "server_error"},
	} {
		var v struct {
			Type  string            `json:"type"`
			Error map[string]string `json:"error"`
		}
		rc := c.f.complete("r1", c.path)
		if err := json.Unmarshal([]byte(*rc.Body), &v); err != nil {
			t.Fatalf("%s %d: %v", c.path, c.f.status, err)
		}
		if c.anthropic != (v.Type == "error") || v.Error["type"] != c.typ || v.Error["message"] != c.f.message {
			t.Errorf("%s %d: %s, want type %s in the %s shape", c.path, c.f.status, *rc.Body, c.typ,
				map[bool]string{true: "Anthropic", false: "OpenAI"}[c.anthropic])
		}
		if _, ok := v.Error["code"]; ok == c.anthropic {
			t.Errorf("%s %d: %s: an OpenAI error carries a code, an Anthropic one none", c.path, c.f.status, *rc.Body)
		}
	}
}
