package translate

import (
	"bytes"
	"testing"
)

var benchChunk = []byte("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" token\"},\"finish_reason\":null}]}\n\n")

// BenchmarkPassThroughChunk is the baseline: finding the event boundaries of one chunk, which
// any relay that does not translate still pays for nothing more than a copy.
func BenchmarkPassThroughChunk(b *testing.B) {
	out := make([]byte, 0, 512)
	for b.Loop() {
		out = append(out[:0], benchChunk...)
		_ = bytes.Count(out, []byte("\n\n"))
	}
}

// BenchmarkOpenAIChunkToAnthropic is the cost of translating one streamed content chunk.
func BenchmarkOpenAIChunkToAnthropic(b *testing.B) {
	s := NewAnthropicStream("m")
	s.Write(benchChunk) // message_start and the block are opened once
	b.ReportAllocs()
	for b.Loop() {
		s.Write(benchChunk)
	}
}

var benchEvent = []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" token\"}}\n\n")

// BenchmarkAnthropicEventToOpenAI is the cost of translating one streamed text delta.
func BenchmarkAnthropicEventToOpenAI(b *testing.B) {
	s := NewOpenAIStream("m", false)
	s.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"}}\n\n"))
	b.ReportAllocs()
	for b.Loop() {
		s.Write(benchEvent)
	}
}

// BenchmarkRequestAnthropicToOpenAI maps a small Anthropic request with a tool.
func BenchmarkRequestAnthropicToOpenAI(b *testing.B) {
	body := []byte(`{"model":"m","max_tokens":64,"stream":true,"system":"You are helpful.","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"Bash","description":"run","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}}]}`)
	b.ReportAllocs()
	for b.Loop() {
		AnthropicToOpenAI(body)
	}
}
