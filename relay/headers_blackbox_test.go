package relay_test

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"modelrelay/protocol"
	"modelrelay/relay"
)

// rawPost writes an HTTP/1.1 request byte for byte (so hop-by-hop headers reach the relay as
// written) and reads the response.
func rawPost(t *testing.T, ts *httptest.Server, path string, headerLines []string, body string) <-chan result {
	t.Helper()
	out := make(chan result, 1)
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var b strings.Builder
	b.WriteString("POST " + path + " HTTP/1.1\r\nHost: relay.test\r\n")
	for _, l := range headerLines {
		b.WriteString(l + "\r\n")
	}
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	go func() {
		conn.SetDeadline(time.Now().Add(waitLimit))
		if _, err := conn.Write([]byte(b.String())); err != nil {
			out <- result{err: err}
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			out <- result{err: err}
			return
		}
		defer resp.Body.Close()
		var sb strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			sb.Write(buf[:n])
			if err != nil {
				break
			}
		}
		out <- result{resp: resp, body: []byte(sb.String())}
	}()
	return out
}

var clientHeaders = []string{
	"Content-Type: application/json",
	"Authorization: Bearer sk-client",
	"X-Custom: a",
	"X-Custom: b",
	"X-Mixed-CASE: kept",
	"Connection: keep-alive, X-Conn-Listed",
	"X-Conn-Listed: secret-hop",
	"Keep-Alive: timeout=5",
	"TE: trailers",
	"Trailer: X-Trail",
	"Upgrade: h2c",
	"Proxy-Authorization: Basic Zm9vOmJhcg==",
	"Proxy-Connection: keep-alive",
}

func checkForwardedHeaders(t *testing.T, got map[string]string) {
	t.Helper()
	want := map[string]string{
		"content-type":  "application/json",
		"authorization": "Bearer sk-client",
		"x-custom":      "a, b",
		"x-mixed-case":  "kept",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	for _, k := range []string{"host", "content-length", "connection", "x-conn-listed", "keep-alive", "te", "trailer",
		"upgrade", "proxy-authorization", "proxy-connection", "transfer-encoding"} {
		if v, ok := got[k]; ok {
			t.Errorf("header %s = %q was forwarded", k, v)
		}
	}
	for k := range got {
		if k != strings.ToLower(k) {
			t.Errorf("header name %q is not lowercase", k)
		}
	}
}

func TestRequestHeadersFilteredForWorker(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	c := rawPost(t, ts, "/v1/chat/completions", clientHeaders, chatBody("m", false))
	req := w.request()
	checkForwardedHeaders(t, req.Headers)
	w.complete(req.RequestID, 200, nil, "ok")
	wait(t, c)
}

func TestResponseHeadersFilteredFromWorker(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	c := rawPost(t, ts, "/v1/chat/completions", []string{"Content-Type: application/json"}, chatBody("m", false))
	req := w.request()
	w.complete(req.RequestID, 200, protocol.Headers{
		"content-type":       "application/json",
		"x-kept":             "yes",
		"set-cookie":         "a=1",
		"connection":         "x-hop-listed",
		"x-hop-listed":       "drop me",
		"keep-alive":         "timeout=5",
		"upgrade":            "websocket",
		"proxy-authenticate": "Basic",
		"trailer":            "x-t",
		"transfer-encoding":  "gzip",
		"content-length":     "999",
	}, `{"ok":true}`)
	r := wait(t, c)
	if r.resp.StatusCode != 200 || string(r.body) != `{"ok":true}` {
		t.Fatalf("got %d %q", r.resp.StatusCode, r.body)
	}
	h := r.resp.Header
	if h.Get("X-Kept") != "yes" || h.Get("Set-Cookie") != "a=1" || h.Get("Content-Type") != "application/json" {
		t.Errorf("end-to-end headers lost: %v", h)
	}
	for _, k := range []string{"X-Hop-Listed", "Keep-Alive", "Upgrade", "Proxy-Authenticate", "Trailer"} {
		if v, ok := h[k]; ok {
			t.Errorf("response header %s = %q was passed on", k, v)
		}
	}
	if cl := h.Get("Content-Length"); cl != "" && cl != "11" {
		t.Errorf("content-length %q does not match the body", cl)
	}
}
