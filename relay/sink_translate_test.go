package relay

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"modelrelay/relay/endpoint"
	"modelrelay/relay/translate"
)

const (
	openAIAnswer = `{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	openAIChunk  = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"},\"finish_reason\":null}]}\n\n"
	openAIStop   = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
)

// toAnthropic converts an OpenAI target's answer for an Anthropic client.
func toAnthropic(streaming bool) *conversion {
	return &conversion{log: slog.New(slog.DiscardHandler), route: endpoint.RouteMessages, client: Anthropic, target: OpenAI, meta: translate.Request{Model: "claude"},
		streaming: streaming, native: []byte(`{"model":"claude","messages":[{"role":"user","content":"hi"}]}`)}
}

func TestTranslateSink(t *testing.T) {
	for _, tc := range []struct {
		name   string
		conv   *conversion
		answer answerOf
		want   []string // what passed on
		header string   // the passed head's x-modelrelay-* translation headers
		body   []string // in the body that passed
	}{
		{name: "a whole answer is held and written translated", conv: toAnthropic(false),
			answer: answerOf{status: 200, header: jsonHead, length: int64(len(openAIAnswer)), chunks: []string{openAIAnswer[:40], openAIAnswer[40:]}},
			want:   []string{"head 200 ", "chunk ", "end"}, header: "anthropic->openai",
			body: []string{`"type":"message"`, `"text":"hello"`, `"model":"claude"`}},
		{name: "a stream is translated as it comes", conv: toAnthropic(true),
			answer: answerOf{status: 200, header: sseHead, length: -1, chunks: []string{openAIChunk, openAIStop}, stream: true},
			want:   []string{"head 200 -1", "chunk ", "chunk ", "end"}, header: "anthropic->openai",
			body: []string{"event: message_start", `"text":"hello"`, "event: message_stop"}},
		{name: "a stream the client did not ask for is gathered into one answer", conv: toAnthropic(false),
			answer: answerOf{status: 200, header: sseHead, length: -1, chunks: []string{openAIChunk, openAIStop}, stream: true},
			want:   []string{"head 200 ", "chunk ", "end"}, header: "anthropic->openai",
			body: []string{`"type":"message"`, `"text":"hello"`}},
		{name: "a failure is written in the client's family", conv: toAnthropic(true),
			answer: answerOf{status: 503, header: jsonHead, length: -1, chunks: []string{`{"error":{"message":"overloaded"}}`}},
			want:   []string{"head 503 ", "chunk ", "end"}, header: "anthropic->openai",
			body: []string{`"type":"error"`, "overloaded"}},
		{name: "count_tokens without /tokenize is estimated",
			conv:   &conversion{log: slog.New(slog.DiscardHandler), route: endpoint.RouteCountTokens, client: Anthropic, target: OpenAI, native: []byte(`{"model":"claude","messages":[{"role":"user","content":"hello there"}]}`)},
			answer: answerOf{status: 404, header: jsonHead, length: 9, chunks: []string{"not found"}},
			want:   []string{"head 200 ", "chunk ", "end"}, header: "anthropic->openai estimated",
			body: []string{`"input_tokens":`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			var tr translateSink
			client := clientWriter{}
			if err := tc.answer.into(tr.wrap(&r, tc.conv, &client)); err != nil {
				t.Fatal(err)
			}
			if len(r.got) != len(tc.want) {
				t.Fatalf("passed %q, want %q", r.got, tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(r.got[i], w) {
					t.Fatalf("passed %q, want %q", r.got, tc.want)
				}
			}
			h := r.header.Get(translatedHeader)
			if r.header.Get("X-Modelrelay-Estimated") == "true" {
				h += " estimated"
			}
			if h != tc.header {
				t.Errorf("translation headers %q, want %q", h, tc.header)
			}
			for _, b := range tc.body {
				if !strings.Contains(string(r.body), b) {
					t.Errorf("body lacks %s:\n%s", b, r.body)
				}
			}
			if client.ender != &tr {
				t.Error("the client writer does not end a cut stream in the translation's events")
			}
		})
	}
}

// TestTranslateSinkHead: a translated head keeps the target's end-to-end headers, never its
// length, type or encoding.
func TestTranslateSinkHead(t *testing.T) {
	var r recorder
	var tr translateSink
	target := http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}, "Content-Length": {"99"},
		"X-Backend": {"vllm"}, "Connection": {"close"}}
	tr.wrap(&r, toAnthropic(true), &clientWriter{}).Head(200, target, 99)
	h := r.header
	if h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache" || h.Get("Content-Length") != "" ||
		h.Get("X-Backend") != "vllm" || h.Get("Connection") != "" {
		t.Fatalf("head %v", h)
	}
	if target.Get("Content-Length") != "99" {
		t.Fatal("the target's headers changed")
	}
}

// TestTranslateSinkCutShort: a stream that breaks stops the target and ends in the stream's
// own error event; a whole answer that cannot be gathered is a 502.
func TestTranslateSinkCutShort(t *testing.T) {
	var tr translateSink
	s := tr.wrap(&recorder{}, toAnthropic(true), &clientWriter{})
	if _, ok := tr.endEvent("x"); ok {
		t.Fatal("a stream not started is not the translation's to end")
	}
	s.Head(200, sseHead, -1)
	err := s.Chunk([]byte("data: "+strings.Repeat("x", translate.MaxEventBytes+1)), true)
	var re *relayError
	if !errors.Is(err, errStreamTooLarge) || !errors.As(err, &re) || re.status != http.StatusBadGateway {
		t.Fatalf("broken stream: %v", err)
	}
	if ev, ok := tr.endEvent(re.message); !ok || !strings.HasPrefix(string(ev), "event: error\n") {
		t.Fatalf("end event %q", ev)
	}

	s = tr.wrap(&recorder{}, toAnthropic(false), &clientWriter{})
	s.Head(200, sseHead, -1)
	err = s.Chunk([]byte("data: "+strings.Repeat("x", translate.MaxEventBytes+1)), true)
	if !errors.Is(err, errStreamTooLarge) || !errors.As(err, &re) || re.status != http.StatusBadGateway {
		t.Fatalf("a stream gathered whole that broke: %v", err)
	}
}
