package relay

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"modelrelay/relay/endpoint"
	"modelrelay/relay/rawjson"
)

// A Responses call is translated into chat unless the target is known not to speak it; the
// two older families translate into each other.
func TestSpeechVia(t *testing.T) {
	now := time.Now()
	learned := newSpeech(nil)
	learned.heardRefuses(OpenAI, now)
	for _, c := range []struct {
		name   string
		s      *speech
		d, via Dialect
	}{
		{"chat to messages", newSpeech(nil), OpenAI, Anthropic},
		{"messages to chat", newSpeech(nil), Anthropic, OpenAI},
		{"responses on auto", newSpeech(nil), Responses, OpenAI},
		{"responses on chat", newSpeech([]Dialect{OpenAI}), Responses, OpenAI},
		{"responses on messages alone", newSpeech([]Dialect{Anthropic}), Responses, Anthropic},
		{"responses on both", newSpeech([]Dialect{OpenAI, Anthropic}), Responses, OpenAI},
		{"responses on auto that refused chat", learned, Responses, Anthropic},
	} {
		if got := c.s.via(c.d, now); got != c.via {
			t.Errorf("%s: via %s, want %s", c.name, got, c.via)
		}
	}
	if p := newSpeech([]Dialect{Responses}).plan(Responses, endpoint.RouteResponses, now); p != planNative {
		t.Errorf("a target configured to speak the Responses API: plan %d, want native", p)
	}
}

// The relay's own errors on /v1/responses come in its shape (param present), and a 429 says
// when to try again in the message, where Codex CLI reads it.
func TestResponsesErrorBody(t *testing.T) {
	busy := errorBody(Responses, &relayError{status: http.StatusTooManyRequests, message: "queue full", code: "queue_full", wait: 3 * time.Second})
	for _, want := range []string{`"message":"queue full. Please try again in 3s."`, `"type":"rate_limit_error"`, `"code":"queue_full"`, `"param":null`} {
		if !strings.Contains(string(busy), want) {
			t.Errorf("429 body %s lacks %s", busy, want)
		}
	}
	gone := errorBody(Responses, errPreviousResponse)
	if !strings.Contains(string(gone), `"code":"previous_response_not_found"`) || !strings.Contains(string(gone), `"type":"invalid_request_error"`) {
		t.Errorf("404 body %s", gone)
	}
	if ev := streamErrorEvent(Responses, "cut", "upstream_error"); !strings.HasPrefix(string(ev), "event: error\ndata: {\"type\":\"error\"") {
		t.Errorf("stream error event %q", ev)
	}
}

// The body's one view says where previous_response_id lies, named as the Responses mapping
// reads names (escapes decoded, case folded); only a top-level string names a response.
func TestPreviousResponseID(t *testing.T) {
	for body, want := range map[string]string{
		`{"model":"m","previous_response_id":"resp_1","input":"x"}`: "resp_1",
		`{"model":"m","previous_response_id":"resp_\u0032"}`:        "resp_2",
		`{"model":"m","previous\u005fresponse_id":"resp_3"}`:        "resp_3",
		`{"model":"m","Previous_Response_ID":"resp_5"}`:             "resp_5",
		`{"model":"m","input":"previous_response_id"}`:              "",
		`{"model":"m","previous_response_id":null}`:                 "",
		`{"model":"m","previous_response_id":7}`:                    "",
		`{"model":"m","input":{"previous_response_id":"nested"}}`:   "",
	} {
		v, err := parseInference([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if got := rawjson.String([]byte(body)[v.previous.from:v.previous.to]); got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}
