package protocol

import (
	"strings"
	"testing"
)

// Before (reflective, encoding/json) and after (hand-written) in one run, on the frames the
// relay sends most: a streamed chunk and a request.

// benchChunk is a typical streamed chunk: a 40-byte SSE event under a UUID request id.
var benchChunk = ResponseChunk{
	RequestID: "0b4e2f8c-3d1a-4c55-9a7e-2f1d0c9b8a76",
	Chunk:     "data: {\"delta\":{\"content\":\"Hi there\"}}\n\n",
}

// benchRequest is a chat completion request: a 1 KiB body and 6 end-to-end headers.
var benchRequest = func() Request {
	body := `{"model":"llama3-8b","stream":true,"messages":[{"role":"system","content":"You are terse."},` +
		`{"role":"user","content":"` + strings.Repeat("Tell me about <relays> & frames. ", 40)
	body = body[:1024-3] + `"}]`
	return Request{
		RequestID:    "0b4e2f8c-3d1a-4c55-9a7e-2f1d0c9b8a76",
		Model:        "llama3-8b",
		EndpointPath: "/v1/chat/completions",
		IsStreaming:  true,
		Body:         body,
		Headers: Headers{
			"accept":       "text/event-stream",
			"content-type": "application/json",
			"user-agent":   "OpenAI/Python 1.51.0",
			"x-request-id": "req_7f3a9c2e",
			"x-trace-id":   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			"openai-beta":  "assistants=v2",
		},
	}
}()

func benchEncode(b *testing.B, m Message, enc func(Message) ([]byte, error)) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := enc(m); err != nil {
			b.Fatal(err)
		}
	}
}

func benchDecode(b *testing.B, m Message, dec func([]byte) (Message, error)) {
	frame, _ := marshalReflective(m)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dec(frame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChunkEncode(b *testing.B) {
	b.Run("reflective", func(b *testing.B) { benchEncode(b, benchChunk, marshalReflective) })
	b.Run("handwritten", func(b *testing.B) { benchEncode(b, benchChunk, Marshal) })
}

func BenchmarkChunkDecode(b *testing.B) {
	b.Run("reflective", func(b *testing.B) { benchDecode(b, benchChunk, decodeWorkerReflective) })
	b.Run("handwritten", func(b *testing.B) { benchDecode(b, benchChunk, DecodeWorkerMessage) })
}

func BenchmarkRequestEncode(b *testing.B) {
	b.Run("reflective", func(b *testing.B) { benchEncode(b, benchRequest, marshalReflective) })
	b.Run("handwritten", func(b *testing.B) { benchEncode(b, benchRequest, Marshal) })
}

func BenchmarkRequestDecode(b *testing.B) {
	b.Run("reflective", func(b *testing.B) { benchDecode(b, benchRequest, decodeServerReflective) })
	b.Run("handwritten", func(b *testing.B) { benchDecode(b, benchRequest, DecodeServerMessage) })
}
