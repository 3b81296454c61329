package relay

import (
	"container/list"
	"errors"
	"net/http"
	"strconv"
	"time"

	"modelrelay/relay/endpoint"
	"modelrelay/relay/prefix"
)

// reqState is where a request is in its life. Transitions between queued and assigned happen
// under the pool's mutex; the request's own goroutine owns everything after that.
type reqState uint8

const (
	stateNew      reqState = iota
	stateQueued            // waiting in its pool's queue
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

	// endpoint is the inference call the client made (the zero Endpoint for a pass-through).
	endpoint endpoint.Endpoint
	// modelAt is where the model member lies in the client's family's body (Body, or
	// native.body while translated): a fallback replaces it there.
	modelAt span
	// Translation (see convert.go): the request as the client sent it and as a target of the
	// other family receives it (built on first need).
	native     *wire
	foreign    *wire
	translated bool // req is dressed as foreign
	// responses is what a Responses call carries besides its body (nil for other calls).
	responses *responsesCall
	// askedUsage: the relay asked an OpenAI stream for its usage chunk, which the client did
	// not ask for (it is taken out of the answer).
	askedUsage bool

	maxLatency time.Duration  // x_pool_options.max_latency_ms: refuse rather than wait longer (0 = any)
	priority   priority       // guarded by pool.mu while queued
	prefer     string         // x_pool_options.prefer_gpu: a target id or name
	prompt     *prefix.Prompt // cache-aware routing: session key and prompt blocks (nil = none)

	arrival   time.Time
	requeues  int
	state     reqState      // guarded by pool.mu
	elem      *list.Element // guarded by pool.mu: place in the pool's queue while queued
	modelElem *list.Element // guarded by pool.mu: place in the queue of its model
	order     int64         // guarded by pool.mu: queue position (requeues get smaller ones)
	handoff   chan handoff  // capacity 1: the pool's answer to a queued request (made when it queues)
	// forwarded backs the X-Forwarded-* values of Header (forwardHeaders).
	forwarded [3]string
	// waiting, when set, is the body's hold on the server's budget of bodies waiting, given
	// back once a target has taken the request.
	waiting *bodyReader
}

// retarget points req at the next model of its chain: the client's request, with that model
// in the body (translation, if any, is built again for it).
func (req *Request) retarget(model string) error {
	if req.native != nil {
		req.Path, req.Body, req.Header = req.native.path, req.native.body, req.native.header
		req.dropForeign()
		req.native, req.translated = nil, false
	}
	body, at, err := withModel(req.Body, req.modelAt, model)
	if err != nil {
		return err
	}
	req.Model, req.Body, req.modelAt = model, body, at
	req.requeues, req.state = 0, stateNew
	return nil
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
	code    string        // OpenAI "code", optional
	wait    time.Duration // estimated wait, for Retry-After on 429 and 503 (0 = unknown)
}

func (e *relayError) Error() string { return e.message }

// Is makes one error of a kind match another with its own estimated wait.
func (e *relayError) Is(target error) bool {
	t, ok := target.(*relayError)
	return ok && t.status == e.status && t.message == e.message
}

// busy is err (a 429 or 503) with the wait a client should expect before trying again.
func busy(err *relayError, wait time.Duration) *relayError {
	c := *err
	c.wait = wait
	return &c
}

// noReplica is errNoReplica with the time until a target may be back.
func noReplica(wait time.Duration) *relayError { return busy(errNoReplica, wait) }

// retryAfter is the Retry-After value for err: its estimated wait in whole seconds, rounded
// up and clamped to 1..60 (1 when nothing is known).
func retryAfter(err error) string {
	var re *relayError
	secs := 1
	if errors.As(err, &re) && re.wait > 0 {
		secs = int(min((re.wait+time.Second-1)/time.Second, 60))
	}
	return strconv.Itoa(max(secs, 1))
}

// retryAfterSeconds is an answer's Retry-After in whole seconds (at least 1; 1 when it has
// none or gives a date).
func retryAfterSeconds(h http.Header) int {
	n, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

var (
	errQueueFull      = &relayError{status: http.StatusTooManyRequests, message: "queue full", code: "queue_full"}
	errTooSlow        = &relayError{status: http.StatusTooManyRequests, message: "estimated wait exceeds max_latency_ms", code: "max_latency_exceeded"}
	errQueueTimeout   = &relayError{status: http.StatusGatewayTimeout, message: "queue timeout: no worker available within deadline"}
	errRequestTimeout = &relayError{status: http.StatusGatewayTimeout, message: "request timeout"}
	errRequeueLimit   = &relayError{status: http.StatusServiceUnavailable, message: "requeue attempts exhausted"}
	errShuttingDown   = &relayError{status: http.StatusServiceUnavailable, message: "server is shutting down"}
	errPoolRemoved    = &relayError{status: http.StatusServiceUnavailable, message: "pool removed"}
	errNoReplica      = &relayError{status: http.StatusServiceUnavailable, message: "no healthy upstream available"}
	errAllRefused     = &relayError{status: http.StatusBadGateway, message: "upstream error: every upstream refused the connection"}
	// errPreviousResponse: a Responses call continues a response the relay does not hold
	// (unknown, expired, deleted, or another key's), for a target that needs it expanded.
	errPreviousResponse = &relayError{status: http.StatusNotFound, code: "previous_response_not_found",
		message: "previous response not found: previous_response_id names no stored response of yours (unknown, expired or deleted)"}
)

func errNoProvider(model string) *relayError {
	return &relayError{status: http.StatusNotFound, message: "no provider for model " + model, code: "model_not_found"}
}

func errUpstream(detail string) *relayError {
	return &relayError{status: http.StatusBadGateway, message: "upstream error: " + detail}
}

// maxRequeues is how many times a request may go back to the queue after losing its target.
const maxRequeues = 3
