package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// startLean serves h on a loopback port until the test ends.
func startLean(t testing.TB, h http.Handler) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: h, GoneCheckInterval: 10 * time.Millisecond, ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(ln)
	}()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	return s, ln.Addr().String()
}

// dialRaw opens a connection to addr whose reads and writes give up after 10 s, so that a
// server that never answers fails the test instead of hanging it. The caller closes it.
func dialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return nc
}

// exchangeRaw sends raw on a new connection, closes the sending side, and returns all the
// server wrote until it closed.
func exchangeRaw(t testing.TB, addr, raw string) string {
	t.Helper()
	nc := dialRaw(t, addr)
	defer nc.Close()
	io.WriteString(nc, raw)
	nc.(*net.TCPConn).CloseWrite()
	out, _ := io.ReadAll(nc)
	return string(out)
}

func echoRequest(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("X-Method", r.Method)
	w.Header().Set("X-Host", r.Host)
	w.Header().Set("X-Length", fmt.Sprint(r.ContentLength))
	fmt.Fprintf(w, "%s %s %s", r.URL.Path, r.URL.RawQuery, body)
}

func TestServeKeepAliveAndBodies(t *testing.T) {
	_, addr := startLean(t, http.HandlerFunc(echoRequest))
	var dials atomic.Int32
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, a)
	}}}
	for i, tc := range []struct {
		method, body string
		chunked      bool
		want         string
	}{
		{method: "GET", want: "/p q=1 "},
		{method: "POST", body: "hello", want: "/p q=1 hello"},
		{method: "POST", body: strings.Repeat("x", 100000), chunked: true, want: "/p q=1 " + strings.Repeat("x", 100000)},
		{method: "PUT", body: strings.Repeat("y", 9000), want: "/p q=1 " + strings.Repeat("y", 9000)},
	} {
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // unknown length: sent chunked
			}
		}
		req, _ := http.NewRequest(tc.method, "http://"+addr+"/p?q=1", body)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(got) != tc.want {
			t.Fatalf("%d: %q, %v", i, got, err)
		}
		if len(tc.want) < outSize && resp.ContentLength != int64(len(tc.want)) || resp.Header.Get("X-Method") != tc.method ||
			resp.Header.Get("X-Host") != addr || resp.Header.Get("Date") == "" {
			t.Fatalf("%d: length %d, header %v", i, resp.ContentLength, resp.Header)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d connections for 4 requests; want 1 (keep-alive)", n)
	}
}

func TestServeStreamsFlushedChunks(t *testing.T) {
	next := make(chan struct{})
	_, addr := startLean(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Error(err)
			}
			<-next
		}
		w.Write([]byte(strings.Repeat("z", 10000))) // larger than the buffer
	}))
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ContentLength != -1 || len(resp.TransferEncoding) != 1 {
		t.Fatalf("length %d, TE %v; want chunked", resp.ContentLength, resp.TransferEncoding)
	}
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("event %d: %q, %v", i, line, err)
		}
		br.ReadString('\n')
		next <- struct{}{}
	}
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != strings.Repeat("z", 10000) {
		t.Fatalf("rest: %d bytes, %v", len(rest), err)
	}
}

