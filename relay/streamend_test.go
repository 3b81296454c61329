package relay

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// streamEndCases are event streams and whether each is over: its last event whole and final.
var streamEndCases = []struct {
	name   string
	stream string
	over   bool
}{
	{"OpenAI, ended", "data: {\"choices\":[]}\n\ndata: [DONE]\n\n", true},
	{"OpenAI, blank lines after the end", "data: {}\n\ndata: [DONE]\n\n\n\n", true},
	{"OpenAI, [DONE] not yet whole", "data: {}\n\ndata: [DONE]\n", false},
	{"OpenAI, [DONE] cut", "data: {}\n\ndata: [DO", false},
	{"OpenAI, a chunk last", "data: {}\n\n", false},
	{"OpenAI, [DONE] followed by more", "data: [DONE]\n\ndata: {}\n\n", false},
	{"not [DONE] itself", "data: [DONE]x\n\n", false},
	{"Anthropic, ended", "event: message_delta\ndata: {}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", true},
	{"Anthropic, message_stop cut", "event: message_stop\ndata: {\"type\":\"mess", false},
	{"Anthropic, a delta last", "event: message_stop\ndata: {}\n\nevent: content_block_delta\ndata: {}\n\n", false},
	{"Responses, completed", "event: response.output_text.delta\ndata: {}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\"}\n\n", true},
	{"Responses, incomplete", "event: response.incomplete\ndata: {}\n\n", true},
	{"Responses, failed", "event: response.failed\ndata: {}\n\n", true},
	{"Responses, a delta last", "event: response.output_text.delta\ndata: {}\n\n", false},
	{"nothing written", "", false},
}

// The end is told however the stream is split into writes.
func TestStreamEnd(t *testing.T) {
	for _, tc := range streamEndCases {
		t.Run(tc.name, func(t *testing.T) {
			for cut := range len(tc.stream) + 1 {
				var s streamEnd
				s.write([]byte(tc.stream[:cut]))
				s.write([]byte(tc.stream[cut:]))
				if s.over() != tc.over {
					t.Fatalf("split at %d: over %v, want %v", cut, s.over(), tc.over)
				}
			}
			var s streamEnd
			for i := range len(tc.stream) {
				s.write([]byte{tc.stream[i]})
			}
			if s.over() != tc.over {
				t.Fatalf("a byte at a time: over %v, want %v", s.over(), tc.over)
			}
		})
	}
}

// A stream whose target is lost after its final event keeps what it was: nothing follows the
// end. One lost before it ends with the error event.
func TestClientWriterNothingAfterTheEnd(t *testing.T) {
	for _, tc := range streamEndCases {
		if tc.stream == "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c := newClient(w, OpenAI, 0, servedBy{})
			c.Head(200, sseHead, -1)
			if err := c.Chunk([]byte(tc.stream), true); err != nil {
				t.Fatal(err)
			}
			c.fail(errTargetLost)
			after := strings.TrimPrefix(w.Body.String(), tc.stream)
			if tc.over && after != "" {
				t.Fatalf("after the final event: %q", after)
			}
			if !tc.over && !strings.Contains(after, `"code":"worker_lost"`) {
				t.Fatalf("a stream lost before its end got %q after it, want the error event", after)
			}
		})
	}
}

// BenchmarkStreamEnd is what following the stream costs a chunk of a chat stream as a model
// server sends it (one event of about 200 bytes).
func BenchmarkStreamEnd(b *testing.B) {
	chunk := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m",` +
		`"choices":[{"index":0,"delta":{"content":"lorem ipsum dolor sit amet"},"finish_reason":null}]}` + "\n\n")
	var s streamEnd
	b.ReportAllocs()
	for b.Loop() {
		s.write(chunk)
	}
}
