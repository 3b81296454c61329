package usage

import (
	"strconv"
	"testing"
)

// chatStream is a typical streamed chat answer as its Writes: 200 content chunks (the model
// server flushes one per token), the usage chunk, data: [DONE]. With null, every chunk has
// "usage":null, as OpenAI writes them once usage is asked for; without, none has "usage"
// (vLLM, llama.cpp).
func chatStream(null bool) [][]byte {
	tail := `}]}`
	if null {
		tail = `}],"usage":null}`
	}
	var ws [][]byte
	for i := range 200 {
		ws = append(ws, []byte(`data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":" token`+strconv.Itoa(i)+`"},"logprobs":null,"finish_reason":null`+tail+"\n\n"))
	}
	return append(ws, []byte(openAIUsageChunk), []byte(done))
}

func benchTap(b *testing.B, m Mode, null bool) {
	ws := chatStream(null)
	n := 0
	for _, w := range ws {
		n += len(w)
	}
	var tap Tap
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		tap.Reset(m)
		for _, w := range ws {
			tap.Write(w)
		}
		tap.Close()
		if tap.Counts().Output != 10 {
			b.Fatal("usage not read")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ws)), "ns/chunk")
}

// BenchmarkTapStream watches a 200-chunk chat stream (one op is the whole stream).
func BenchmarkTapStream(b *testing.B) { benchTap(b, Stream, false) }

// BenchmarkTapStreamNull watches one whose chunks have "usage":null.
func BenchmarkTapStreamNull(b *testing.B) { benchTap(b, Stream, true) }

// BenchmarkTapStrip watches an OpenAI stream and drops its usage chunk.
func BenchmarkTapStrip(b *testing.B) { benchTap(b, StreamStrip, true) }

// BenchmarkTapStreamCut is the same stream cut at odd places (every Write ends mid-event), so
// that events are held while their rest arrives.
func BenchmarkTapStreamCut(b *testing.B) {
	var all []byte
	for _, w := range chatStream(true) {
		all = append(all, w...)
	}
	ws := pieces(all, 1000)
	var tap Tap
	b.SetBytes(int64(len(all)))
	b.ReportAllocs()
	for b.Loop() {
		tap.Reset(Stream)
		for _, w := range ws {
			tap.Write(w)
		}
		tap.Close()
	}
}

// BenchmarkTapJSON reads a chat completion's usage.
func BenchmarkTapJSON(b *testing.B) {
	body := []byte(chatJSON)
	var tap Tap
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		tap.Reset(JSON)
		tap.Write(body)
		tap.Close()
	}
}

// BenchmarkAskForUsage edits a small request.
func BenchmarkAskForUsage(b *testing.B) {
	body := []byte(`{"model":"gpt-4o","stream":true,"messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Say hi"}],"temperature":0.2}`)
	b.ReportAllocs()
	for b.Loop() {
		AskForUsage(body)
	}
}
