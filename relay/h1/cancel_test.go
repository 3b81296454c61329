package h1

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// Cancellation: whatever the request is blocked on (the dial, the handshake, a write, the
// head, the body), ending its context ends the wait, and the connection is not reused.

func TestCancelMidStream(t *testing.T) {
	s := startServer(t, func(sc *serverConn) {
		for {
			if req, _ := sc.next(); req == nil {
				return
			}
			io.WriteString(sc, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"+
				"d\r\ndata: first\n\n\r\n")
			if sc.id == 1 {
				io.Copy(io.Discard, sc) // the stream stalls until the client hangs up
				return
			}
			io.WriteString(sc, "0\r\n\r\n")
		}
	})
	var c Client
	defer c.CloseIdle()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := c.Do(ctx, get(s))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := resp.Body.Read(buf); err != nil || string(buf[:n]) != "data: first\n\n" {
		t.Fatalf("first event: %q, %v", buf[:n], err)
	}
	done := make(chan struct{})
	var rerr error
	go func() {
		defer close(done)
		_, rerr = resp.Body.Read(buf)
	}()
	cancel()
	within(t, done, "a body Read after the context ended")
	if !isCanceled(rerr) {
		t.Fatalf("%v: want context.Canceled", rerr)
	}
	resp.Body.Close()
	if _, body := call(t, &c, get(s)); body != "data: first\n\n" {
		t.Fatalf("body %q", body)
	}
	if s.accepted.Load() != 2 {
		t.Fatalf("%d connections, want 2: an aborted one is never reused", s.accepted.Load())
	}
}

// TestCancelSpentDeadline: a context that ends after the last byte has arrived spends the
// connection's deadline all the same, and such a connection is never pooled.
func TestCancelSpentDeadline(t *testing.T) {
	s := startServer(t, fixed("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"))
	var c Client
	defer c.CloseIdle()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := c.Do(ctx, get(s))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	io.ReadAll(resp.Body) // from the buffer, or failing on the spent deadline: either way
	if n := idleConns(&c); n != 0 {
		t.Fatalf("%d idle connections: one whose deadline the context spent was pooled", n)
	}
}

// answerNever reads each request, reports it, and never answers.
func answerNever(got chan<- struct{}) func(*serverConn) {
	return func(sc *serverConn) {
		for {
			if req, _ := sc.next(); req == nil {
				return
			}
			got <- struct{}{}
		}
	}
}

func TestCancelAwaitingHead(t *testing.T) {
	got := make(chan struct{}, 4)
	s := startServer(t, answerNever(got))
	var c Client
	defer c.CloseIdle()
	for _, r := range []*Request{post(s, "in memory"), {URL: s.url, Body: io.MultiReader(strings.NewReader("streamed")), ContentLength: -1}} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		var err error
		go func() {
			defer close(done)
			_, err = c.Do(ctx, r)
		}()
		<-got // the request is out; Do waits for the head
		cancel()
		within(t, done, "Do awaiting the head after the context ended")
		if !isCanceled(err) {
			t.Fatalf("%v: want context.Canceled", err)
		}
		// An in-memory body is written before the head is awaited: the request was whole.
		// (A streamed one is finished on its own goroutine, which may not have said so yet.)
		if _, inMemory := r.Body.(*strings.Reader); inMemory && !errors.Is(err, ErrUnanswered) {
			t.Fatalf("%v: want ErrUnanswered, the whole request was out", err)
		}
	}
	noSenders(t)
}

// TestCancelDuringWrite: the upstream reads nothing, the body is endless, the socket fills
// and the write blocks; the context still ends it, and the body's goroutine exits.
func TestCancelDuringWrite(t *testing.T) {
	stop := make(chan struct{})
	read := make(chan struct{})
	s := startServer(t, func(sc *serverConn) {
		// A megabyte of the body is read, then nothing: the client's writes fill the
		// socket's buffers and block.
		io.CopyN(io.Discard, sc, 1<<20)
		close(read)
		<-stop
	})
	t.Cleanup(func() { close(stop) }) // runs before the server's own cleanup
	var c Client
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		_, err = c.Do(ctx, &Request{URL: s.url, Body: endless{}, ContentLength: -1})
	}()
	<-read
	cancel()
	within(t, done, "Do writing an endless body after the context ended")
	if !isCanceled(err) {
		t.Fatalf("%v: want context.Canceled", err)
	}
	if errors.Is(err, ErrUnanswered) {
		t.Fatalf("%v: a request still being written is not unanswered", err)
	}
	noSenders(t)
}

// endless is a body that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// silentListener accepts connections and never says a word: a TLS handshake to it waits.
// accepted receives each connection's arrival.
func silentListener(t *testing.T) (addr string, accepted <-chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 16)
	arrived := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(conns)
				return
			}
			conns <- c
			arrived <- struct{}{}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), arrived
}

func TestCancelDuringHandshake(t *testing.T) {
	addr, accepted := silentListener(t)
	var c Client
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		_, err = c.Do(ctx, &Request{Method: "GET", URL: mustURL("https://" + addr + "/")})
	}()
	<-accepted // the TCP dial is done; the handshake is waiting for the server's hello
	cancel()
	within(t, done, "Do in a TLS handshake after the context ended")
	if !isCanceled(err) || !isDialError(err) {
		t.Fatalf("%v: want context.Canceled inside a dial error", err)
	}
}

func TestDialTimeoutCoversHandshake(t *testing.T) {
	addr, _ := silentListener(t)
	c := Client{DialTimeout: 50 * time.Millisecond}
	_, err := c.Do(context.Background(), &Request{Method: "GET", URL: mustURL("https://" + addr + "/")})
	var ne net.Error
	if !isDialError(err) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%v: want a dial error that is a timeout", err)
	}
}

func TestContextDeadlineIsTimeout(t *testing.T) {
	s := startServer(t, answerNever(make(chan struct{}, 4)))
	var c Client
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := c.Do(ctx, get(s))
	var ne net.Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%v: want a timeout", err)
	}
}

func TestCanceledBeforeDo(t *testing.T) {
	s := startServer(t, echo)
	var c Client
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Do(ctx, get(s)); !isCanceled(err) {
		t.Fatalf("%v: want context.Canceled", err)
	}
	if s.accepted.Load() != 0 {
		t.Fatal("a cancelled request dialled")
	}
}

func isDialError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}
