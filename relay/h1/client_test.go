package h1

import (
	"bytes"
	"context"
	"errors"
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
)

// echo answers every request with its own body and what the server saw of it.
var echo = answerEach(func(req *http.Request, body []byte) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Method: %s\r\nX-Target: %s\r\n"+
		"X-Host: %s\r\nX-Length: %d\r\nX-Chunked: %v\r\nContent-Length: %d\r\n\r\n%s",
		req.Method, req.RequestURI, req.Host, req.ContentLength, len(req.TransferEncoding) > 0, len(body), body)
})

func TestKeepAliveReuse(t *testing.T) {
	s := startServer(t, echo)
	var c Client
	defer c.CloseIdle()
	for i := range 10 {
		want := fmt.Sprintf(`{"n":%d}`, i)
		resp, body := call(t, &c, post(s, want))
		if resp.StatusCode != 200 || body != want || resp.ContentLength != int64(len(want)) {
			t.Fatalf("request %d: %d %q (length %d)", i, resp.StatusCode, body, resp.ContentLength)
		}
		if got := resp.Header.Get("X-Method") + " " + resp.Header.Get("X-Length"); got != "POST "+strconv.Itoa(len(want)) {
			t.Fatalf("server saw %q", got)
		}
	}
	if n := s.accepted.Load(); n != 1 {
		t.Fatalf("10 requests took %d connections, want 1", n)
	}
	if n := idleConns(&c); n != 1 {
		t.Fatalf("%d idle connections, want 1", n)
	}
}

