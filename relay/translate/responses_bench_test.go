package translate

import "testing"

// BenchmarkResponsesStreamChunk is the cost of translating one streamed content chunk into a
// Responses text delta (compare BenchmarkOpenAIChunkToAnthropic).
func BenchmarkResponsesStreamChunk(b *testing.B) {
	benchResponsesStream(b, benchChunk)
}

// BenchmarkResponsesStreamToolChunk: one fragment of a call's arguments.
func BenchmarkResponsesStreamToolChunk(b *testing.B) {
	benchResponsesStream(b, []byte("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"ls -la\"}}]},\"finish_reason\":null}]}\n\n"))
}

func benchResponsesStream(b *testing.B, chunk []byte) {
	m := ResponseMeta{ID: NewResponseID(), Model: "m", Request: []byte(codexBody)}
	var s *ResponsesStream
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n%100_000 == 0 { // the stream keeps the answer: start another before it is large
			s = NewResponsesStream(m)
			s.Write(chunk) // response.created and the item are sent once
		}
		n++
		s.Write(chunk)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "chunks/s")
}

// BenchmarkResponsesToChat maps Codex's request mid-task (compare
// BenchmarkRequestAnthropicToOpenAI).
func BenchmarkResponsesToChat(b *testing.B) {
	body := []byte(codexBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ResponsesToChat(body, true)
	}
}
