package h1

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestTLSUpstream(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Proto", r.Proto+" "+r.TLS.NegotiatedProtocol+" "+r.TLS.ServerName)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 { // streamed: chunked on the wire
			fmt.Fprintf(w, "data: %s %d\n\n", body, i)
			w.(http.Flusher).Flush()
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c := Client{TLSConfig: &tls.Config{RootCAs: roots}}
	defer c.CloseIdle()
	u := mustURL(srv.URL + "/v1/chat/completions")
	for i := range 5 {
		resp, body := call(t, &c, &Request{URL: u, Body: bytesReader(fmt.Sprint(i)), Replayable: true})
		want := fmt.Sprintf("data: %d 0\n\ndata: %d 1\n\ndata: %d 2\n\n", i, i, i)
		if body != want || resp.ContentLength != -1 {
			t.Fatalf("%q (length %d), want %q", body, resp.ContentLength, want)
		}
		// httptest's certificate is for 127.0.0.1: no SNI is sent for an IP address.
		if p := resp.Header.Get("X-Proto"); p != "HTTP/1.1 http/1.1" {
			t.Fatalf("server saw %q", p)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("5 requests took %d TLS connections, want 1", n)
	}
}

func TestTLSUntrustedIsDialError(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	srv.Config.ErrorLog = quietLog()
	var c Client // the system roots do not know httptest's certificate
	_, err := c.Do(context.Background(), &Request{Method: "GET", URL: mustURL(srv.URL)})
	var verr *tls.CertificateVerificationError
	if !isDialError(err) || !errors.As(err, &verr) {
		t.Fatalf("%v: want a certificate error inside a dial error", err)
	}
}
