package main

// A translated answer a client did not ask to stream, from targets that stream anyway (some
// servers and proxies ignore "stream": false): the client gets the whole answer in its own
// family, and when the stream cannot become one (an event over the relay's 1 MiB bound) a 502
// in its family — never a 200 with an event stream it cannot read. A client that asked for a
// stream still gets the stream, ended by an error event.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestE2ETranslatedAnswerOfAStreamingTargetToANonStreamingClient(t *testing.T) {
	t.Parallel()
	openai, anthropic := newFakeModel(t, "openai"), newFakeModel(t, "anthropic")
	openaiBehindWorker := newFakeModel(t, "openai")
	for _, f := range []*fakeModel{openai, anthropic, openaiBehindWorker} {
		f.streamAlways.Store(true)
	}
	addr := startStandalone(t, fmt.Sprintf("worker_secret: an-secret\nbackends:\n"+
		"  - name: oa\n    url: %s\n    models: [oa-m]\n    dialects: [openai]\n"+
		"  - name: an\n    url: %s\n    models: [an-m]\n    dialects: [anthropic]\n", openai.url, anthropic.url))
	startWorkerDaemon(t, addr, "an-secret", openaiBehindWorker.url, "worker-oa-m")
	waitModel(t, addr, "worker-oa-m")

	cases := []struct {
		name, model, path, translated string
	}{
		{"anthropic client, OpenAI-only backend", "oa-m", "/v1/messages", "anthropic->openai"},
		{"anthropic client, OpenAI-only server behind a worker", "worker-oa-m", "/v1/messages", "anthropic->openai"},
		{"openai client, Anthropic-only backend", "an-m", "/v1/chat/completions", "openai->anthropic"},
	}
	// The credential an SDK sends (the Anthropic-only fake wants one, as x-api-key).
	key := http.Header{"Authorization": {"Bearer sk-test"}}
	for _, c := range cases {
		body := func(prompt string, stream bool) string {
			return fmt.Sprintf(`{"model":%q,"max_tokens":64,"stream":%v,"messages":[{"role":"user","content":%q}]}`, c.model, stream, prompt)
		}

		// An ordinary answer: whole, as JSON in the client's family.
		status, h, b := post(t, addr, c.path, key, body("hello", false))
		if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || h.Get("X-Modelrelay-Translated") != c.translated {
			t.Errorf("%s, hello: %d %q translated %q: %.300s", c.name, status, h.Get("Content-Type"), h.Get("X-Modelrelay-Translated"), b)
		} else {
			checkWholeAnswer(t, c.name, c.path, b)
		}

		// One event over the 1 MiB bound: nothing was sent yet, so a 502 in the client's family.
		status, h, b = post(t, addr, c.path, key, body("one huge event please", false))
		checkDialectError(t, c.name+", huge event", c.path, rawAnswer{status: status, header: h, body: b}, http.StatusBadGateway)
		if !strings.HasPrefix(h.Get("Content-Type"), "application/json") || !bytes.Contains(b, []byte("1 MiB")) {
			t.Errorf("%s, huge event: %q %s", c.name, h.Get("Content-Type"), b)
		}

		// A streaming client still gets its stream, ended by the error event.
		status, h, b = post(t, addr, c.path, key, body("one huge event please", true))
		if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") || !bytes.Contains(b, []byte("exceeds 1 MiB")) {
			t.Errorf("%s, huge event, streaming client: %d %q %.300s", c.name, status, h.Get("Content-Type"), b)
		}
	}
}

// checkWholeAnswer asserts a whole (not streamed) answer of the fake in path's family.
func checkWholeAnswer(t *testing.T, label, path string, b []byte) {
	t.Helper()
	var v struct {
		Type    string
		Content []struct{ Type, Text string }
		Choices []struct {
			Message struct{ Content string }
		}
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Errorf("%s: not JSON: %.300s", label, b)
		return
	}
	text := ""
	if strings.HasPrefix(path, "/v1/messages") {
		if v.Type == "message" && len(v.Content) == 1 && v.Content[0].Type == "text" {
			text = v.Content[0].Text
		}
	} else if len(v.Choices) == 1 {
		text = v.Choices[0].Message.Content
	}
	if !strings.HasPrefix(text, "Hello from the ") {
		t.Errorf("%s: not the fake's whole answer in the client's family: %.300s", label, b)
	}
}
