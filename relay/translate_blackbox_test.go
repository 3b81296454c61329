package relay_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"modelrelay/relay"
)

// openAIOnly answers /v1/chat/completions and 404s everything else, like llama-server of old.
func openAIOnly(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"detail":"Not Found"}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"x1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`)
}

const messagesBody = `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`

func countPath(seen []*seenRequest, path string) int {
	n := 0
	for _, s := range seen {
		if strings.SplitN(s.path, "?", 2)[0] == path {
			n++
		}
	}
	return n
}

func TestAutoTargetLearnsItsFamilyFromOneRefusal(t *testing.T) {
	be := newBackend(t, openAIOnly)
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{{Name: "b", URL: be.URL, Models: []string{"m"}}}})
	for i := 0; i < 3; i++ {
		r := wait(t, goPost(ts, "/v1/messages?beta=true", messagesBody))
		if r.resp.StatusCode != 200 || r.resp.Header.Get("X-Modelrelay-Translated") != "anthropic->openai" ||
			!strings.Contains(string(r.body), `"type":"message"`) || !strings.Contains(string(r.body), `"id":"msg_x1"`) {
			t.Fatalf("request %d: %d %v %s", i, r.resp.StatusCode, r.resp.Header, r.body)
		}
	}
	seen := be.requests()
	if n := countPath(seen, "/v1/messages"); n != 1 {
		t.Fatalf("the backend was probed %d times, want once", n)
	}
	if seen[0].path != "/v1/messages?beta=true" {
		t.Fatalf("the probe went to %q, want the client's path and query", seen[0].path)
	}
	if seen[1].path != "/v1/chat/completions" || seen[1].body == messagesBody {
		t.Fatalf("the replay: %+v", seen[1])
	}
}

func TestRefusedInBothFamiliesAnswersTheFirstRefusalAndForgets(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-From", r.URL.Path)
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"message":"model m does not exist"}}`)
	})
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{{Name: "b", URL: be.URL, Models: []string{"m"}}}})
	for i := 0; i < 2; i++ {
		r := wait(t, goPost(ts, "/v1/chat/completions", chatBody("m", false)))
		if r.resp.StatusCode != 404 || string(r.body) != `{"error":{"message":"model m does not exist"}}` ||
			r.resp.Header.Get("X-From") != "/v1/chat/completions" || r.resp.Header.Get("X-Modelrelay-Translated") != "" {
			t.Fatalf("request %d: %d %v %s", i, r.resp.StatusCode, r.resp.Header, r.body)
		}
	}
	// Nothing was learned: each request probed the client's family first.
	if n := countPath(be.requests(), "/v1/chat/completions"); n != 2 {
		t.Fatalf("%d native attempts, want 2", n)
	}
}

func TestConfiguredFamilyIsTranslatedWithoutAProbe(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":5}}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hey"}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`,
			`{"type":"message_stop"}`,
		} {
			fmt.Fprintf(w, "event: x\ndata: %s\n\n", ev)
		}
	})
	_, ts := startServer(t, relay.Options{Timings: quietTimings(),
		Backends: []relay.Backend{{Name: "b", URL: be.URL, Models: []string{"m"}, Dialects: []relay.Dialect{relay.Anthropic}}}})
	r := wait(t, goPost(ts, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	body := string(r.body)
	if r.resp.StatusCode != 200 || !strings.Contains(body, `"content":"hey"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") ||
		strings.Contains(body, `"usage"`) {
		t.Fatalf("%d %v %s", r.resp.StatusCode, r.resp.Header, body)
	}
	seen := be.requests()
	if len(seen) != 1 || seen[0].path != "/v1/messages" || seen[0].header.Get("Anthropic-Version") == "" ||
		!strings.Contains(seen[0].body, `"max_tokens":4096`) {
		t.Fatalf("backend saw %+v", seen)
	}
}

func TestCountTokensRefusalTeachesNothing(t *testing.T) {
	// Speaks Messages but has no count_tokens (and no /tokenize).
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	})
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{{Name: "b", URL: be.URL, Models: []string{"m"}}}})
	r := wait(t, goPost(ts, "/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"abcdefgh"}]}`))
	if r.resp.StatusCode != 200 || string(r.body) != `{"input_tokens":2}` || r.resp.Header.Get("X-Modelrelay-Estimated") != "true" {
		t.Fatalf("count_tokens: %d %v %s", r.resp.StatusCode, r.resp.Header, r.body)
	}
	r = wait(t, goPost(ts, "/v1/messages", messagesBody))
	if r.resp.StatusCode != 200 || r.resp.Header.Get("X-Modelrelay-Translated") != "" {
		t.Fatalf("messages after count_tokens: %d %v %s", r.resp.StatusCode, r.resp.Header, r.body)
	}
	if n := countPath(be.requests(), "/v1/chat/completions"); n != 0 {
		t.Fatalf("/v1/messages went translated %d times", n)
	}
}

func TestTranslatedStreamCutByTheTargetEndsWithAnErrorEvent(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":"par"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection dies mid-answer
	})
	_, ts := startServer(t, relay.Options{Timings: quietTimings(),
		Backends: []relay.Backend{{Name: "b", URL: be.URL, Models: []string{"m"}, Dialects: []relay.Dialect{relay.OpenAI}}}})
	r := wait(t, goPost(ts, "/v1/messages", `{"model":"m","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	body := string(r.body)
	if !strings.Contains(body, "event: message_start") || !strings.Contains(body, `"text":"par"`) ||
		!strings.Contains(body, "event: error\n") || strings.Contains(body, "message_stop") {
		t.Fatalf("%d %s", r.resp.StatusCode, body)
	}
}

func TestUntranslatableBodyIs400InTheClientsFamily(t *testing.T) {
	be := newBackend(t, openAIOnly)
	_, ts := startServer(t, relay.Options{Timings: quietTimings(),
		Backends: []relay.Backend{{Name: "b", URL: be.URL, Models: []string{"m"}, Dialects: []relay.Dialect{relay.OpenAI}}}})
	r := wait(t, goPost(ts, "/v1/messages", `{"model":"m","max_tokens":8,"messages":"not a list"}`))
	if r.resp.StatusCode != 400 || !strings.Contains(string(r.body), `"type":"invalid_request_error"`) || len(be.requests()) != 0 {
		t.Fatalf("%d %s (backend saw %d)", r.resp.StatusCode, r.body, len(be.requests()))
	}
}
