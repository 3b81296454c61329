package relay

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"modelrelay/protocol"
)

// Gate states: whether the first byte or the request timeout won the race.
const (
	gateWaiting int32 = iota
	gateStarted
	gateExpired
)

var (
	errClientGone     = errors.New("client went away")
	errStreamTooLarge = errors.New("stream exceeded size limit")
	errWorkerLost     = &relayError{status: http.StatusBadGateway, message: "worker lost", code: "worker_lost"}
)

// responder writes one request's answer to the client. It is owned by the request's goroutine;
// only the gate is shared, with the request-timeout timer.
type responder struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	dialect   Dialect
	maxStream int64
	streamed  int64
	started   bool
	status    int
	gate      atomic.Int32
	arrival   time.Time
	ttfb      time.Duration
}

func newResponder(w http.ResponseWriter, d Dialect, maxStream int64, arrival time.Time) *responder {
	return &responder{w: w, rc: http.NewResponseController(w), dialect: d, maxStream: maxStream, arrival: arrival}
}

// expire is the request timeout's side of the race: true means nothing was sent and nothing
// will be, so the caller may answer 504.
func (o *responder) expire() bool { return o.gate.CompareAndSwap(gateWaiting, gateExpired) }

func (o *responder) begin() error {
	if o.started {
		return nil
	}
	if !o.gate.CompareAndSwap(gateWaiting, gateStarted) {
		return errRequestTimeout
	}
	o.started = true
	o.ttfb = time.Since(o.arrival)
	return nil
}

// writeHead sends the target's status and its end-to-end headers.
func (o *responder) writeHead(status int, h http.Header) error {
	if err := o.begin(); err != nil {
		return err
	}
	dst := o.w.Header()
	listed := protocol.ConnectionListed(h.Values("Connection"))
	for name, values := range h {
		if protocol.EndToEnd(name, listed) {
			dst[name] = values
		}
	}
	if _, ok := dst["Content-Type"]; !ok {
		dst["Content-Type"] = nil // no sniffing: the client gets what the target sent
	}
	o.status = status
	o.w.WriteHeader(status)
	return nil
}

// startEventStream sends the headers of a relayed stream when its first chunk arrives.
func (o *responder) startEventStream() error {
	if o.started {
		return nil
	}
	if err := o.begin(); err != nil {
		return err
	}
	h := o.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	o.status = http.StatusOK
	o.w.WriteHeader(http.StatusOK)
	return nil
}

// writeChunk writes b and flushes it, so each chunk reaches the client before the next one
// is read. Past the stream ceiling it ends the stream with an error event instead.
func (o *responder) writeChunk(b []byte, flush bool) error {
	if o.maxStream > 0 && o.streamed+int64(len(b)) > o.maxStream {
		o.w.Write(o.dialect.streamErrorEvent("stream exceeded size limit", "stream_too_large"))
		o.rc.Flush()
		return errStreamTooLarge
	}
	if _, err := o.w.Write(b); err != nil {
		return errClientGone
	}
	o.streamed += int64(len(b))
	if flush {
		if err := o.rc.Flush(); err != nil {
			return errClientGone
		}
	}
	return nil
}

// fail ends the request with err: a JSON error in the route's dialect before the first byte,
// an SSE error event after it. A stream that dies midway ends cleanly after that event rather
// than with a torn connection: SDKs retry torn connections, which would repeat the output.
func (o *responder) fail(err error) {
	if errors.Is(err, errClientGone) || errors.Is(err, errStreamTooLarge) || errors.Is(err, context.Canceled) {
		return
	}
	var re *relayError
	if errors.Is(err, errTargetLost) {
		re = errWorkerLost
	} else if !errors.As(err, &re) {
		re = errUpstream(err.Error())
	}
	if o.started {
		code := re.code
		if code == "" {
			code = "worker_lost"
		}
		o.w.Write(o.dialect.streamErrorEvent(re.message, code))
		o.rc.Flush()
		return
	}
	o.started = true
	o.status = re.status
	writeError(o.w, o.dialect, re)
}

// statusRecorder remembers the status a handler wrote, for metrics.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}