// TestFraming: each answer's body as the caller reads it, its length, and whether the
// connection carried the next request.
func TestFraming(t *testing.T) {
	cases := []struct {
		name, answer string
		closes       bool // the server closes after the answer
		body         string
		length       int64
		reused       bool
	}{
		{name: "content-length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
			body: "hello", length: 5, reused: true},
		{name: "empty content-length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
			length: 0, reused: true},
		{name: "chunked", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked("hel", "lo", " world"),
			body: "hello world", length: -1, reused: true},
		{name: "chunked, extensions and upper-case hex", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n" +
			"A;name=value\r\n0123456789\r\n1 \r\n!\r\n0;last\r\n\r\n", body: "0123456789!", length: -1, reused: true},
		{name: "HTTP/1.1 until close", answer: "HTTP/1.1 200 OK\r\n\r\nthe rest", closes: true,
			body: "the rest", length: -1},
		{name: "HTTP/1.0 until close", answer: "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nold server", closes: true,
			body: "old server", length: -1},
		{name: "HTTP/1.0 with length closes", answer: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
			body: "ok", length: 2},
		{name: "HTTP/1.0 keep-alive", answer: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
			body: "ok", length: 2, reused: true},
		{name: "Connection: close", answer: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
			body: "ok", length: 2},
		{name: "Connection: close among others", answer: "HTTP/1.1 200 OK\r\nConnection: x-foo, Close\r\nContent-Length: 2\r\n\r\nok",
			body: "ok", length: 2},
		{name: "repeated identical Content-Length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
			body: "ok", length: 2, reused: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, func(sc *serverConn) {
				for {
					if req, _ := sc.next(); req == nil {
						return
					}
					io.WriteString(sc, tc.answer)
					if tc.closes {
						return
					}
				}
			})
			var c Client
			defer c.CloseIdle()
			for range 2 {
				resp, body := call(t, &c, get(s))
				if body != tc.body || resp.ContentLength != tc.length {
					t.Fatalf("body %q (length %d), want %q (%d)", body, resp.ContentLength, tc.body, tc.length)
				}
			}
			if want := map[bool]int32{true: 1, false: 2}[tc.reused]; s.accepted.Load() != want {
				t.Fatalf("2 requests took %d connections, want %d", s.accepted.Load(), want)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	s := startServer(t, fixed("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-REQUEST-id: abc\r\n"+
		"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nX-Empty:\r\nX-Spaced: \t padded \t\r\nContent-Length: 0\r\n\r\n"))
	var c Client
	defer c.CloseIdle()
	resp, _ := call(t, &c, get(s))
	want := http.Header{"Content-Type": {"text/event-stream"}, "X-Request-Id": {"abc"}, "Set-Cookie": {"a=1", "b=2"},
		"X-Empty": {""}, "X-Spaced": {"padded"}, "Content-Length": {"0"}}
	if fmt.Sprint(resp.Header) != fmt.Sprint(want) {
		t.Fatalf("header %v, want %v", resp.Header, want)
	}
	// Appending to one value must not write over its neighbour in the shared backing array.
	resp.Header["X-Request-Id"] = append(resp.Header["X-Request-Id"], "more")
	if resp.Header.Get("Set-Cookie") != "a=1" || resp.Header.Get("X-Empty") != "" {
		t.Fatalf("values share memory: %v", resp.Header)
	}
}

func TestInterimResponsesSkipped(t *testing.T) {
	s := startServer(t, fixed("HTTP/1.1 100 Continue\r\n\r\n"+
		"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"+
		"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone"))
	var c Client
	defer c.CloseIdle()
	for range 2 {
		resp, body := call(t, &c, post(s, "{}"))
		if resp.StatusCode != 200 || body != "done" || resp.Header.Get("Link") != "" {
			t.Fatalf("%d %q %v", resp.StatusCode, body, resp.Header)
		}
	}
	if s.accepted.Load() != 1 {
		t.Fatalf("%d connections, want 1", s.accepted.Load())
	}
}

func TestTrailersDropped(t *testing.T) {
	s := startServer(t, fixed("HTTP/1.1 200 OK\r\nTrailer: X-Checksum\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"4\r\ndata\r\n0\r\nX-Checksum: 1234\r\nX-Other: y\r\n\r\n"))
	var c Client
	defer c.CloseIdle()
	for range 2 {
		resp, body := call(t, &c, get(s))
		if body != "data" {
			t.Fatalf("body %q", body)
		}
		if len(resp.Header) != 0 {
			t.Fatalf("header %v: Trailer, Transfer-Encoding and the trailers themselves must be gone", resp.Header)
		}
	}
	if s.accepted.Load() != 1 {
		t.Fatalf("%d connections, want 1", s.accepted.Load())
	}
}

// TestNoBodyStatuses: an answer to HEAD, a 204 and a 304 have no body whatever their fields
// say, and the connection carries the next request.
func TestNoBodyStatuses(t *testing.T) {
	cases := []struct {
		name, method, answer string
		length               int64
	}{
		{"HEAD", http.MethodHead, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", 100},
		{"HEAD chunked", http.MethodHead, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", -1},
		{"HEAD without length", http.MethodHead, "HTTP/1.1 200 OK\r\n\r\n", -1},
		{"204", http.MethodGet, "HTTP/1.1 204 No Content\r\n\r\n", 0},
		{"304", http.MethodGet, "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nETag: \"x\"\r\n\r\n", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, fixed(tc.answer))
			var c Client
			defer c.CloseIdle()
			for range 3 {
				resp, body := call(t, &c, &Request{Method: tc.method, URL: s.url})
				if body != "" || resp.ContentLength != tc.length {
					t.Fatalf("body %q length %d, want none and %d", body, resp.ContentLength, tc.length)
				}
			}
			if s.accepted.Load() != 1 {
				t.Fatalf("%d connections, want 1", s.accepted.Load())
			}
		})
	}
}

// TestBodylessStatusWithFraming: a 204 that announces a body is answered, but its connection
// is not trusted with another request.
func TestBodylessStatusWithFraming(t *testing.T) {
	s := startServer(t, fixed("HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\nabc"))
	var c Client
	defer c.CloseIdle()
	for range 2 {
		if resp, body := call(t, &c, get(s)); resp.StatusCode != 204 || body != "" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	}
	if s.accepted.Load() != 2 {
		t.Fatalf("%d connections, want 2", s.accepted.Load())
	}
}

// TestExtraBytesNotPooled: bytes after the end of an answer are an answer to no request; the
// connection is not reused.
func TestExtraBytesNotPooled(t *testing.T) {
	s := startServer(t, fixed("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nforged"))
	var c Client
	defer c.CloseIdle()
	for range 2 {
		if _, body := call(t, &c, get(s)); body != "ok" {
			t.Fatalf("body %q", body)
		}
	}
	if s.accepted.Load() != 2 {
		t.Fatalf("%d connections, want 2", s.accepted.Load())
	}
}

// staleAfterFirst answers the first request of the first connection, then reads the second and
// closes without a word: the pooled connection proves dead only once the request is on it.
func staleAfterFirst(sc *serverConn) {
	for i := 0; ; i++ {
		if req, _ := sc.next(); req == nil || sc.id == 1 && i == 1 {
			return
		}
		io.WriteString(sc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}
}

func TestStaleConnectionRetried(t *testing.T) {
	s := startServer(t, staleAfterFirst)
	var c Client
	defer c.CloseIdle()
	call(t, &c, post(s, "first"))
	if _, body := call(t, &c, post(s, "second")); body != "ok" {
		t.Fatalf("body %q", body)
	}
	if a, r := s.accepted.Load(), s.requests.Load(); a != 2 || r != 3 {
		t.Fatalf("%d connections and %d requests seen, want 2 and 3 (the second sent twice)", a, r)
	}
}

func TestStaleConnectionNotRetriedUnlessReplayable(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  func(s *rawServer) *Request
	}{
		{"in memory", func(s *rawServer) *Request { return &Request{URL: s.url, Body: strings.NewReader("second")} }},
		{"streamed", func(s *rawServer) *Request {
			return &Request{URL: s.url, Body: io.MultiReader(strings.NewReader("second")), ContentLength: -1}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, staleAfterFirst)
			var c Client
			defer c.CloseIdle()
			call(t, &c, post(s, "first"))
			_, err := c.Do(context.Background(), tc.req(s))
			if err == nil {
				t.Fatal("a request on a dead connection succeeded without a retry")
			}
			var oe *net.OpError
			if errors.As(err, &oe) && oe.Op == "dial" {
				t.Fatalf("%v: reported as a dial failure", err)
			}
			if !errors.Is(err, io.EOF) {
				t.Fatalf("%v: want io.EOF inside", err)
			}
			if a := s.accepted.Load(); a != 1 {
				t.Fatalf("%d connections, want 1 (no retry)", a)
			}
			noSenders(t)
		})
	}
}

// TestClosedIdleConnectionSkipped: a pooled connection the upstream closed while idle is
// noticed when it leaves the pool, so even a request that may not be retried goes out on a
// fresh one.
func TestClosedIdleConnectionSkipped(t *testing.T) {
	closed := make(chan struct{})
	s := startServer(t, func(sc *serverConn) {
		if sc.id > 1 {
			fixed("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")(sc)
			return
		}
		if req, _ := sc.next(); req != nil {
			io.WriteString(sc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
		sc.Close()
		close(closed)
	})
	var c Client
	defer c.CloseIdle()
	call(t, &c, get(s))
	<-closed
	// Wait for the FIN to reach the client's socket: until then the connection is alive as far
	// as anyone can tell.
	waitDead(t, &c)
	r := &Request{URL: s.url, Body: io.MultiReader(strings.NewReader("x")), ContentLength: -1}
	if _, body := call(t, &c, r); body != "ok" {
		t.Fatalf("body %q", body)
	}
	if a := s.accepted.Load(); a != 2 {
		t.Fatalf("%d connections, want 2", a)
	}
}

// TestUnaskedBytesAfterLongIdle: a connection idle longer than recentIdle is peeked at even
// for a request that could be sent again, so an upstream's unasked answer (a timeout notice
// written while the connection sat idle) is never taken for the answer to the next request.
// Within recentIdle only a request that cannot be sent again pays for the peek.
func TestUnaskedBytesAfterLongIdle(t *testing.T) {
	pooled, wrote := make(chan struct{}), make(chan struct{})
	s := startServer(t, func(sc *serverConn) {
		if sc.id > 1 {
			fixed("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")(sc)
			return
		}
		if req, _ := sc.next(); req != nil {
			io.WriteString(sc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			<-pooled
			io.WriteString(sc, "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
		}
		close(wrote)
		sc.next()
	})
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	c := Client{now: clock.get}
	defer c.CloseIdle()
	call(t, &c, get(s))
	close(pooled)
	<-wrote
	waitDead(t, &c)
	clock.advance(recentIdle)
	if resp, body := call(t, &c, post(s, "x")); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("%d %q: the unasked answer was taken for this one's", resp.StatusCode, body)
	}
	if a := s.accepted.Load(); a != 2 {
		t.Fatalf("%d connections, want 2", a)
	}
}

// waitDead waits until the client's one idle connection looks closed to the probe.
func waitDead(t *testing.T, c *Client) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c.mu.Lock()
			var cn *conn
			for _, hp := range c.pools {
				if len(hp.idle) > 0 {
					cn = hp.idle[0]
				}
			}
			c.mu.Unlock()
			if cn == nil || !cn.alive() {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	within(t, done, "waiting for the closed connection to show")
}

// TestFreshConnectionNotRetried: an upstream that takes the request on a new connection and
// hangs up without answering is not sent it again, even when the request could be.
func TestFreshConnectionNotRetried(t *testing.T) {
	s := startServer(t, func(sc *serverConn) { sc.next() })
	var c Client
	if _, err := c.Do(context.Background(), post(s, "once")); err == nil || !errors.Is(err, io.EOF) {
		t.Fatalf("%v: want io.EOF inside", err)
	}
	if a, r := s.accepted.Load(), s.requests.Load(); a != 1 || r != 1 {
		t.Fatalf("%d connections, %d requests: want 1 and 1", a, r)
	}
}

func TestTornBody(t *testing.T) {
	for name, answer := range map[string]string{
		"content-length": "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this",
		"chunked":        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nonly this\r\n",
		"chunk data":     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n20\r\nonly this",
	} {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, func(sc *serverConn) {
				if req, _ := sc.next(); req != nil {
					io.WriteString(sc, answer)
				}
			})
			var c Client
			defer c.CloseIdle()
			resp, err := c.Do(context.Background(), get(s))
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			if !errors.Is(err, io.ErrUnexpectedEOF) || string(body) != "only this" {
				t.Fatalf("%q, %v: want the bytes sent, then io.ErrUnexpectedEOF", body, err)
			}
			if _, err2 := resp.Body.Read(make([]byte, 1)); err2 != err {
				t.Fatalf("a second read says %v, want the same error", err2)
			}
		})
	}
}

func TestCloseBeforeEOF(t *testing.T) {
	release := make(chan struct{})
	s := startServer(t, func(sc *serverConn) {
		for {
			if req, _ := sc.next(); req == nil {
				return
			}
			// Five bytes, then a pause: when the client has read them its buffer is empty,
			// and only Close can tell the connection is in the middle of a body.
			io.WriteString(sc, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n01234")
			if sc.id == 1 {
				<-release
				io.WriteString(sc, strings.Repeat("x", 995))
			}
		}
	})
	defer close(release)
	var c Client
	defer c.CloseIdle()
	resp, err := c.Do(context.Background(), get(s))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
		t.Fatal("read after Close succeeded")
	}
	if n := idleConns(&c); n != 0 {
		t.Fatalf("%d idle connections after Close before EOF, want 0", n)
	}
	resp, err = c.Do(context.Background(), get(s))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s.accepted.Load() != 2 {
		t.Fatalf("%d connections, want 2", s.accepted.Load())
	}
}

func TestLargeBodies(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
	s := startServer(t, answerEach(func(req *http.Request, body []byte) string {
		if req.URL.Query().Get("chunked") != "" {
			return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(string(body[:1<<20]), string(body[1<<20:]))
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)
	}))
	var c Client
	defer c.CloseIdle()
	chunkedAnswer := *s.url
	chunkedAnswer.RawQuery = "chunked=1"
	for _, tc := range []struct {
		name string
		req  *Request
	}{
		{"in memory, content-length answer", &Request{URL: s.url, Body: bytes.NewReader(big), Replayable: true}},
		{"streamed chunked, chunked answer", &Request{URL: &chunkedAnswer, Body: io.MultiReader(bytes.NewReader(big)), ContentLength: -1}},
		{"streamed with length", &Request{URL: s.url, Body: io.MultiReader(bytes.NewReader(big)), ContentLength: int64(len(big))}},
	} {
		if _, body := call(t, &c, tc.req); body != string(big) {
			t.Fatalf("%s: %d bytes back, want the %d sent", tc.name, len(body), len(big))
		}
	}
	if s.accepted.Load() != 1 {
		t.Fatalf("%d connections, want 1", s.accepted.Load())
	}
	noSenders(t)
}

func TestConcurrent(t *testing.T) {
	s := startServer(t, echo)
	c := Client{MaxIdlePerHost: 8}
	defer c.CloseIdle()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Go(func() {
			for i := range 40 {
				want := fmt.Sprintf("%d-%d-%s", g, i, strings.Repeat("y", i*97))
				var r *Request
				if i%3 == 0 { // some streamed on a goroutine, most written inline
					r = &Request{URL: s.url, Body: io.MultiReader(strings.NewReader(want)), ContentLength: -1}
				} else {
					r = post(s, want)
				}
				resp, err := c.Do(context.Background(), r)
				if err != nil {
					errs <- err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(body) != want {
					errs <- fmt.Errorf("got %q, %v; want %q", body, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := idleConns(&c); n > 8 {
		t.Fatalf("%d idle connections, bound is 8", n)
	}
	noSenders(t)
}

func TestRequestWriting(t *testing.T) {
	s := startServer(t, echo)
	var c Client
	defer c.CloseIdle()
	u := *s.url
	u.Path, u.RawQuery = "/v1/a b", "x=1&y=%20"
	r := &Request{Method: http.MethodPut, URL: &u, Host: "tenant.example", Body: bytes.NewReader([]byte("body")),
		Header: http.Header{
			"Content-Length":    {"999"}, // the client's own, never duplicated
			"Transfer-Encoding": {"chunked"},
			"Host":              {"evil"},
			"Idempotency-Key":   nil, // a marker, never sent
			"X-Multi":           {"1", "2"},
		}}
	resp, body := call(t, &c, r)
	h := resp.Header
	if body != "body" || h.Get("X-Method") != "PUT" || h.Get("X-Target") != "/v1/a%20b?x=1&y=%20" ||
		h.Get("X-Host") != "tenant.example" || h.Get("X-Length") != "4" || h.Get("X-Chunked") != "false" {
		t.Fatalf("server saw %v %q", h, body)
	}
	// A Target goes as given, escapes and all, in place of the URL's path and query.
	if resp, _ := call(t, &c, &Request{URL: s.url, Target: "/v1/a%20b%2Fc?x=1%202"}); resp.Header.Get("X-Target") != "/v1/a%20b%2Fc?x=1%202" {
		t.Fatalf("server saw target %q", resp.Header.Get("X-Target"))
	}
	// A head larger than the connection's write buffer goes out whole.
	big := &Request{URL: s.url, Header: http.Header{"X-Big": {strings.Repeat("b", 6000)}}}
	if resp, _ := call(t, &c, big); resp.StatusCode != 200 {
		t.Fatalf("a 6 KB head: status %d", resp.StatusCode)
	}
	// An empty POST says Content-Length: 0; a GET says nothing.
	_, _ = call(t, &c, &Request{URL: s.url})
	for _, bad := range []*Request{
		{URL: s.url, Target: "/x HTTP/1.1\r\nInjected: 1"},
		{URL: s.url, Target: "x"}, // neither origin-form nor "*"
		{URL: s.url, Header: http.Header{"X-Split": {"a\r\nInjected: 1"}}},
		{URL: s.url, Header: http.Header{"Bad Name": {"a"}}},
		{URL: s.url, Method: "GET /x HTTP/1.1\r\n"},
		{URL: s.url, Host: "a\r\nb"},
		{URL: s.url, Body: io.MultiReader(), Replayable: true}, // not rewindable
		{URL: nil},
	} {
		if _, err := c.Do(context.Background(), bad); err == nil {
			t.Fatalf("%+v: sent", bad)
		}
	}
	if s.requests.Load() != 4 {
		t.Fatalf("the server read %d requests, want the 4 valid ones", s.requests.Load())
	}
}

func TestDialErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var c Client
	_, err = c.Do(context.Background(), &Request{URL: mustURL("http://" + addr + "/")})
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" {
		t.Fatalf("%v: want a *net.OpError with Op dial", err)
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}