func TestServeExpectContinue(t *testing.T) {
	_, addr := startLean(t, http.HandlerFunc(echoRequest))
	raw := "POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"
	nc := dialRaw(t, addr)
	defer nc.Close()
	io.WriteString(nc, raw)
	br := bufio.NewReader(nc)
	line, _ := br.ReadString('\n')
	blank, _ := br.ReadString('\n')
	if line != "HTTP/1.1 100 Continue\r\n" || blank != "\r\n" {
		t.Fatalf("%q %q; want 100 Continue first", line, blank)
	}
	io.WriteString(nc, "hello")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	if string(got) != "/e  hello" {
		t.Fatalf("%q", got)
	}

	// Refused before the body: no 100, the answer, and the connection closes.
	_, addr = startLean(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	out := exchangeRaw(t, addr, raw)
	if !strings.HasPrefix(out, "HTTP/1.1 401 ") || strings.Contains(out, "100 Continue") ||
		!strings.Contains(out, "Connection: close\r\n") {
		t.Fatalf("%q", out)
	}
	if out := exchangeRaw(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nExpect: teapot\r\n\r\nx"); !strings.HasPrefix(out, "HTTP/1.1 417 ") {
		t.Fatalf("other Expect: %q", out)
	}
}

// TestServeResponseController: what the relay asks of http.ResponseController reaches the
// connection: full duplex is on, and a read deadline (here one long past) fails the body's
// read as a timeout, which the handler still answers.
func TestServeResponseController(t *testing.T) {
	_, addr := startLean(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.EnableFullDuplex(); err != nil {
			t.Errorf("EnableFullDuplex: %v", err)
		}
		if err := rc.SetReadDeadline(time.Unix(1, 0)); err != nil {
			t.Errorf("SetReadDeadline: %v", err)
		}
		_, err := io.ReadAll(r.Body)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("body read past its deadline: %v; want a timeout", err)
		}
		rc.SetReadDeadline(time.Time{})
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusRequestTimeout)
	}))
	nc := dialRaw(t, addr)
	defer nc.Close()
	io.WriteString(nc, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n") // the body never comes
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("%v, %v", resp, err)
	}
}

// TestServeBodyDeadlineEndsWithTheBody: a read deadline the handler set for its body (as the
// relay's pass-through does before every read) is over once the body has ended, as on
// net/http's server: when it passes while the answer is still being written, the look for a
// client that left must not take it for one.
func TestServeBodyDeadlineEndsWithTheBody(t *testing.T) {
	result := make(chan error, 1)
	_, addr := startLean(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deadline := time.Now().Add(200 * time.Millisecond)
		http.NewResponseController(w).SetReadDeadline(deadline)
		if _, err := io.ReadAll(r.Body); err != nil {
			result <- fmt.Errorf("body: %v", err)
			return
		}
		time.Sleep(time.Until(deadline) + time.Millisecond) // the deadline is past; no figure is checked
		w.(*responseWriter).c.checkGone()                   // the sweeper's look, now
		result <- r.Context().Err()
	}))
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	io.WriteString(nc, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	if err := <-result; err != nil {
		t.Fatalf("after the body's deadline passed: %v; want the request still on", err)
	}
}

// TestServePipelined: requests sent back to back are answered one after the other, in order.
func TestServePipelined(t *testing.T) {
	_, addr := startLean(t, http.HandlerFunc(echoRequest))
	out := exchangeRaw(t, addr, "POST /1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na"+
		"GET /2 HTTP/1.1\r\nHost: x\r\n\r\n"+
		"POST /3 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nc\r\n0\r\n\r\n"+
		"GET /4 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"+
		"GET /5 HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(strings.NewReader(out))
	for _, want := range []string{"/1  a", "/2  ", "/3  c", "/4  "} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		got, _ := io.ReadAll(resp.Body)
		if string(got) != want {
			t.Fatalf("%q; want %q", got, want)
		}
	}
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Fatalf("answered after Connection: close: %q", rest)
	}
}

