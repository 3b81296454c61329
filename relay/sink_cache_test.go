package relay

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"modelrelay/relay/cache"
)

func TestCacheSink(t *testing.T) {
	stream := []string{"data: {\"a\":1}\n\n", "data: [DONE]\n\n"}
	for _, tc := range []struct {
		name       string
		answer     answerOf
		fail       error // what the next sink answers
		maxBytes   int64 // the cache's size (0: 1 MiB)
		stored     string
		wantStream bool
	}{
		{name: "a whole 200 is stored",
			answer: answerOf{status: 200, header: jsonHead, length: 9, chunks: []string{`{"a":`, `1}  `}}, stored: `{"a":1}  `},
		{name: "a 200 of unknown length is stored",
			answer: answerOf{status: 200, header: jsonHead, length: -1, chunks: []string{`{}`}}, stored: `{}`},
		{name: "a body shorter than announced is not",
			answer: answerOf{status: 200, header: jsonHead, length: 10, chunks: []string{`{}`}}},
		{name: "a stream that reached its terminal event is stored",
			answer: answerOf{status: 200, header: sseHead, length: -1, chunks: stream, stream: true},
			stored: strings.Join(stream, ""), wantStream: true},
		{name: "a stream cut before it is not",
			answer: answerOf{status: 200, header: sseHead, length: -1, chunks: stream[:1], stream: true}},
		{name: "a 503 is not",
			answer: answerOf{status: 503, header: jsonHead, length: 2, chunks: []string{"{}"}}},
		{name: "a 429 is not",
			answer: answerOf{status: 429, header: jsonHead, length: 2, chunks: []string{"{}"}}},
		{name: "a 201 is not",
			answer: answerOf{status: 201, header: jsonHead, length: 2, chunks: []string{"{}"}}},
		{name: "an encoded answer is not",
			answer: answerOf{status: 200, header: http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}},
				length: 3, chunks: []string{"abc"}}},
		{name: "an answer the client did not get whole is not",
			answer: answerOf{status: 200, header: jsonHead, length: 2, chunks: []string{"{}"}}, fail: errClientGone},
		{name: "an answer over one entry's bound is not",
			answer:   answerOf{status: 200, header: jsonHead, length: 2000, chunks: []string{strings.Repeat("x", 1000), strings.Repeat("x", 1000)}},
			maxBytes: 16 << 10}, // one entry: 1 KiB
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := cache.NewMemory(1 << 20)
			c := newResponseCache(CacheOptions{Store: store, MaxBytes: cmp.Or(tc.maxBytes, 1<<20)})
			sent := http.Header{"Content-Type": {"application/json"}, "X-Modelrelay-Model": {"m"},
				"X-Modelrelay-Target": {"gpu-1"}, "X-Modelrelay-Queue-Ms": {"3"}, "X-Backend": {"vllm"}}
			var a answer
			a.client.w = headerOnly(sent)
			k := cache.Key{Tenant: "key:1"}
			a.record(context.Background(), c, k)
			r := recorder{fail: tc.fail}
			err := tc.answer.into(a.extra.cache.wrap(&r))
			if !errors.Is(err, tc.fail) {
				t.Fatalf("err %v, want %v", err, tc.fail)
			}
			if tc.fail == nil && (string(r.body) != strings.Join(tc.answer.chunks, "") || r.got[len(r.got)-1] != "end") {
				t.Fatalf("passed %q %q, want the answer whole", r.got, r.body)
			}
			e, ok := store.Get(context.Background(), k)
			if tc.stored == "" {
				if ok {
					t.Fatalf("stored %q", e.Body)
				}
			} else if !ok || string(e.Body) != tc.stored || e.Stream != tc.wantStream {
				t.Fatalf("stored %+v, %v; want %q", e, ok, tc.stored)
			} else if names := slices.Sorted(maps.Keys(e.Header)); !slices.Equal(names, []string{"Content-Type", "X-Modelrelay-Model"}) {
				t.Fatalf("stored headers %v, want the type and the model only", e.Header)
			}
			if n := c.recording.Load(); n != 0 {
				t.Fatalf("%d bytes still counted as recording", n)
			}
		})
	}
}

// TestCacheSinkRecordingBudget: the answers being recorded hold at most the cache's size
// together; one past it goes on unrecorded.
func TestCacheSinkRecordingBudget(t *testing.T) {
	store := cache.NewMemory(1 << 20)
	c := newResponseCache(CacheOptions{Store: store, MaxBytes: 16 << 10})
	c.reserve(16<<10 - 100) // others' recordings in flight
	var a answer
	a.client.w = headerOnly(http.Header{})
	a.record(context.Background(), c, cache.Key{Tenant: "t"})
	var r recorder
	if err := (answerOf{status: 200, header: jsonHead, length: 200, chunks: []string{strings.Repeat("x", 200)}}).into(a.extra.cache.wrap(&r)); err != nil {
		t.Fatal(err)
	}
	if _, ok := store.Get(context.Background(), cache.Key{Tenant: "t"}); ok || len(r.body) != 200 {
		t.Fatalf("stored: %v, passed %d bytes", ok, len(r.body))
	}
	if n := c.recording.Load(); n != 16<<10-100 {
		t.Fatalf("recording %d, want what the others hold", n)
	}
}

// headerOnly is a ResponseWriter whose Header is h.
type headerOnly http.Header

func (h headerOnly) Header() http.Header         { return http.Header(h) }
func (h headerOnly) Write(b []byte) (int, error) { return len(b), nil }
func (h headerOnly) WriteHeader(int)             {}
