package h1

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
)

// exchange is one request and its answer on one connection.
//
// Two users may hold the connection at once: the answer's body, read by the caller, and the
// request's body, when it is sent on its own goroutine (so that the answer can begin while
// the request is still streaming up). Each lets go once with release; the last one decides
// whether the connection goes back to the pool.
type exchange struct {
	client *Client
	cn     *conn
	ctx    context.Context
	// stop undoes the registration that aborts the connection when ctx ends (ctx's own, when
	// it is a Watcher, else context.AfterFunc). If it reports that the abort already ran,
	// the connection's deadline is spent: never reuse it.
	stop    func() bool
	watcher Watcher
	watchID uint64
	users   atomic.Int32
	broken  atomic.Bool
	// keepAlive: the answer lets the connection carry another request. Set before the
	// answer's release; read by whichever release comes last.
	keepAlive bool
	// sent is closed when the body's goroutine is done with the body; werr is how it ended
	// and readFailed whether the body itself (not the connection) failed.
	sent       chan struct{}
	werr       error
	readFailed bool
}

// response is all the memory one answer needs, in one allocation, the backing of its
// header's values included. It is new for every answer, never reused: the caller may keep the
// Response and its Header.
type response struct {
	Response
	body body
	x    exchange
	// values: the fields of a model server's answer (Date, Server, Content-Type and
	// Content-Length or Transfer-Encoding) and a proxy's few additions; more get their own.
	// Seven fill the 320-byte size class the allocation rounds up to.
	values [7]string
}

// roundTrip sends r over cn and reads the answer's head. retry reports a failure that
// happened before any byte of an answer arrived on a connection taken from the pool: the
// upstream had closed it, and (for a request allowed to) sending again on a fresh
// connection is safe. When retry is set for a Replayable request, the body is no longer in
// use and may be rewound.
func (c *Client) roundTrip(ctx context.Context, cn *conn, r *Request, t *target) (_ *Response, retry bool, _ error) {
	rs := &response{}
	x := &rs.x
	x.client, x.cn, x.ctx = c, cn, ctx
	x.users.Store(1)
	// One registration per attempt, before the first write: a write or a read blocked on the
	// socket ends when ctx does. Its cost is the context package's: the registration and its
	// stop function (two allocations, 128 bytes, about 0.4 us with the stop), and, for a
	// context no one watched yet, its Done channel and its map of children (three more, about
	// 0.8 us in all). A goroutine per connection watching Done instead allocates nothing but
	// costs two goroutine switches per request (about 1.1 us), and one goroutine per idle
	// connection. A Watcher context takes the abort itself and costs what it says.
	if w, ok := ctx.(Watcher); ok {
		x.watcher, x.watchID = w, w.Watch(cn.abort)
	} else if ctx.Done() != nil {
		x.stop = context.AfterFunc(ctx, cn.abort)
	}
	cn.startWrite()
	if err := writeHead(cn, r, t); err != nil {
		cn.endWrite()
		x.release(false, true)
		return nil, false, err
	}
	var werr error
	if t.inline {
		werr = writeInline(cn.bw, r.Body)
		cn.endWrite()
		// A failed write still leaves an answer to read: an upstream that refused the
		// request early (and closed) may have said why.
	} else {
		x.users.Add(1)
		x.sent = make(chan struct{})
		go x.send(r.Body, t.length)
	}
	h, err := cn.head.read(t.method)
	if err != nil {
		x.release(false, true)
		retry, err = x.headError(err, werr)
		if retry && r.Replayable && x.sent != nil {
			<-x.sent
		}
		return nil, retry, err
	}
	kind, length, keepAlive := h.frame(t.method)
	x.keepAlive = keepAlive && werr == nil
	rs.Response = Response{StatusCode: h.status, Header: cn.head.header(&h, rs.values[:]), ContentLength: length, Body: &rs.body}
	rs.body.start(cn.br, x, kind, length)
	return &rs.Response, false, nil
}

// send writes the request body on its own goroutine. It ends when the body is sent, the body
// fails, or the connection does (closed by the other user, or aborted by the context).
func (x *exchange) send(body io.Reader, length int64) {
	readFailed, err := sendBody(x.cn, body, length)
	if err != nil {
		if readFailed {
			err = fmt.Errorf("h1: read request body: %w", err)
		} else {
			err = fmt.Errorf("h1: write request: %w", err)
		}
	}
	x.werr, x.readFailed = err, readFailed
	close(x.sent) // before release: whoever sees the connection closed must see why
	// A connection that failed to write still holds what the upstream answered; the reader
	// keeps it until then. A body that failed mid-way ends the exchange now: the upstream
	// is waiting for bytes that will not come.
	x.release(err == nil, readFailed)
}

// release is one user letting go of the connection. ok: its part went as HTTP/1.1 expects.
// closeNow: the other user must stop too.
func (x *exchange) release(ok, closeNow bool) {
	if !ok {
		x.broken.Store(true)
	}
	if closeNow {
		x.cn.close()
	}
	if x.users.Add(-1) > 0 {
		return
	}
	spent := (x.stop != nil && !x.stop()) || (x.watcher != nil && !x.watcher.Unwatch(x.watchID))
	if x.keepAlive && !spent && !x.broken.Load() && x.cn.br.Buffered() == 0 && !x.cn.closed.Load() {
		// (Buffered bytes would be an answer to no request: the upstream is confused.)
		x.client.put(x.cn)
		return
	}
	x.cn.close()
}

// headError turns a failure to read the answer's head into the error Do returns, and says
// whether it is the kind a retry on a fresh connection may fix.
func (x *exchange) headError(err, werr error) (retry bool, _ error) {
	whole := werr == nil // the request went out whole (an inline one: written and flushed)
	if x.sent != nil {
		select {
		case <-x.sent:
			werr = x.werr
			if x.readFailed {
				return false, werr // the request body broke, not the upstream
			}
			whole = werr == nil
		default:
			whole = false
		}
	}
	if x.ctx.Err() != nil {
		if whole {
			return false, fmt.Errorf("h1: awaiting response: %w: %w", ErrUnanswered, x.ctx.Err())
		}
		return false, fmt.Errorf("h1: awaiting response: %w", x.ctx.Err())
	}
	if errors.Is(err, ErrMalformed) {
		return false, err
	}
	if !x.cn.head.got {
		var ne net.Error
		timeout := errors.As(err, &ne) && ne.Timeout()
		if werr != nil {
			err = fmt.Errorf("%w (after %w)", err, werr)
		}
		return x.cn.reused && !timeout, fmt.Errorf("h1: connection closed before the response: %w", err)
	}
	return false, fmt.Errorf("h1: read response head: %w", err)
}
