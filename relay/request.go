package relay

import (
	"container/list"
	"net/http"
	"time"
)

// reqState is where a request is in its life. Transitions between queued and assigned happen
// under the pool's mutex; the request's own goroutine owns everything after that.
type reqState uint8

const (
	stateNew      reqState = iota
	stateQueued            // waiting in its pool's FIFO
	stateAssigned          // a member took it; the request goroutine runs the attempt
	stateDone              // answered, failed or cancelled: nothing may assign it again
)

// Request is one client call on its way through a pool.
type Request struct {
	ID           string
	Model        string
	Path         string // endpoint path with query, as the target receives it
	Streaming    bool
	Body         []byte
	Header       http.Header // end-to-end request headers, already filtered
	Dialect      Dialect
	Method       string
	Host         string        // the client's Host header (circuit replicas see it)
	stream       *streamedBody // pass-through: the client's body, streamed instead of Body
	streamLength int64         // its announced length (-1 unknown)

	// Translation (see convert.go): the route's counterpart in the other family, the request
	// as the client sent it and as a target of the other family receives it (built on first
	// need).
	route   route
	native  *wire
	foreign *wire

	arrival   time.Time
	requeues  int
	state     reqState      // guarded by pool.mu
	elem      *list.Element // guarded by pool.mu: place in the pool's queue while queued
	modelElem *list.Element // guarded by pool.mu: place in the queue of its model
	order     int64         // guarded by pool.mu: queue position (requeues get smaller ones)
	handoff   chan handoff  // capacity 1: the pool's answer to a queued request
	// dispatched, when set, runs once a target has taken the request: the body no longer
	// counts against the server's budget of bodies waiting.
	dispatched func()
}

// handoff is what a waiting request receives: the member that took it, or why it never will.
type handoff struct {
	m   *member
	err error
}

// relayError is an error the relay answers itself, in the route's dialect.
type relayError struct {
	status  int
	message string
	code    string // OpenAI "code", optional
}

func (e *relayError) Error() string { return e.message }

var (
	errQueueFull      = &relayError{http.StatusTooManyRequests, "queue full", "queue_full"}
	errQueueTimeout   = &relayError{http.StatusGatewayTimeout, "queue timeout: no worker available within deadline", ""}
	errRequestTimeout = &relayError{http.StatusGatewayTimeout, "request timeout", ""}
	errRequeueLimit   = &relayError{http.StatusServiceUnavailable, "requeue attempts exhausted", ""}
	errShuttingDown   = &relayError{http.StatusServiceUnavailable, "server is shutting down", ""}
	errPoolRemoved    = &relayError{http.StatusServiceUnavailable, "pool removed", ""}
	errNoReplica      = &relayError{http.StatusServiceUnavailable, "no healthy upstream available", ""}
	errAllRefused     = &relayError{http.StatusBadGateway, "upstream error: every upstream refused the connection", ""}
)

func errNoProvider(model string) *relayError {
	return &relayError{http.StatusNotFound, "no provider for model " + model, "model_not_found"}
}

func errUpstream(detail string) *relayError {
	return &relayError{http.StatusBadGateway, "upstream error: " + detail, ""}
}

// maxRequeues is how many times a request may go back to the queue after losing its target.
const maxRequeues = 3