func TestServeAnswerShapes(t *testing.T) {
	_, addr := startLean(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
			if _, err := w.Write([]byte("x")); err != http.ErrBodyNotAllowed {
				t.Errorf("write on a 204: %v", err)
			}
		case "/length":
			w.Header().Set("Content-Length", "3")
			w.Write([]byte("abc"))
			if _, err := w.Write([]byte("d")); err != http.ErrContentLength {
				t.Errorf("write past Content-Length: %v", err)
			}
		case "/short":
			w.Header().Set("Content-Length", "10")
			w.Write([]byte("abc"))
		case "/split":
			w.Header().Set("X-Evil", "a\r\nSet-Cookie: b")
			w.Header()["Bad Name"] = []string{"c"}
		case "/early":
			w.Header().Set("Link", "</a>")
			w.WriteHeader(http.StatusEarlyHints)
			w.Write([]byte("ok"))
		case "/abort":
			w.Write([]byte("part"))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
	}))
	for _, tc := range []struct {
		raw, want string
		not       []string
	}{
		{raw: "GET /204 HTTP/1.1\r\nHost: x\r\n\r\n", want: "HTTP/1.1 204 No Content\r\n", not: []string{"Content-Length", "Transfer-Encoding"}},
		{raw: "HEAD /length HTTP/1.1\r\nHost: x\r\n\r\n", want: "Content-Length: 3\r\n", not: []string{"abc"}},
		{raw: "GET /length HTTP/1.1\r\nHost: x\r\n\r\n", want: "\r\n\r\nabc"},
		{raw: "GET /short HTTP/1.1\r\nHost: x\r\n\r\n", want: "Connection: close\r\n"},
		{raw: "GET /split HTTP/1.1\r\nHost: x\r\n\r\n", want: "X-Evil: a  Set-Cookie: b\r\n", not: []string{"\nSet-Cookie", "Bad Name"}},
		{raw: "GET /early HTTP/1.1\r\nHost: x\r\n\r\n", want: "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\n"},
		{raw: "GET /abort HTTP/1.1\r\nHost: x\r\n\r\n", want: "4\r\npart\r\n", not: []string{"0\r\n\r\n"}},
		{raw: "GET / HTTP/1.0\r\n\r\n", want: "Content-Length: 0\r\nConnection: close\r\n"},
		{raw: "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", want: "Connection: keep-alive\r\n"},
	} {
		out := exchangeRaw(t, addr, tc.raw+"GET /never HTTP/1.1\r\n\r\n")
		if !strings.Contains(out, tc.want) {
			t.Errorf("%q: %q; want %q in it", tc.raw, out, tc.want)
		}
		for _, not := range tc.not {
			if strings.Contains(out, not) {
				t.Errorf("%q: %q has %q", tc.raw, out, not)
			}
		}
	}
}

// TestServeClientGone: a handler waiting with its request read learns through its context
// that the client left, with no byte written.
func TestServeClientGone(t *testing.T) {
	for _, body := range []string{"", "hello"} {
		canceled := make(chan struct{})
		_, addr := startLean(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
			<-r.Context().Done()
			close(canceled)
		}))
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(nc, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		time.Sleep(20 * time.Millisecond) // let the request arrive whole; nothing depends on it
		nc.Close()
		within(t, canceled, "handler's context after the client left")
	}
}

// TestServeShutdown: idle connections close at once, a request in flight finishes, then
// Shutdown returns and Serve has returned ErrServerClosed.
func TestServeShutdown(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		w.Write([]byte("done"))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	addr := ln.Addr().String()
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	answer := make(chan string, 1)
	go func() { answer <- exchangeRaw(t, addr, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n") }()
	<-started
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle connection: %v; want it closed", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	default:
	}
	close(release)
	if out := <-answer; !strings.HasSuffix(out, "done") || !strings.Contains(out, "Connection: close") {
		t.Fatalf("%q", out)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
}

func TestServeHijack(t *testing.T) {
	_, addr := startLean(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nc, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		go func() {
			defer nc.Close()
			io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\n\r\n")
			line, _ := brw.ReadString('\n')
			io.WriteString(nc, "echo "+line)
		}()
	}))
	out := exchangeRaw(t, addr, "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\nping\n")
	if out != "HTTP/1.1 101 Switching Protocols\r\n\r\necho ping\n" {
		t.Fatalf("%q", out)
	}
}

