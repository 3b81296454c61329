package h1

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStreamingRequestBody: the request body goes up chunk by chunk while the answer comes
// down: each piece written is echoed back before the next is written.
func TestStreamingRequestBody(t *testing.T) {
	s := startServer(t, func(sc *serverConn) {
		for {
			req, err := http.ReadRequest(sc.br)
			if err != nil {
				return
			}
			io.WriteString(sc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
			buf := make([]byte, 64)
			for {
				n, err := req.Body.Read(buf)
				if n > 0 {
					fmt.Fprintf(sc, "%x\r\n%s\r\n", n, buf[:n])
				}
				if err != nil {
					break
				}
			}
			io.WriteString(sc, "0\r\n\r\n")
		}
	})
	var c Client
	defer c.CloseIdle()
	pr, pw := io.Pipe()
	resp, err := c.Do(context.Background(), &Request{URL: s.url, Body: pr, ContentLength: -1})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	for i := range 3 {
		piece := "ping " + strconv.Itoa(i)
		if _, err := io.WriteString(pw, piece); err != nil {
			t.Fatal(err)
		}
		if n, err := io.ReadAtLeast(resp.Body, buf, len(piece)); err != nil || string(buf[:n]) != piece {
			t.Fatalf("echo %q, %v; want %q", buf[:n], err, piece)
		}
	}
	pw.Close()
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Fatalf("after the body: %q, %v", rest, err)
	}
	waitIdle(t, &c, 1)
	call(t, &c, &Request{URL: s.url, Body: strings.NewReader("again")})
	if s.accepted.Load() != 1 {
		t.Fatalf("%d connections, want 1", s.accepted.Load())
	}
}

// TestAnswerBeforeBody: an upstream may answer before it has read the whole request. The
// connection goes back to the pool only once both the answer and the body are done.
func TestAnswerBeforeBody(t *testing.T) {
	s := startServer(t, func(sc *serverConn) {
		for {
			req, err := http.ReadRequest(sc.br)
			if err != nil {
				return
			}
			io.WriteString(sc, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly")
			io.Copy(io.Discard, req.Body) // then reads the rest, keeping the connection
		}
	})
	var c Client
	defer c.CloseIdle()
	pr, pw := io.Pipe()
	resp, err := c.Do(context.Background(), &Request{URL: s.url, Body: pr, ContentLength: -1})
	if err != nil {
		t.Fatal(err)
	}
	if body, err := io.ReadAll(resp.Body); err != nil || string(body) != "early" {
		t.Fatalf("%q, %v", body, err)
	}
	if n := idleConns(&c); n != 0 {
		t.Fatal("the connection was pooled while its request body was still being sent")
	}
	io.WriteString(pw, "late part")
	pw.Close()
	waitIdle(t, &c, 1)
	call(t, &c, get(s))
	if s.accepted.Load() != 1 {
		t.Fatalf("%d connections, want 1", s.accepted.Load())
	}
}

// TestEarlyRefusal: an upstream that refuses a request before reading its body, and closes,
// is heard: Do returns its answer though the body has not been sent.
func TestEarlyRefusal(t *testing.T) {
	s := startServer(t, func(sc *serverConn) {
		if _, err := http.ReadRequest(sc.br); err != nil {
			return
		}
		io.WriteString(sc, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 8\r\n\r\ntoo big!")
	})
	var c Client
	defer c.CloseIdle()
	pr, pw := io.Pipe()
	defer pw.Close()
	resp, body := call(t, &c, &Request{URL: s.url, Body: pr, ContentLength: 1 << 30})
	if resp.StatusCode != 413 || body != "too big!" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	pw.CloseWithError(io.ErrClosedPipe) // the body's goroutine ends with its body
	noSenders(t)
	if n := idleConns(&c); n != 0 {
		t.Fatalf("%d idle connections, want 0", n)
	}
}

// TestBrokenRequestBody: a request body that fails is what Do reports, not the upstream.
func TestBrokenRequestBody(t *testing.T) {
	s := startServer(t, func(sc *serverConn) {
		sc.next()
		io.Copy(io.Discard, sc)
	})
	var c Client
	pr, pw := io.Pipe()
	errClient := fmt.Errorf("client went away")
	go func() {
		io.WriteString(pw, "part")
		pw.CloseWithError(errClient)
	}()
	_, err := c.Do(context.Background(), &Request{URL: s.url, Body: pr, ContentLength: -1})
	if err == nil || !strings.Contains(err.Error(), "read request body") || !errors.Is(err, errClient) {
		t.Fatalf("%v: want the body's error", err)
	}
	noSenders(t)
}

// waitIdle waits until the client holds n idle connections (a guard against a hang).
func waitIdle(t *testing.T, c *Client, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for idleConns(c) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle connections, want %d", idleConns(c), n)
		}
		time.Sleep(time.Millisecond)
	}
}
