package main

// A fake OpenAI-style model server whose health the test turns while it runs, for the fallback
// and breaker tests: it answers normally, or with an error status, takes its time, holds
// requests until released, or cuts a stream after its first event. It records every inference
// call with the body as sent and when it arrived and was answered, so a test can tell from
// the outside which target got what, and when.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type flaky struct {
	name string
	url  string

	status    atomic.Int32 // 0 = answer normally, else answer this status
	delay     atomic.Int64 // per inference call, in nanoseconds
	cutStream atomic.Bool  // a stream dies after its first event
	arrived   atomic.Int64 // inference calls received so far, held ones included

	mu      sync.Mutex
	hold    chan struct{} // when set, inference calls wait for it to close
	entered chan struct{} // signalled by each call that starts waiting on hold
	seen    []flakyCall
}

// flakyCall is one inference call as the fake saw it.
type flakyCall struct {
	Path     string
	Header   http.Header
	Raw      []byte // the body as sent
	Model    string // the body's "model"
	Status   int    // what the fake answered
	Arrived  time.Time
	Answered time.Time // when the fake started its answer (after any hold or delay)
}

func newFlaky(t testing.TB, name string) *flaky {
	t.Helper()
	f := &flaky{name: name}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// closedURL is an http URL where nothing listens: a backend that is down.
func closedURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func (f *flaky) calls() []flakyCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]flakyCall(nil), f.seen...)
}

// count is the number of inference calls that reached the fake (held ones included).
func (f *flaky) count() int { return int(f.arrived.Load()) }

func (f *flaky) setStatus(status int)     { f.status.Store(int32(status)) }
func (f *flaky) setDelay(d time.Duration) { f.delay.Store(int64(d)) }

// lastCall is the last inference call answered (false before the first).
func (f *flaky) lastCall() (flakyCall, bool) {
	c := f.calls()
	if len(c) == 0 {
		return flakyCall{}, false
	}
	return c[len(c)-1], true
}

// holdCalls makes inference calls wait (each signals entered first) until release; the answer
// is whatever the fake is set to at release time.
func (f *flaky) holdCalls() (entered <-chan struct{}, release func()) {
	hold, in := make(chan struct{}), make(chan struct{}, 256)
	f.mu.Lock()
	f.hold, f.entered = hold, in
	f.mu.Unlock()
	var once sync.Once
	return in, func() {
		once.Do(func() {
			f.mu.Lock()
			if f.hold == hold {
				f.hold = nil
			}
			f.mu.Unlock()
			close(hold)
		})
	}
}

func (f *flaky) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Fake", f.name)
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		writeReplicaJSON(w, 200, map[string]any{"object": "list", "data": []any{}})
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		// An OpenAI-only server: the other family's paths are not found.
		writeReplicaJSON(w, 404, map[string]any{"detail": "Not Found: " + r.URL.Path})
		return
	}
	call := flakyCall{Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw, Arrived: time.Now()}
	f.arrived.Add(1)
	var body struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	json.Unmarshal(raw, &body)
	call.Model = body.Model
	defer func() {
		f.mu.Lock()
		f.seen = append(f.seen, call)
		f.mu.Unlock()
	}()

	f.mu.Lock()
	hold, entered := f.hold, f.entered
	f.mu.Unlock()
	if hold != nil {
		entered <- struct{}{}
		select {
		case <-hold:
		case <-r.Context().Done():
			call.Status = -1
			return
		}
	}
	if d := time.Duration(f.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			call.Status = -1
			return
		}
	}
	call.Answered = time.Now()
	if st := int(f.status.Load()); st != 0 {
		call.Status = st
		writeReplicaJSON(w, st, map[string]any{"error": map[string]any{
			"message": fmt.Sprintf("fake %s answers %d", f.name, st), "type": "server_error", "code": nil}})
		return
	}
	call.Status = 200
	text := "served by " + f.name
	if !body.Stream {
		writeReplicaJSON(w, 200, map[string]any{"id": "chatcmpl-" + f.name, "object": "chat.completion",
			"created": 1700000000, "model": body.Model, "served_by": f.name,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
			"usage":   map[string]int{"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-" + f.name, "object": "chat.completion.chunk", "created": 1700000000,
			"model": body.Model, "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	sse(w, "", chunk(map[string]any{"role": "assistant", "content": text}, nil))
	if f.cutStream.Load() {
		// The connection dies with the stream half sent: no terminating chunk, no [DONE].
		panic(http.ErrAbortHandler)
	}
	sse(w, "", chunk(map[string]any{}, "stop"))
	fmt.Fprint(w, "data: [DONE]\n\n")
}