// TestServeLateBodyRead: a body read after its handler returned fails, and never reads the
// next request's bytes.
func TestServeLateBodyRead(t *testing.T) {
	bodies := make(chan io.Reader, 1)
	_, addr := startLean(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/1" {
			bodies <- r.Body
		}
		w.Write([]byte(r.URL.Path))
	}))
	out := exchangeRaw(t, addr, "POST /1 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /2 HTTP/1.1\r\nHost: x\r\n\r\n")
	if !strings.HasSuffix(out, "/2") {
		t.Fatalf("%q: the unread body was not skipped", out)
	}
	if _, err := (<-bodies).Read(make([]byte, 10)); err != http.ErrBodyReadAfterClose {
		t.Fatalf("late read: %v", err)
	}
}

// TestPlainOriginForm: where plainOriginForm fills the URL itself, it fills it as
// url.ParseRequestURI does, for every visible byte in the path and in the query.
func TestPlainOriginForm(t *testing.T) {
	targets := []string{"/", "/v1/chat/completions", "//x", "/a?", "/a??", "/a?b?", "/a?b=1&c=%zz", "/?", "/a/./b/../c"}
	for c := byte(0x21); c != 0; c++ {
		if c == 0x7f {
			continue
		}
		s := string([]byte{c})
		targets = append(targets, "/"+s, "/a"+s+"b", "/a?"+s, "/a?b"+s, "/a"+s+"?q", s+"/a")
	}
	for _, target := range []string{"/v1/chat/completions", "/v1/models?limit=10&after=m-1", "/a?"} {
		if !plainOriginForm(target, &url.URL{}) {
			t.Errorf("%q: left to net/url", target)
		}
	}
	for _, target := range targets {
		var got url.URL
		if !plainOriginForm(target, &got) {
			continue
		}
		want, err := url.ParseRequestURI(target)
		if err != nil {
			t.Errorf("%q: filled %+v; url.ParseRequestURI fails: %v", target, got, err)
			continue
		}
		if !reflect.DeepEqual(&got, want) {
			t.Errorf("%q: filled %+v; url.ParseRequestURI %+v", target, got, *want)
		}
	}
}

// TestServeTimeouts: on a kept-alive connection the wait for the next request is bounded by
// IdleTimeout, and a head begun by ReadHeaderTimeout, whether it came in one read or not.
func TestServeTimeouts(t *testing.T) {
	start := func(header, idle time.Duration) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{Handler: http.HandlerFunc(echoRequest), ReadHeaderTimeout: header, IdleTimeout: idle}
		go s.Serve(ln)
		t.Cleanup(func() { s.Close() })
		return ln.Addr().String()
	}
	// kept dials, has one request answered, and returns the connection kept alive.
	kept := func(addr string) (net.Conn, *bufio.Reader) {
		nc := dialRaw(t, addr)
		t.Cleanup(func() { nc.Close() })
		br := bufio.NewReader(nc)
		io.WriteString(nc, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		return nc, br
	}
	closedWithin := func(nc net.Conn, br *bufio.Reader, d time.Duration, what string) {
		t.Helper()
		begun := time.Now()
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("%s: %v; want the connection closed", what, err)
		}
		if took := time.Since(begun); took > d {
			t.Fatalf("%s: closed after %v; want within %v", what, took, d)
		}
	}

	addr := start(100*time.Millisecond, time.Minute)
	nc, br := kept(addr)
	io.WriteString(nc, "GET /2 HTTP/1.1\r\n") // and no more
	closedWithin(nc, br, 5*time.Second, "a head begun and stalled")

	nc, br = kept(addr)
	time.Sleep(300 * time.Millisecond) // longer than ReadHeaderTimeout, shorter than IdleTimeout
	io.WriteString(nc, "GET /3 HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a whole head after a wait: %v", err)
	}

	nc, br = kept(start(time.Minute, 100*time.Millisecond))
	closedWithin(nc, br, 5*time.Second, "an idle connection")
}
