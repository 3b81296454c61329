package h1

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The states of an inbound connection, as Shutdown sees them.
const (
	connIdle   int32 = iota // waiting for a request (a new connection too)
	connActive              // reading or serving a request
	connClosed              // closed by Shutdown or Close
)

// inbound is one client connection, served by one goroutine.
type inbound struct {
	s      *Server
	nc     net.Conn
	remote string
	state  atomic.Int32
	// br reads requests. Its buffer goes back to the pool while a handler waits with its
	// request read to the end (quiet) and while the connection waits for its next request.
	br    *reader
	hr    headReader
	probe probe
	// armHead sets the head's deadline; br calls it before a read the head needs.
	armHead func()
	// bodyDeadline: the handler set a read deadline, which ends with the body.
	bodyDeadline atomic.Bool

	// What the sweeper may look at, under mu: whether the handler waits with nothing left
	// to read (watching), and how to cancel its request.
	mu       sync.Mutex
	watching bool
	cancel   context.CancelFunc

	// owesContinue: the request asked for 100 Continue and neither it nor a final answer
	// went out yet. The body's first read sends it; a final answer takes the chance away.
	continueMu      sync.Mutex
	owesContinue    atomic.Bool
	continueSkipped bool // a final answer went out instead: the client may send no body

	hijacked bool
	// Scratch for the answers: the head, and what one write sends with the chunk-size
	// lines it needs.
	head []byte
	iov  net.Buffers
	iovs [5][]byte
	num  [20]byte
	size [24]byte
}

// maxDiscard is how much of a request body the handler left unread is read and dropped to
// keep the connection (net/http's figure); beyond it the connection is closed.
const maxDiscard = 256 << 10

func newInbound(s *Server, nc net.Conn) *inbound {
	c := &inbound{s: s, nc: nc, remote: nc.RemoteAddr().String()}
	if sc, ok := nc.(syscall.Conn); ok {
		c.probe.init(sc)
	}
	c.armHead = c.headDeadline // bound once: no allocation per request
	return c
}

// headDeadline gives a kept-alive connection's request the rest of its head to read.
func (c *inbound) headDeadline() {
	c.nc.SetReadDeadline(time.Now().Add(c.s.readHeaderTimeout()))
}

// serve reads and answers requests until the connection ends.
func (c *inbound) serve() {
	defer leave(c.s, c.s.conns, c)
	c.br = newReader(c.nc)
	defer func() {
		if c.hijacked {
			return
		}
		c.nc.Close()
		c.br.drop()
	}()
	wait := c.s.readHeaderTimeout()
	for {
		c.nc.SetReadDeadline(time.Now().Add(wait))
		if _, err := c.br.Peek(1); err != nil {
			return
		}
		if !c.state.CompareAndSwap(connIdle, connActive) {
			return // Shutdown closed it as idle
		}
		if wait != c.s.readHeaderTimeout() {
			// The head's deadline replaces the idle one at the first read from the socket
			// the head needs: a head already whole in the buffer costs no timer change.
			c.br.beforeRead = c.armHead
		}
		if !c.serveOne() || c.hijacked {
			return
		}
		if !c.state.CompareAndSwap(connActive, connIdle) || c.s.closing.Load() {
			return
		}
		wait = c.s.idleTimeout()
	}
}

// served is one request's own memory, in one allocation: the request the handler gets, its
// URL and the backing of its header's values, its answer and its body. It is new for every
// request, never reused: a handler may keep the request, and a goroutine of its may still
// read the body after it returned.
type served struct {
	r      http.Request
	url    url.URL
	values [20]string // the fields of an SDK's request and a proxy's additions; more get their own
	w      responseWriter
	body   reqBody
}

// serveOne reads one request, runs the handler and finishes the answer. It reports whether
// the connection may carry another request.
func (c *inbound) serveOne() (keep bool) {
	x := &served{}
	r, status, err := c.readRequest(x)
	c.br.beforeRead = nil
	if err != nil {
		if status != 0 {
			c.refuse(status)
		}
		return false
	}
	c.nc.SetReadDeadline(time.Time{})
	// The context's two allocations (the context and its cancel function) stay: the
	// sweeper and a failed write cancel it, and only context's own type lets the handler's
	// derived contexts hang on it without a goroutine each.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The request takes its context in place: WithContext's copy, inlined, stays on the
	// stack.
	*r = *r.WithContext(ctx)
	x.w.start(c, r)
	c.mu.Lock()
	c.cancel = cancel
	c.mu.Unlock()
	if r.Body == http.NoBody {
		c.quiet()
	}
	panicked := c.run(&x.w, r)
	c.mu.Lock()
	c.watching, c.cancel = false, nil
	c.mu.Unlock()
	if panicked || c.hijacked {
		return false
	}
	keep = x.w.finish()
	if r.Body != http.NoBody && !x.body.end(keep) {
		c.lingerClose()
		return false
	}
	return keep && !c.s.closing.Load()
}

// run calls the handler. A panic ends the connection without finishing the answer, so that
// the client sees it cut short, never complete; http.ErrAbortHandler is the quiet way to ask
// for that.
func (c *inbound) run(w *responseWriter, r *http.Request) (panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
			if v != http.ErrAbortHandler {
				buf := make([]byte, 16<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.s.logf("h1: panic serving %s: %v\n%s", c.remote, v, buf)
			}
			w.abandon()
		}
	}()
	c.s.Handler.ServeHTTP(w, r)
	return false
}

// quiet is called once nothing of the request is left to read: the read buffer goes back to
// the pool (unless a pipelined request already sits in it), and the sweeper may look at the
// socket from now on. Called by whoever read the body's end, under the body's lock.
//
// A read deadline the handler set for its body ends with the body, as net/http's server
// clears it when it starts its background read: left in place, it would fail the sweeper's
// peek once it passed and cancel a request whose answer is still being written (the relay's
// pass-through sets one before every read of the body it streams).
func (c *inbound) quiet() {
	if c.hijacked {
		return
	}
	if c.bodyDeadline.Swap(false) {
		c.nc.SetReadDeadline(time.Time{})
	}
	if c.br.Buffered() > 0 {
		return
	}
	c.br.drop()
	c.mu.Lock()
	c.watching = c.cancel != nil
	c.mu.Unlock()
}

// checkGone is the sweeper's look at a waiting handler's client: end of file or an error on
// its socket cancels the request. Bytes waiting there (a pipelined request) mean it is still
// there.
func (c *inbound) checkGone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watching && c.probe.gone() {
		c.watching = false
		c.cancel()
	}
}

// clientGone cancels the request after a failed write.
func (c *inbound) clientGone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watching = false
	if c.cancel != nil {
		c.cancel()
	}
}

// refuse answers a request that could not be read, and the connection closes after it.
func (c *inbound) refuse(status int) {
	text := http.StatusText(status)
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	io.WriteString(c.nc, "HTTP/1.1 "+itoa3(status)+" "+text+
		"\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"+itoa3(status)+" "+text)
}

func itoa3(n int) string {
	return string([]byte{byte('0' + n/100), byte('0' + n/10%10), byte('0' + n%10)})
}

// lingerClose closes a connection whose client may still be sending: the write side first,
// then a short wait for the client to finish, so that unread bytes do not make the kernel
// reset the connection before the client has read the answer (net/http waits the same).
func (c *inbound) lingerClose() {
	if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
		c.nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		var buf [512]byte
		for {
			if _, err := c.nc.Read(buf[:]); err != nil {
				break
			}
		}
	}
}
