package relay

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"modelrelay/relay/usage"
)

// escaped keeps the benchmark's answer on the heap.
var escaped any

// discardWriter is a ResponseWriter that keeps nothing, so a benchmark measures the relay's
// own work on an answer.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Flush()                      {}

// BenchmarkRelayAnswerPath passes the answers of a plain inference request (untranslated, no
// keys, no x_pool_options) through the chain the relay composes for them: hold, commit, tap,
// client. One op is one request's answer: a JSON body in one read, or a 200-event stream
// flushed event by event.
func BenchmarkRelayAnswerPath(b *testing.B) {
	event := []byte("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" token\"}}]}\n\n")
	stream := make([][]byte, 200)
	for i := range stream {
		stream[i] = event
	}
	body := []byte(`{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("token ", 200) + `"}}],"usage":{"prompt_tokens":9,"completion_tokens":200}}`)
	for _, c := range []struct {
		name   string
		head   http.Header
		chunks [][]byte
		flush  bool
	}{
		{"json", http.Header{"Content-Type": {"application/json"}}, [][]byte{body}, false},
		{"stream", http.Header{"Content-Type": {"text/event-stream"}}, stream, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			w := &discardWriter{h: make(http.Header)}
			tap := new(usage.Tap)
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				a := newAnswer(w, OpenAI, 0, time.Now())
				escaped = a // as on the request path, where the request-timeout timer holds it
				a.tapUsage(tap, false)
				a.where = servedBy{served: "m", target: "t", queued: time.Millisecond}
				out := a.compose(attemptPlan{keepFailures: true})
				body, _ := out.Head(http.StatusOK, c.head, -1)
				for _, ch := range c.chunks {
					body.Chunk(ch, c.flush)
				}
				a.settle(out, nil, nil)
				a.usage()
			}
		})
	}
}
