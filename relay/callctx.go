package relay

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// callCtx is the context a call is served under below the relay's stages: the client's, which
// ends when the client goes, and ended also by the relay itself with a cause (the request's
// timeout, a hard stop). It is one allocation, with no context of its own beneath it: a
// cancellable child of the client's context, with the upstream client's context.AfterFunc on
// that child, cost a request eight allocations and two levels of cancellation; this and the
// upstream call's one registration on the client's context cost five (four fewer allocations
// in BenchmarkStaticRequest, and about 4% of the relay's CPU per request under load).
//
// The rule it keeps is context.Context's: Done is closed, and Err is non-nil, once either the
// client's context ends or end is called. Its Done channel is made only when something waits on
// it (a queued request, a worker's call, a dial): an upstream call watches it through Watch
// instead (h1.Watcher), which registers on the client's context alone. causeOf reads why it
// ended; context.Cause, which cannot see the relay's cause, is not used on it.
type callCtx struct {
	client context.Context
	ended  atomic.Bool // the relay ended the call: cause is set

	mu    sync.Mutex
	cause error
	done  chan struct{} // made by the first Done; closed when the call ends
	// closed says done is closed; unhook undoes the registration that closes it when the
	// client's context ends.
	closed bool
	unhook func() bool
	// The upstream calls in flight (Watch to Unwatch), each aborted by end and by the
	// client's context ending; backed by one while there is one.
	watches []watch
	one     [1]watch
	lastID  uint64
}

// watch is one upstream call's registration.
type watch struct {
	id         uint64
	abort      func()
	clientStop func() bool // undoes the registration on the client's context
	ran        bool        // end ran abort
}

func newCallCtx(client context.Context) *callCtx { return &callCtx{client: client} }

func (c *callCtx) Deadline() (time.Time, bool) { return c.client.Deadline() }
func (c *callCtx) Value(key any) any           { return c.client.Value(key) }

func (c *callCtx) Err() error {
	if c.ended.Load() {
		return context.Canceled
	}
	return c.client.Err()
}

// Done returns a channel closed when the call ends, made on the first call.
func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.cause != nil || c.client.Err() != nil {
			c.closeDone()
		} else {
			c.unhook = context.AfterFunc(c.client, c.clientEnded)
		}
	}
	return c.done
}

func (c *callCtx) clientEnded() {
	c.mu.Lock()
	c.closeDone()
	c.mu.Unlock()
}

// closeDone closes done once. c.mu is held.
func (c *callCtx) closeDone() {
	if !c.closed {
		c.closed = true
		close(c.done)
	}
}

// end ends the call with cause, as a context's cancel does: only the first end counts, and none
// once the client's context has ended (its cause stands). The upstream call in flight is
// aborted on this goroutine (every one in flight), and the client's context is let go.
func (c *callCtx) end(cause error) {
	c.mu.Lock()
	aborts := make([]func(), 0, 2) // on the stack: one call in flight, two at most in practice
	if c.cause == nil && c.client.Err() == nil {
		c.cause = cause
		c.ended.Store(true)
		for i := range c.watches {
			if w := &c.watches[i]; !w.ran {
				w.ran = true
				aborts = append(aborts, w.abort)
			}
		}
	}
	// One side or the other has ended the call: Done is closed here, not left to the
	// registration on the client's context, which unhook may stop before it runs.
	if c.done != nil {
		c.closeDone()
	}
	unhook := c.unhook
	c.unhook = nil
	c.mu.Unlock()
	if unhook != nil {
		unhook()
	}
	for _, abort := range aborts {
		abort()
	}
}

// reason is why the relay ended the call; nil while it has not.
func (c *callCtx) reason() error {
	if !c.ended.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// Watch registers the abort of one upstream call (h1.Watcher): run by end, or when the
// client's context ends (both may run it: it is idempotent); at once if the relay has ended
// the call already. The client's context gets a registration of its own, so that a client
// gone aborts the call without anyone waiting on Done.
func (c *callCtx) Watch(abort func()) uint64 {
	stop := context.AfterFunc(c.client, abort)
	c.mu.Lock()
	c.lastID++
	ended := c.cause != nil
	if c.watches == nil {
		c.watches = c.one[:0]
	}
	c.watches = append(c.watches, watch{id: c.lastID, abort: abort, clientStop: stop, ran: ended})
	id := c.lastID
	c.mu.Unlock()
	if ended {
		abort()
	}
	return id
}

// Unwatch takes the registration back and reports whether its abort had not run
// (h1.Watcher). An id not registered reports false: nothing vouches for the connection.
func (c *callCtx) Unwatch(id uint64) bool {
	c.mu.Lock()
	var w watch
	found := false
	for i := range c.watches {
		if c.watches[i].id == id {
			w, found = c.watches[i], true
			last := len(c.watches) - 1
			c.watches[i] = c.watches[last]
			c.watches[last] = watch{}
			c.watches = c.watches[:last]
			break
		}
	}
	c.mu.Unlock()
	if !found {
		return false
	}
	return w.clientStop() && !w.ran
}

// causeOf is why ctx ended: the relay's cause for a call it ended, else the context's own.
func causeOf(ctx context.Context) error {
	if c, ok := ctx.(*callCtx); ok {
		if err := c.reason(); err != nil {
			return err
		}
		return context.Cause(c.client)
	}
	return context.Cause(ctx)
}
