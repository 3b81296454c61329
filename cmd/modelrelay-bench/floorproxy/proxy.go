package main

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"modelrelay/relay/h1"
)

// bufSize is the size of the pooled buffers: a request body up to it is read whole and sent
// from memory; an answer's body is copied through one, taken for one read and its write.
const bufSize = 16 << 10

var bufs = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// proxy forwards every request to one upstream over relay/h1's client.
type proxy struct {
	up     *url.URL
	client *h1.Client
}

// newHandler is the proxy to up, keeping up to 256 idle connections to it (the relay's
// default): more than the bench's 64 connections and 200 streams, so none is dialed twice.
func newHandler(up *url.URL) http.Handler {
	return &proxy{up: up, client: &h1.Client{MaxIdlePerHost: 256}}
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := h1.Request{Method: r.Method, URL: p.up, Target: r.URL.RequestURI(), Header: r.Header, Replayable: true}
	var bp *[]byte
	switch {
	case r.ContentLength == 0:
		// No body.
	case r.ContentLength > 0 && r.ContentLength <= bufSize:
		bp = bufs.Get().(*[]byte)
		n, err := io.ReadFull(r.Body, (*bp)[:r.ContentLength])
		if err != nil {
			bufs.Put(bp)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		req.Body, req.ContentLength = bytes.NewReader((*bp)[:n]), int64(n)
	default:
		// Longer than a buffer, or of unknown length (chunked): streamed as it arrives, and
		// so sent once only.
		req.Body, req.ContentLength, req.Replayable = r.Body, r.ContentLength, false
	}
	resp, err := p.client.Do(r.Context(), &req)
	if bp != nil {
		// h1 writes a *bytes.Reader body of up to 64 KiB with the head, within Do (a retry
		// too): once Do returns, the buffer is free.
		bufs.Put(bp)
	}
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	// h1 gives the answer's field names canonical.
	ct := resp.Header["Content-Type"]
	stream := len(ct) > 0 && strings.HasPrefix(ct[0], "text/event-stream")
	if cutShort(w, resp.Body, stream) {
		// An answer cut short upstream is cut short to the client too: aborting the handler
		// breaks the connection instead of ending the answer as if it were whole.
		panic(http.ErrAbortHandler)
	}
}

// cutShort copies body to w a read at a time, each through a pooled buffer, and reports
// whether the body failed before its end. A stream is flushed after every read, so each event
// reaches the client as it comes, and waits for its next bytes before taking a buffer, so an
// idle stream holds none.
func cutShort(w http.ResponseWriter, body io.Reader, stream bool) bool {
	var flusher http.Flusher
	var waiter interface{ Wait() }
	if stream {
		flusher, _ = w.(http.Flusher)
		waiter, _ = body.(interface{ Wait() })
	}
	for {
		if waiter != nil {
			waiter.Wait()
		}
		bp := bufs.Get().(*[]byte)
		n, err := body.Read(*bp)
		var werr error
		if n > 0 {
			if _, werr = w.Write((*bp)[:n]); werr == nil && flusher != nil {
				flusher.Flush()
			}
		}
		bufs.Put(bp)
		switch {
		case werr != nil:
			return false // the client left: nobody to tell
		case err == io.EOF:
			return false
		case err != nil:
			return true
		}
	}
}
