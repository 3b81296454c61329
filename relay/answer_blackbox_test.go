package relay_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"modelrelay/relay"
)

// What a client gets when the relay cannot complete an answer: before it has seen anything
// (a translated answer is held until it is whole), a JSON error in its family with a 502;
// after the head of a stream, the stream ends with an error event; after the head of any other
// body, the connection is torn (an error appended would read as part of the body).
func TestAnswerThatFailsInsideTheRelay(t *testing.T) {
	huge := strings.Repeat("x", 1<<20+1) // over the 1 MiB event bound
	openAIChunk := func(delta string) string {
		return `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"` + delta + `"}}]}` + "\n\n"
	}
	const finish = `data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	anthropicDelta := func(text string) string {
		return "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + text + "\"}}\n\n"
	}
	const anthropicStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":3}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	const anthropicEnd = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	// stream answers with an event stream whatever the request asked, as some servers do.
	stream := func(events ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, e := range events {
				io.WriteString(w, e)
				w.(http.Flusher).Flush()
			}
		}
	}
	// torn sends the head and part of a body, then the connection dies.
	torn := func(status int, contentType, part string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(status)
			io.WriteString(w, part)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
	}
	const (
		messages = "/v1/messages"
		chat     = "/v1/chat/completions"
	)
	cases := []struct {
		name     string
		target   relay.Dialect // what the backend speaks
		path     string
		stream   bool // the client asks for a stream
		backend  http.HandlerFunc
		status   int
		typ      string   // the answer's Content-Type
		contains []string // in the body
		broken   bool     // the client's read of the body fails (a torn connection)
	}{
		{"a stream gathered into the answer", relay.OpenAI, messages, false, stream(openAIChunk("Hel"), openAIChunk("lo"), finish),
			200, "application/json", []string{`"type":"message"`, `"text":"Hello"`, `"stop_reason":"end_turn"`}, false},
		{"an event over 1 MiB", relay.OpenAI, messages, false, stream(openAIChunk("Hel"), openAIChunk(huge), finish),
			502, "application/json", []string{`{"type":"error","error":{"type":"api_error","message":"upstream error: stream event exceeds 1 MiB"}}`}, false},
		{"the target's error event", relay.OpenAI, messages, false, stream(openAIChunk("Hel"), `data: {"error":{"message":"KV cache full"}}`+"\n\n"),
			502, "application/json", []string{`"message":"upstream error: KV cache full"`}, false},
		{"a stream cut short", relay.OpenAI, messages, false, stream(openAIChunk("Hel")),
			502, "application/json", []string{`"type":"error"`, "ended the stream before the answer was complete"}, false},
		{"a stream that dies", relay.OpenAI, messages, false, torn(200, "text/event-stream", openAIChunk("Hel")),
			502, "application/json", []string{`"type":"error"`, "upstream closed the connection"}, false},
		{"a whole answer that is not JSON", relay.OpenAI, messages, false, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":`)
		}, 502, "application/json", []string{`"message":"upstream error: the model server's answer could not be translated"`}, false},
		{"a whole answer that dies", relay.OpenAI, messages, false, torn(200, "application/json", `{"id":`),
			502, "application/json", []string{`"message":"upstream error: upstream closed the connection"`}, false},
		{"openai client: a stream gathered into the answer", relay.Anthropic, chat, false, stream(anthropicStart, anthropicDelta("Hi"), anthropicEnd),
			200, "application/json", []string{`"object":"chat.completion"`, `"content":"Hi"`, `"finish_reason":"stop"`}, false},
		{"openai client: an event over 1 MiB", relay.Anthropic, chat, false, stream(anthropicStart, anthropicDelta(huge), anthropicEnd),
			502, "application/json", []string{`{"error":{"message":"upstream error: stream event exceeds 1 MiB","type":"upstream_error","code":null}}`}, false},
		{"a streaming client still gets the error event", relay.OpenAI, messages, true, stream(openAIChunk("Hel"), openAIChunk(huge), finish),
			200, "text/event-stream", []string{`"text":"Hel"`, "event: error\n", "exceeds 1 MiB"}, false},
		{"openai streaming client still gets the error chunk", relay.Anthropic, chat, true, stream(anthropicStart, anthropicDelta(huge), anthropicEnd),
			200, "text/event-stream", []string{`data: {"error":`, "exceeds 1 MiB"}, false},

		// Untranslated: a failure held back (429/5xx) that breaks off is not handed on cut.
		{"untranslated: a 500 whose body breaks off", relay.OpenAI, chat, false, torn(500, "application/json", `{"error":{"mess`),
			502, "application/json", []string{`"message":"upstream error: upstream closed the connection"`}, false},
		{"untranslated: a plain body cut midway is torn", relay.OpenAI, chat, false, torn(200, "application/json", `{"id":"c1","choices":[`),
			200, "application/json", nil, true},
		{"untranslated: a plain answer to a streaming request cut midway is torn", relay.OpenAI, chat, true, torn(200, "application/json", `{"id":"c1","choices":[`),
			200, "application/json", nil, true},
		{"untranslated: a stream cut midway ends with an error event", relay.OpenAI, chat, true, torn(200, "text/event-stream", openAIChunk("Hel")),
			200, "text/event-stream", []string{`"content":"Hel"`, `data: {"error":{"message":"upstream error: upstream closed the connection","type":"upstream_error","code":"worker_lost"}}`}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be := newBackend(t, c.backend)
			_, ts := startServer(t, relay.Options{Timings: quietTimings(),
				Backends: []relay.Backend{{Name: "b", URL: be.URL, Models: []string{"m"}, Dialects: []relay.Dialect{c.target}}}})
			body := fmt.Sprintf(`{"model":"m","max_tokens":8,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, c.stream)
			r := <-goCall(context.Background(), http.MethodPost, ts.URL+c.path, body, nil)
			if r.resp == nil {
				if !c.broken {
					t.Fatalf("no answer: %v", r.err)
				}
				return // torn before the buffered head went out: the client saw no answer at all
			}
			if r.resp.StatusCode != c.status || !strings.HasPrefix(r.resp.Header.Get("Content-Type"), c.typ) || (r.err != nil) != c.broken {
				t.Fatalf("%d %q, read error %v (want %d %q, broken %v): %.300s", r.resp.StatusCode, r.resp.Header.Get("Content-Type"),
					r.err, c.status, c.typ, c.broken, r.body)
			}
			for _, want := range c.contains {
				if !strings.Contains(string(r.body), want) {
					t.Errorf("the answer lacks %s: %.400s", want, r.body)
				}
			}
			if c.broken && strings.Contains(string(r.body), "error") {
				t.Errorf("an error was appended to a cut body: %s", r.body)
			}
		})
	}
}
