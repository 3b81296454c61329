package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawServer is a loopback upstream whose answers the tests write byte for byte. Requests are
// parsed with net/http's server-side reader, which also checks what the client writes.
type rawServer struct {
	url      *url.URL
	ln       net.Listener
	accepted atomic.Int32 // connections accepted
	requests atomic.Int32 // requests read, over all connections
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

// serverConn is one accepted connection.
type serverConn struct {
	net.Conn
	br *bufio.Reader
	s  *rawServer
	id int32 // 1 for the first connection accepted
}

// startServer runs handle on every accepted connection until the test ends.
func startServer(t testing.TB, handle func(sc *serverConn)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, conns: map[net.Conn]struct{}{},
		url: &url.URL{Scheme: "http", Host: ln.Addr().String(), Path: "/v1/chat/completions"}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			sc := &serverConn{Conn: c, br: bufio.NewReader(c), s: s, id: s.accepted.Add(1)}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				handle(sc)
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *rawServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// next reads one request and its whole body; nil when the client is gone.
func (sc *serverConn) next() (*http.Request, []byte) {
	req, err := http.ReadRequest(sc.br)
	if err != nil {
		return nil, nil
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, nil
	}
	sc.s.requests.Add(1)
	return req, body
}

// answerEach answers every request on every connection with what reply returns.
func answerEach(reply func(req *http.Request, body []byte) string) func(*serverConn) {
	return func(sc *serverConn) {
		for {
			req, body := sc.next()
			if req == nil {
				return
			}
			if _, err := io.WriteString(sc, reply(req, body)); err != nil {
				return
			}
		}
	}
}

// fixed answers every request with the same bytes.
func fixed(answer string) func(*serverConn) {
	return answerEach(func(*http.Request, []byte) string { return answer })
}

// call sends a GET (or the given request) and reads the whole answer.
func call(t testing.TB, c *Client, r *Request) (*Response, string) {
	t.Helper()
	resp, err := c.Do(context.Background(), r)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	resp.Body.Close()
	return resp, string(body)
}

func get(s *rawServer) *Request {
	return &Request{Method: http.MethodGet, URL: s.url}
}

func post(s *rawServer, body string) *Request {
	return &Request{URL: s.url, Body: strings.NewReader(body), Replayable: true,
		Header: http.Header{"Content-Type": {"application/json"}}}
}

// within fails the test if done is not closed in a long while: a guard against a hang, so
// that a broken abort fails with a message instead of the test binary's timeout. It asserts
// nothing about how fast anything is.
func within(t testing.TB, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still blocked", what)
	}
}

// idleConns counts the client's idle connections.
func idleConns(c *Client) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, hp := range c.pools {
		n += len(hp.idle)
	}
	return n
}

func isCanceled(err error) bool { return errors.Is(err, context.Canceled) }

// chunked frames pieces as a chunked body, the last chunk and an empty trailer included.
func chunked(pieces ...string) string {
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(strconv.FormatInt(int64(len(p)), 16) + "\r\n" + p + "\r\n")
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}

// noSenders waits until no request body goroutine is left: each one must end with its
// exchange. (A guard against a hang, like within.)
func noSenders(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "h1.(*exchange).send") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a request body goroutine outlived its exchange:\n%s", stacks)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func bytesReader(s string) *bytes.Reader { return bytes.NewReader([]byte(s)) }
