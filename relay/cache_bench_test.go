package relay_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"modelrelay/relay"
	"modelrelay/relay/api"
	"modelrelay/relay/cache"
)

// BenchmarkCacheHit serves a 4 KiB answer from the cache through the relay's handler, the
// request path whole (routing, body read and parse, the lookup stage, the answer written to a
// recorder; a stream's events flushed one by one), for a 1 KiB prompt.
func BenchmarkCacheHit(b *testing.B) {
	chunk := `data: {"choices":[{"delta":{"content":"` + strings.Repeat("x", 60) + `"}}]}` + "\n\n"
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, strings.Repeat(chunk, 4096/len(chunk))+"data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"content":"`+strings.Repeat("x", 4096-14)+`"}`)
	}))
	defer backend.Close()
	srv, err := relay.New(relay.Options{Cache: relay.CacheOptions{Store: cache.NewMemory(64 << 20)},
		Backends: []relay.Backend{{Name: "b", URL: backend.URL, Models: []string{"m"}}}})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	h := api.Handler(srv)
	for _, stream := range []bool{false, true} {
		b.Run(fmt.Sprintf("4KiB-answer/stream=%v", stream), func(b *testing.B) {
			body := fmt.Sprintf(`{"model":"m","stream":%v,"messages":[{"role":"user","content":"%s"}]}`, stream, strings.Repeat("a", 1024))
			serve := func() *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Modelrelay-Cache", "use")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			if rec := serve(); rec.Code != 200 { // a miss, or a hit of an earlier run
				b.Fatalf("first: %d %v", rec.Code, rec.Header())
			}
			b.ReportAllocs()
			for b.Loop() {
				if rec := serve(); rec.Header().Get("X-Modelrelay-Cache") != "hit" || rec.Body.Len() < 4000 {
					b.Fatalf("not a hit: %d %v", rec.Code, rec.Header())
				}
			}
		})
	}
}
