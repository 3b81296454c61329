package api

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"modelrelay/relay"
	"modelrelay/relay/h1/h1test"
)

// staticAnswer is what the bench's fake model server answers a completion: about 1 KB of JSON
// behind net/http's own response head.
var staticAnswer = func() string {
	body := `{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("lorem ipsum ", 70) + `"},` +
		`"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":140,"total_tokens":148}}`
	return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}()

// staticUpstream answers every request with staticAnswer and allocates nothing per request, so
// a benchmark's allocs/op are the relay's own.
func staticUpstream(b *testing.B) string {
	return "http://" + h1test.Serve(b, answerStatic)
}

func answerStatic(c net.Conn) {
	defer c.Close()
	answer := []byte(staticAnswer)
	br := bufio.NewReaderSize(c, 16<<10)
	for {
		if _, ok := h1test.ReadRequest(br, nil); !ok {
			return
		}
		if _, err := c.Write(answer); err != nil {
			return
		}
	}
}

// deadlineWriter is a ResponseWriter that keeps nothing, so that the benchmark measures the
// relay's own work, and takes read deadlines as net/http's writer does, so that the body is
// read as on a real connection.
type deadlineWriter struct{ h http.Header }

func (w *deadlineWriter) Header() http.Header             { return w.h }
func (w *deadlineWriter) Write(b []byte) (int, error)     { return len(b), nil }
func (w *deadlineWriter) WriteHeader(int)                 {}
func (w *deadlineWriter) Flush()                          {}
func (w *deadlineWriter) SetReadDeadline(time.Time) error { return nil }

// BenchmarkStaticRequest is one request of bench-compare's static row (a completion to one
// static backend, no keys, no options) through the relay's handler, in process: the client
// side is an in-memory request and a writer that keeps nothing, the upstream a loopback
// server that allocates nothing. allocs/op is what the relay's own stages cost a request,
// beside the request the benchmark makes (an http.Request and its body reader).
func BenchmarkStaticRequest(b *testing.B) {
	// The server's default request timeout: a timer per request, as modelrelay-server runs.
	srv, err := relay.New(relay.Options{RequestTimeout: 300 * time.Second,
		Backends: []relay.Backend{{Name: "fake", URL: staticUpstream(b), Models: []string{"bench"}}}})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	h := Handler(srv)
	body := []byte(`{"model":"bench","messages":[{"role":"user","content":"hello"}],"stream":false}`)
	header := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"wrk"}}
	w := &deadlineWriter{h: make(http.Header)}
	ctx := context.Background()
	var rd bytes.Reader
	newRequest := func() *http.Request {
		rd.Reset(body)
		r, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", &rd)
		r.Header, r.RemoteAddr, r.Host = header, "127.0.0.1:40000", "127.0.0.1:8080"
		return r
	}
	check := httptest.NewRecorder()
	h.ServeHTTP(check, newRequest())
	if check.Code != http.StatusOK || check.Body.Len() != len(staticAnswer)-strings.Index(staticAnswer, "\r\n\r\n")-4 {
		b.Fatalf("status %d, %d bytes: %s", check.Code, check.Body.Len(), check.Body)
	}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, newRequest())
	}
}
