package h1

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// reqBody is a request's body as the handler reads it: h1's body reader for the framing
// (Content-Length or chunked, as strict as for answers), a 100 Continue sent on the first read
// when the client asked for one, and a lock, because a handler may hand the body to another
// goroutine (a pass-through upload) that is still reading when the handler returns.
type reqBody struct {
	mu     sync.Mutex
	c      *inbound
	b      body
	done   bool // the body ended, cleanly or not: nothing more is read from the connection
	closed bool // the handler returned: reads fail from now on
}

func (rb *reqBody) start(c *inbound, kind framing, length int64) {
	rb.c = c
	rb.b.start(c.br, nil, kind, length)
}

func (rb *reqBody) Read(p []byte) (int, error) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if rb.done {
		return 0, rb.b.err
	}
	if rb.c.owesContinue.Load() {
		if err := rb.c.sendContinue(); err != nil {
			return 0, err
		}
	}
	n, err := rb.b.Read(p)
	if err != nil {
		rb.done = true
		if err == io.EOF {
			rb.c.quiet()
		}
	}
	return n, err
}

// Close does nothing: what the handler left unread is dealt with when it returns.
func (rb *reqBody) Close() error { return nil }

// end is called when the handler has returned. It reports whether the connection can carry
// another request: the body was read to its end, or what is left of it (at most maxDiscard)
// could be read and dropped. A client still waiting for 100 Continue sends no body, so its
// connection cannot be read further either.
func (rb *reqBody) end(keep bool) bool {
	c := rb.c
	if !rb.mu.TryLock() {
		// Another goroutine is reading: stop it (the connection's framing is lost with it).
		c.nc.SetReadDeadline(aLongTimeAgo)
		rb.mu.Lock()
		rb.closed = true
		rb.mu.Unlock()
		return false
	}
	defer rb.mu.Unlock()
	rb.closed = true
	switch {
	case rb.done:
		return rb.b.err == io.EOF
	case !keep || c.owesContinue.Load() || c.continueSkipped:
		return false
	}
	c.nc.SetReadDeadline(time.Now().Add(c.s.readHeaderTimeout()))
	defer c.nc.SetReadDeadline(time.Time{})
	var buf [512]byte
	for left := maxDiscard; left > 0; {
		n, err := rb.b.Read(buf[:min(len(buf), left)])
		left -= n
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
	}
	return false
}

// sendContinue writes 100 Continue, unless a final answer took its place.
func (c *inbound) sendContinue() error {
	c.continueMu.Lock()
	defer c.continueMu.Unlock()
	if !c.owesContinue.Load() {
		return nil
	}
	c.owesContinue.Store(false)
	_, err := io.WriteString(c.nc, "HTTP/1.1 100 Continue\r\n\r\n")
	return err
}

// skipContinue gives up on a 100 Continue not yet sent: the final answer goes out instead.
func (c *inbound) skipContinue() {
	if c.owesContinue.Load() {
		c.continueMu.Lock()
		c.owesContinue.Store(false)
		c.continueMu.Unlock()
		c.continueSkipped = true
	}
}
