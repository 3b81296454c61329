package relay

import (
	"net/http"
	"sync/atomic"
	"time"
)

// Gate states: whether the first byte or the request timeout won the race.
const (
	gateWaiting int32 = iota
	gateStarted
	gateExpired
)

// commitSink marks the moment an answer becomes the client's: the first head past the hold
// wins the race against the request timeout (after it, the timeout answers nothing, even
// while a later sink holds the answer whole) and sets the time to first byte. One per
// request: the gate is shared with the request-timeout timer.
type commitSink struct {
	next    Sink
	gate    atomic.Int32
	done    bool // a head passed: the request is answered by what follows
	arrival time.Time
	ttfb    time.Duration
}

func (c *commitSink) wrap(next Sink) Sink {
	c.next = next
	return c
}

// expire is the request timeout's side of the race: true means nothing was sent and nothing
// will be, so the caller may answer 504.
func (c *commitSink) expire() bool { return c.gate.CompareAndSwap(gateWaiting, gateExpired) }

func (c *commitSink) Head(status int, h http.Header, length int64) (Sink, error) {
	if !c.done {
		if !c.gate.CompareAndSwap(gateWaiting, gateStarted) {
			return nil, errRequestTimeout
		}
		c.done = true
		c.ttfb = time.Since(c.arrival)
	}
	return c.next.Head(status, h, length)
}

func (c *commitSink) Chunk(b []byte, flush bool) error { return c.next.Chunk(b, flush) }

func (c *commitSink) End() error { return c.next.End() }
