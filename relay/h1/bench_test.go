package h1

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"modelrelay/relay/h1/h1test"
)

// The benchmarks put h1.Client beside an http.Transport configured as relay/upstream.go
// configures its own, against one loopback upstream that allocates nothing per request, so
// allocs/op is the client's alone. "interleaved" runs both in alternating rounds, so that
// load from elsewhere on the machine hits both alike, and reports h1's time as a fraction of
// net/http's.

const benchChunks = 50

var (
	benchBody   = bytes.Repeat([]byte("x"), 1024)
	benchAnswer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n" +
		"Server: uvicorn\r\nContent-Length: 1024\r\n\r\n" + strings.Repeat("y", 1024)
	benchEvent = "data: " + `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m",` +
		`"choices":[{"index":0,"delta":{"content":"token"},"finish_reason":null}]}` + "\n\n"
)

// benchServer answers each request with the 1 KB answer, or, for /sse, with an event stream
// of benchChunks chunks written one by one as a model server writes tokens.
func benchServer(b *testing.B) *url.URL {
	return &url.URL{Scheme: "http", Host: h1test.Serve(b, serveBench), Path: "/v1/chat/completions"}
}

func serveBench(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 16<<10)
	bw := bufio.NewWriterSize(c, 16<<10)
	sseHead := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	chunk := strconv.FormatInt(int64(len(benchEvent)), 16) + "\r\n" + benchEvent + "\r\n"
	for {
		sse, ok := h1test.ReadRequest(br, []byte("/sse"))
		if !ok {
			return
		}
		if !sse {
			bw.WriteString(benchAnswer)
			if bw.Flush() != nil {
				return
			}
			continue
		}
		bw.WriteString(sseHead)
		for range benchChunks {
			bw.WriteString(chunk)
			if bw.Flush() != nil {
				return
			}
		}
		bw.WriteString("0\r\n\r\n")
		if bw.Flush() != nil {
			return
		}
	}
}

// caller makes one call the way relay/upstream.go does and copies the body out.
type caller interface {
	call(ctx context.Context, u *url.URL, body []byte) (int64, error)
	close()
}

type h1Caller struct{ c Client }

func (h *h1Caller) call(ctx context.Context, u *url.URL, body []byte) (int64, error) {
	var r *Request
	if body == nil {
		r = &Request{Method: http.MethodGet, URL: u}
	} else {
		r = &Request{URL: u, Body: bytes.NewReader(body), Replayable: true,
			Header: http.Header{"Content-Type": {"application/json"}}}
	}
	resp, err := h.c.Do(ctx, r)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return drain(resp.Body)
}

func (h *h1Caller) close() { h.c.CloseIdle() }

// netHTTPCaller is relay/upstream.go's client: the same Transport settings, the same request.
type netHTTPCaller struct {
	t *http.Transport
	c *http.Client
}

func newNetHTTPCaller() *netHTTPCaller {
	t := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &netHTTPCaller{t: t, c: &http.Client{Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (n *netHTTPCaller) call(ctx context.Context, u *url.URL, body []byte) (int64, error) {
	method, r := http.MethodGet, io.Reader(nil)
	if body != nil {
		method, r = http.MethodPost, bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "", r)
	if err != nil {
		return 0, err
	}
	target := *u
	req.URL = &target
	if body != nil {
		req.Header = http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": nil}
	}
	resp, err := n.c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return drain(resp.Body)
}

func (n *netHTTPCaller) close() { n.t.CloseIdleConnections() }

var drainBuffers = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// drain reads a body read by read, as relay/upstream.go's copyBody does.
func drain(r io.Reader) (int64, error) {
	bp := drainBuffers.Get().(*[]byte)
	defer drainBuffers.Put(bp)
	var total int64
	for {
		n, err := r.Read(*bp)
		total += int64(n)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// runCalls makes n calls and returns how long they took.
func runCalls(b *testing.B, ctx context.Context, c caller, u *url.URL, body []byte, want int64, n int) time.Duration {
	start := time.Now()
	for range n {
		got, err := c.call(ctx, u, body)
		if err != nil || got != want {
			b.Fatalf("%d bytes, %v; want %d", got, err, want)
		}
	}
	return time.Since(start)
}

func benchBoth(b *testing.B, u *url.URL, body []byte, want int64) {
	// One context for the run, cancellable like a relay request's: what each call costs to
	// watch it is counted, not what it costs to make it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := []struct {
		name string
		new  func() caller
	}{
		{"h1", func() caller { return &h1Caller{} }},
		{"net-http", func() caller { return newNetHTTPCaller() }},
	}
	for _, cl := range clients {
		b.Run(cl.name, func(b *testing.B) {
			c := cl.new()
			defer c.close()
			runCalls(b, ctx, c, u, body, want, 10) // dialled and warm
			b.ReportAllocs()
			b.ResetTimer()
			runCalls(b, ctx, c, u, body, want, b.N)
		})
	}
	b.Run("interleaved", func(b *testing.B) {
		h, n := clients[0].new(), clients[1].new()
		defer h.close()
		defer n.close()
		runCalls(b, ctx, h, u, body, want, 10)
		runCalls(b, ctx, n, u, body, want, 10)
		const round = 200
		var inH1, inNetHTTP time.Duration
		b.ResetTimer()
		for done := 0; done < b.N; done += round {
			k := min(round, b.N-done)
			inH1 += runCalls(b, ctx, h, u, body, want, k)
			inNetHTTP += runCalls(b, ctx, n, u, body, want, k)
		}
		b.ReportMetric(float64(inH1.Nanoseconds())/float64(b.N), "h1-ns/op")
		b.ReportMetric(float64(inNetHTTP.Nanoseconds())/float64(b.N), "net-http-ns/op")
		b.ReportMetric(inH1.Seconds()/inNetHTTP.Seconds(), "h1/net-http")
	})
}

// BenchmarkRoundTrip: a POST of 1 KB answered with 1 KB (Content-Length), over one loopback
// keep-alive connection.
func BenchmarkRoundTrip(b *testing.B) {
	benchBoth(b, benchServer(b), benchBody, 1024)
}

// BenchmarkStream: a GET answered with a stream of 50 server-sent events, each its own chunk
// and its own write.
func BenchmarkStream(b *testing.B) {
	u := *benchServer(b)
	u.Path = "/sse"
	benchBoth(b, &u, nil, int64(benchChunks*len(benchEvent)))
}

// BenchmarkParallel: the round trip from 16 goroutines at once, each request on a pooled
// connection of its own.
func BenchmarkParallel(b *testing.B) {
	u := benchServer(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, cl := range []struct {
		name string
		c    caller
	}{{"h1", &h1Caller{}}, {"net-http", newNetHTTPCaller()}} {
		b.Run(cl.name, func(b *testing.B) {
			defer cl.c.close()
			b.ReportAllocs()
			b.SetParallelism(8) // 16 goroutines on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if got, err := cl.c.call(ctx, u, benchBody); err != nil || got != 1024 {
						panic(fmt.Sprint(got, err))
					}
				}
			})
		})
	}
}
