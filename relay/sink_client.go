package relay

import (
	"context"
	"errors"
	"net/http"
	"strconv"
)

var (
	errClientGone     = errors.New("client went away")
	errStreamTooLarge = errors.New("stream exceeded size limit")
	errWorkerLost     = &relayError{status: http.StatusBadGateway, message: "worker lost", code: "worker_lost"}
)

// clientWriter is the last sink of every chain and the only one holding the client's
// http.ResponseWriter: it writes the head (with the x-modelrelay-* headers), counts and bounds
// the bytes, and ends an answer the relay must cut short. It also answers the failures the
// relay answers itself, in the route's dialect.
type clientWriter struct {
	w         http.ResponseWriter
	maxStream int64 // 0 = unbounded
	where     *servedBy
	// ender, when set, writes the event that ends a stream cut short: a sink that speaks the
	// stream to the client (a translation) knows its events; else the dialect's own is used.
	ender streamEnder

	status   int
	streamed int64
	reason   string // the message of an error the relay answered itself
	dialect  Dialect
	wrote    bool // the head went out (or the relay's own answer did)
	// sse says the client's answer is an event stream: a failure after its head ends it with
	// an error event. Any other body is torn instead (torn: the handler aborts the connection
	// once the request is logged): an error appended to it would read as part of it, and a
	// cut one must not look complete.
	sse    bool
	torn   bool
	events streamEnd // where the event stream written so far stands (sse only)
	// values backs the x-modelrelay-* headers' values (at most four), in the answer's own
	// memory.
	values [4]string
}

// streamEnder writes the event that ends a stream the relay had to cut short, or reports
// that the stream is not its own.
type streamEnder interface {
	endEvent(message string) ([]byte, bool)
}

// cutShort is a failure a sink met in the answer passing through it: the target must stop
// sending (it reads as errStreamTooLarge, which also cancels a worker's request), and the
// client is told why by the chain's failure answer: an error event on a stream it reads, an
// error answer when it has seen nothing.
type cutShort struct{ err error }

func (c *cutShort) Error() string        { return c.err.Error() }
func (c *cutShort) Unwrap() error        { return c.err }
func (c *cutShort) Is(target error) bool { return target == errStreamTooLarge }

// Head sends the answer's status and its end-to-end headers.
func (c *clientWriter) Head(status int, h http.Header, length int64) (Sink, error) {
	dst := c.w.Header()
	if _, ok := h["Content-Length"]; length >= 0 && !ok { // the target's own, when sent, is copied below
		dst.Set("Content-Length", strconv.FormatInt(length, 10))
	}
	c.sse = isEventStream(h)
	copyEndToEnd(dst, h, nil)
	if _, ok := dst["Content-Type"]; !ok {
		dst["Content-Type"] = nil // no sniffing: the client gets what the target sent
	}
	c.writeHeader(status)
	return c, nil
}

// writeHeader sends the head, naming the model and target that served the answer.
func (c *clientWriter) writeHeader(status int) {
	h, at := c.w.Header(), c.where
	v := c.values[:0] // the names are canonical
	add := func(name, value string) {
		v = append(v, value)
		h[name] = v[len(v)-1 : len(v) : len(v)]
	}
	if at.served != "" {
		add("X-Modelrelay-Model", at.served)
		if at.from != "" {
			add("X-Modelrelay-Fallback-From", at.from)
		}
	}
	if at.target != "" {
		add("X-Modelrelay-Target", at.target)
		add("X-Modelrelay-Queue-Ms", strconv.FormatInt(at.queued.Milliseconds(), 10))
	}
	c.wrote, c.status = true, status
	c.w.WriteHeader(status)
}

// Chunk writes b, and flushes it when asked, so each chunk of a stream reaches the client
// before the next one is read. Past the stream ceiling it ends the answer instead.
func (c *clientWriter) Chunk(b []byte, flush bool) error {
	if c.maxStream > 0 && c.streamed+int64(len(b)) > c.maxStream {
		c.end("stream exceeded size limit", "stream_too_large")
		return errStreamTooLarge
	}
	if _, err := c.w.Write(b); err != nil {
		return errClientGone
	}
	if c.sse {
		c.events.write(b)
	}
	c.streamed += int64(len(b))
	if flush {
		if err := c.flush(); err != nil {
			return errClientGone
		}
	}
	return nil
}

// flush sends what was written. The controller is made where it is used: it does not escape,
// so it costs no allocation, where one kept for the request did.
func (c *clientWriter) flush() error { return http.NewResponseController(c.w).Flush() }

// End has nothing to send: the handler's return completes the answer.
func (c *clientWriter) End() error { return nil }

// fail ends the request with err: a JSON error in the route's dialect before the head (a sink
// that held the answer has sent none), an error event after it. A stream that dies midway ends
// cleanly after that event rather than with a torn connection: SDKs retry torn connections,
// which would repeat the output. A body that is not a stream is torn (see sse).
func (c *clientWriter) fail(err error) {
	var cut *cutShort
	if !errors.As(err, &cut) &&
		(errors.Is(err, errClientGone) || errors.Is(err, errStreamTooLarge) || errors.Is(err, context.Canceled)) {
		return
	}
	var re *relayError
	if errors.Is(err, errTargetLost) {
		re = errWorkerLost
	} else if !errors.As(err, &re) {
		re = errUpstream(err.Error())
	}
	if c.wrote {
		code := re.code
		if code == "" {
			code = "worker_lost"
		}
		c.end(re.message, code)
		return
	}
	c.wrote = true
	c.status, c.reason = re.status, re.message
	writeError(c.w, c.dialect, re)
}

// answerWith answers with a handler of the control plane's own (a pool's answer to a failure
// it defines), recording the status it wrote.
func (c *clientWriter) answerWith(answer func(http.ResponseWriter)) {
	c.wrote = true
	sw := statusWriter{ResponseWriter: c.w}
	answer(&sw)
	c.status = sw.status
}

// end cuts short an answer the client has started reading: a stream ends with an error event,
// any other body is torn. A stream whose final event went out whole is not cut: the client
// has the whole answer, and nothing may follow that event.
func (c *clientWriter) end(message, code string) {
	if !c.sse {
		c.torn = true
		return
	}
	if c.events.over() {
		return
	}
	event, ok := []byte(nil), false
	if c.ender != nil {
		event, ok = c.ender.endEvent(message)
	}
	if !ok {
		event = streamErrorEvent(c.dialect, message, code)
	}
	c.w.Write(event)
	c.flush()
}
