package cache

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modelrelay/relay/bounded"
)

// The cache's cost on the request path. A hit is the lookup stage whole: the request's key
// hashed, the entry read, and the answer written to a recorder (stream events flushed one by
// one); a miss costs the hash alone (the entry is recorded as it passes).

// prompt is a chat request body of about n bytes.
func prompt(n int) []byte {
	head := `{"model":"m","messages":[{"role":"user","content":"`
	return []byte(head + strings.Repeat("a", max(n-len(head)-4, 0)) + `"}]}`)
}

// answer4K is a 4 KiB answer: one JSON body, or a stream of about 40 events.
func answer4K(stream bool) *Entry {
	if !stream {
		return &Entry{Header: http.Header{"Content-Type": {"application/json"}, "X-Modelrelay-Model": {"m"}},
			Body: []byte(`{"content":"` + strings.Repeat("x", 4096-14) + `"}`), Stored: time.Now()}
	}
	var b strings.Builder
	for b.Len() < 4096-14 {
		b.WriteString(`data: {"choices":[{"delta":{"content":"` + strings.Repeat("x", 60) + `"}}]}` + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return &Entry{Header: http.Header{"Content-Type": {"text/event-stream"}, "X-Modelrelay-Model": {"m"}},
		Body: []byte(b.String()), Stream: true, Stored: time.Now()}
}

// serve writes e as a hit is written: its headers, then the body whole or event by event.
func serve(w http.ResponseWriter, e *Entry) {
	h := w.Header()
	for name, values := range e.Header {
		h[name] = values
	}
	h.Set("X-Modelrelay-Cache", "hit")
	h.Set("Age", strconv.FormatInt(int64(time.Since(e.Stored)/time.Second), 10))
	if !e.Stream {
		h.Set("Content-Length", strconv.Itoa(len(e.Body)))
		w.WriteHeader(http.StatusOK)
		w.Write(e.Body)
		return
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for ev := range Events(e.Body) {
		w.Write(ev)
		rc.Flush()
	}
}

func BenchmarkHit(b *testing.B) {
	ctx := context.Background()
	for _, stream := range []bool{false, true} {
		b.Run(fmt.Sprintf("4KiB-answer/stream=%v", stream), func(b *testing.B) {
			m := NewMemory(64 << 20)
			r := Request{Tenant: "key:1", Route: "/v1/chat/completions", Model: "m", Stream: stream, Body: prompt(1024)}
			m.Put(ctx, r.Key(), answer4K(stream), time.Hour)
			b.ReportAllocs()
			for b.Loop() {
				e, ok := m.Get(ctx, r.Key())
				if !ok {
					b.Fatal("miss")
				}
				serve(httptest.NewRecorder(), e)
			}
		})
	}
}

// BenchmarkMissHash is what a miss costs: hashing the request, reported per KiB of body.
func BenchmarkMissHash(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("body=%dKiB", size>>10), func(b *testing.B) {
			r := Request{Tenant: "key:1", Route: "/v1/chat/completions", Model: "m", Body: prompt(size)}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				r.Key()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(size>>10), "ns/KiB")
		})
	}
}

// BenchmarkMemoryGetParallel compares a Memory store's sixteen shards with one lock over
// every entry (one shard of the whole size).
func BenchmarkMemoryGetParallel(b *testing.B) {
	ctx := context.Background()
	keys := make([]Key, 1024)
	sharded := NewMemory(1 << 30)
	one := bounded.New[Key, *Entry](1 << 30)
	expires := time.Now().Add(time.Hour)
	for i := range keys {
		keys[i] = keyOf("key:1", strconv.Itoa(i))
		sharded.Put(ctx, keys[i], entryOf(100), time.Hour)
		one.Put(keys[i], entryOf(100), 200, expires)
	}
	for _, s := range []struct {
		name string
		get  func(Key) (*Entry, bool)
	}{
		{"one-lock", func(k Key) (*Entry, bool) { return one.Get(k, time.Now()) }},
		{"16-shards", func(k Key) (*Entry, bool) { return sharded.Get(ctx, k) }},
	} {
		b.Run(s.name, func(b *testing.B) {
			var next atomic.Uint32
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1)) * 97
				for pb.Next() {
					if _, ok := s.get(keys[i%len(keys)]); !ok {
						b.Error("miss")
						return
					}
					i++
				}
			})
		})
	}
}
