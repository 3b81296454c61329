package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"modelrelay/relay/usage"
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
	length    int64 // of a relayed answer when the target announced it, else -1
	started   bool
	status    int
	// sse says the client's answer is an event stream: a failure after its head ends it with
	// an error event. Any other body is torn instead (torn: the handler aborts the connection
	// once the request is logged): an error appended to it would read as part of it, and a
	// cut one must not look complete.
	sse     bool
	torn    bool
	reason  string // the message of an error the relay answered itself
	gate    atomic.Int32
	arrival time.Time
	ttfb    time.Duration

	// Translation (see convert.go). conv, when set, turns the target's answer into the
	// client's family; held means the answer is being held whole and the client has seen
	// nothing yet. probing means the request went untranslated to a target that may not speak
	// its family: a 404, 405 or 501 then is kept, not written, for the caller to replay the
	// request translated; learn, when set, records what a 2xx said.
	conv    *conversion
	held    bool
	probing bool
	learn   *speech
	// keepFailures holds a 429 or 5xx instead of writing it: the request may still go to
	// another target or down its fallback chain. kept is what was held, either way.
	keepFailures bool
	kept         *heldAnswer
	// where names what serves the request, for the x-modelrelay-* headers.
	where servedBy
	// meta asks for x_pool_meta in a JSON answer (the request carried x_pool_options): such an
	// answer is held whole (bounded) and written with it.
	meta     bool
	metaHeld *heldAnswer
	// tap, when set, reads the tokens a successful answer used as its bytes pass (before any
	// translation: the tap reads either family); tapping while it follows one, followed once
	// it has (the tap is pooled: before that it holds another request's counts). stripUsage
	// takes the usage chunk out of an untranslated OpenAI stream (the relay asked for it, the
	// client did not).
	tap        *usage.Tap
	tapping    bool
	followed   bool
	stripUsage bool
}

// heldAnswer is a target's answer kept instead of written.
type heldAnswer struct {
	status  int
	header  http.Header
	body    []byte
	over    bool        // more came than the bound add was given
	refusal bool        // held as "does not speak this family" (else as a failure)
	conv    *conversion // the conversion it was to go through
	where   servedBy    // what answered it
}

// servedBy is what an answer's x-modelrelay-* headers say: the model that serves the request
// and, after a fallback, the one the client asked for; the target's name and how long the
// request waited for it.
type servedBy struct {
	served, from string
	target       string
	queued       time.Duration
}

// add keeps b, up to limit bytes of body in all.
func (a *heldAnswer) add(b []byte, limit int) {
	if room := limit - len(a.body); len(b) > room {
		b = b[:max(room, 0)]
		a.over = true
	}
	a.body = append(a.body, b...)
}

func newResponder(w http.ResponseWriter, d Dialect, maxStream int64, arrival time.Time) *responder {
	return &responder{w: w, rc: http.NewResponseController(w), dialect: d, maxStream: maxStream, arrival: arrival, length: -1}
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

// failed reports whether a status may send the request to another target: a busy target
// (429) or a failing one (5xx).
func failed(status int) bool { return status == http.StatusTooManyRequests || status >= 500 }

// writeHead sends the target's status and its end-to-end headers.
func (o *responder) writeHead(status int, h http.Header) error {
	refusal := o.probing && refusesDialect(status)
	if refusal || (o.keepFailures && failed(status)) {
		o.kept = &heldAnswer{status: status, header: h, refusal: refusal, conv: o.conv, where: o.where}
		return nil
	}
	o.heard(status)
	if err := o.begin(); err != nil {
		return err
	}
	if success(status) {
		o.follow(strings.HasPrefix(h.Get("Content-Type"), "text/event-stream"))
	}
	if o.conv != nil {
		o.startTranslated(status, h, strings.HasPrefix(h.Get("Content-Type"), "text/event-stream"))
		return nil
	}
	if o.meta && success(status) && strings.HasPrefix(h.Get("Content-Type"), "application/json") && h.Get("Content-Encoding") == "" {
		o.held = true
		o.metaHeld = &heldAnswer{status: status, header: h}
		return nil
	}
	dst := o.w.Header()
	if o.length >= 0 {
		dst.Set("Content-Length", strconv.FormatInt(o.length, 10))
	}
	o.sse = strings.HasPrefix(h.Get("Content-Type"), "text/event-stream")
	copyEndToEnd(dst, h, nil)
	if _, ok := dst["Content-Type"]; !ok {
		dst["Content-Type"] = nil // no sniffing: the client gets what the target sent
	}
	o.writeHeader(status)
	return nil
}

// writeHeader sends the head of a target's answer, naming the model and target that served it.
func (o *responder) writeHeader(status int) {
	h, at := o.w.Header(), &o.where
	if at.served != "" {
		h.Set("X-Modelrelay-Model", at.served)
		if at.from != "" {
			h.Set("X-Modelrelay-Fallback-From", at.from)
		}
	}
	if at.target != "" {
		h.Set("X-Modelrelay-Target", at.target)
		h.Set("X-Modelrelay-Queue-Ms", strconv.FormatInt(at.queued.Milliseconds(), 10))
	}
	o.status = status
	o.w.WriteHeader(status)
}

// startEventStream sends the headers of a relayed stream when its first chunk arrives.
func (o *responder) startEventStream() error {
	if o.started {
		return nil
	}
	o.heard(http.StatusOK)
	if err := o.begin(); err != nil {
		return err
	}
	o.follow(true)
	if o.conv != nil {
		o.startTranslated(http.StatusOK, nil, true)
		return nil
	}
	h := o.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	o.sse = true
	o.writeHeader(http.StatusOK)
	return nil
}

// follow starts reading the usage of a successful answer, a stream or a whole body.
func (o *responder) follow(stream bool) {
	if o.tap == nil || o.tapping {
		return
	}
	mode := usage.JSON
	switch {
	case stream && o.stripUsage && o.conv == nil:
		mode = usage.StreamStrip
	case stream:
		mode = usage.Stream
	}
	o.tap.Reset(mode)
	o.tapping, o.followed = true, true
}

// usage is what the answer reported using (nothing unless a successful answer was followed);
// it ends the tap's reading.
func (o *responder) usage() usage.Counts {
	if !o.followed {
		return usage.Counts{}
	}
	if o.tapping {
		o.tapping = false
		o.tap.Close()
	}
	return o.tap.Counts()
}

// heard records, for a probe, that the target answered status to the untranslated route.
func (o *responder) heard(status int) {
	if o.learn != nil && success(status) {
		o.learn.heardSpeaks(o.dialect, time.Now())
		o.learn = nil
	}
}

// startTranslated starts a translated answer: a 2xx event stream to a client that asked for a
// stream is translated as it comes, head first; anything else is held until it is whole.
func (o *responder) startTranslated(status int, h http.Header, eventStream bool) {
	if eventStream && success(status) && o.conv.streaming {
		o.startTranslatedStream(status, h)
		return
	}
	o.held = true
	o.conv.hold(status, h, eventStream)
}

// startTranslatedStream sends the head of a translated event stream.
func (o *responder) startTranslatedStream(status int, h http.Header) {
	dst := o.w.Header()
	copyRewrittenHead(dst, h, o.conv.name())
	dst.Set("Content-Type", "text/event-stream")
	dst.Set("Cache-Control", "no-cache")
	dst.Del("Content-Length")
	o.conv.startStream()
	o.sse = true
	o.writeHeader(status)
}

// setLength announces the length of the answer the target is about to send; writeHead uses
// it when the answer is relayed as it is (a translated one gets its own).
func (o *responder) setLength(n int64) { o.length = n }

// writeChunk writes b and flushes it, so each chunk reaches the client before the next one
// is read. Past the stream ceiling it ends the stream with an error event instead. A
// translated answer goes through its conversion first.
func (o *responder) writeChunk(b []byte, flush bool) error {
	if k := o.kept; k != nil {
		if k.refusal || len(k.body)+len(b) <= maxErrorBody {
			k.add(b, maxErrorBody)
			return nil
		}
		// Too large to hold: this failure is the answer after all.
		if err := o.writeHeld(k); err != nil {
			return err
		}
	}
	if o.tapping {
		if b = o.tap.Write(b); len(b) == 0 {
			return nil
		}
	}
	if a := o.metaHeld; a != nil {
		if len(a.body)+len(b) <= maxTranslatedBody {
			a.add(b, maxTranslatedBody)
			return nil
		}
		// Too large to hold for x_pool_meta: it goes out as the target sent it.
		o.metaHeld, o.meta, o.held, o.length = nil, false, false, -1
		if err := o.writeHead(a.status, a.header); err != nil {
			return err
		}
		if err := o.emit(a.body, false); err != nil {
			return err
		}
	}
	if c := o.conv; c != nil {
		if c.stream == nil {
			if err := c.keep(b); err != nil {
				o.fail(err) // held: the client has seen nothing, and gets a JSON error
				return errStreamTooLarge
			}
			return nil
		}
		out, err := c.stream.Write(b)
		if err != nil {
			o.w.Write(c.stream.Fail(err.Error()))
			o.rc.Flush()
			return errStreamTooLarge
		}
		if len(out) == 0 {
			return nil
		}
		b, flush = out, true
	}
	return o.emit(b, flush)
}

// emit writes bytes in the client's family.
func (o *responder) emit(b []byte, flush bool) error {
	if o.maxStream > 0 && o.streamed+int64(len(b)) > o.maxStream {
		o.end("stream exceeded size limit", "stream_too_large")
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

// fail ends the request with err: a JSON error in the route's dialect before the first byte
// (a held answer has sent none), an SSE error event after it. A stream that dies midway ends
// cleanly after that event rather than with a torn connection: SDKs retry torn connections,
// which would repeat the output. A body that is not a stream is torn (see sse).
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
	if o.started && !o.held {
		code := re.code
		if code == "" {
			code = "worker_lost"
		}
		o.end(re.message, code)
		return
	}
	o.started, o.held = true, false
	o.status, o.reason = re.status, re.message
	writeError(o.w, o.dialect, re)
}

// answerWith answers with a handler of the control plane's own (a pool's answer to a failure
// it defines), recording the status it wrote.
func (o *responder) answerWith(answer func(http.ResponseWriter)) {
	o.started = true
	rec := statusRecorder{ResponseWriter: o.w}
	answer(&rec)
	o.status = rec.status
}

// end cuts short an answer the client has started reading: a stream ends with an error event,
// any other body is torn.
func (o *responder) end(message, code string) {
	if !o.sse {
		o.torn = true
		return
	}
	o.w.Write(o.streamError(message, code))
	o.rc.Flush()
}

// streamError is the event that ends a stream the relay had to cut short.
func (o *responder) streamError(message, code string) []byte {
	if o.conv != nil && o.conv.stream != nil {
		return o.conv.stream.Fail(message)
	}
	return o.dialect.streamErrorEvent(message, code)
}

// writeHeld writes an answer that was held back: through the conversion it was to go
// through, or as the target sent it. A translated one is complete after finish.
func (o *responder) writeHeld(a *heldAnswer) error {
	o.kept, o.probing, o.keepFailures = nil, false, false
	o.conv, o.held, o.where = a.conv, false, a.where
	o.setLength(-1)
	if a.conv == nil {
		o.setLength(int64(len(a.body)))
	}
	if err := o.writeHead(a.status, a.header); err != nil {
		return err
	}
	return o.writeChunk(a.body, false)
}

// finish completes a translated answer once the target is done: the closing events of a
// stream, or the whole translated body of a held answer.
func (o *responder) finish() error {
	if o.tapping {
		o.tapping = false
		// An untranslated stream's last event, held back while it was incomplete.
		if tail := o.tap.Close(); len(tail) > 0 {
			if err := o.emit(tail, true); err != nil {
				return err
			}
		}
	}
	if a := o.metaHeld; a != nil {
		o.metaHeld, o.held = nil, false
		copyRewrittenHead(o.w.Header(), a.header, "")
		return o.writeWhole(a.status, "application/json", o.withMeta(a.body))
	}
	c := o.conv
	if c == nil {
		return nil
	}
	if c.stream != nil {
		if tail := c.stream.Close(); len(tail) > 0 {
			return o.emit(tail, true)
		}
		return nil
	}
	if !o.held {
		return nil
	}
	status, body, estimated, err := c.answer()
	if err != nil {
		return err
	}
	h := o.w.Header()
	copyRewrittenHead(h, c.header, c.name())
	if estimated {
		h.Set("X-Modelrelay-Estimated", "true")
	}
	o.held = false
	if o.meta && success(status) {
		body = o.withMeta(body)
	}
	return o.writeWhole(status, "application/json", body)
}

// writeWhole writes a complete answer the relay holds.
func (o *responder) writeWhole(status int, contentType string, body []byte) error {
	h := o.w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	o.writeHeader(status)
	if _, err := o.w.Write(body); err != nil {
		return errClientGone
	}
	o.streamed += int64(len(body))
	return nil
}

// withMeta adds x_pool_meta to a JSON object answer: where it ran, how long it waited for the
// target, how long the target took. Anything but an object is left as it is.
func (o *responder) withMeta(body []byte) []byte {
	end := len(bytes.TrimRight(body, " \t\r\n")) - 1
	if end < 1 || body[end] != '}' {
		return body
	}
	inner := bytes.TrimRight(body[:end], " \t\r\n")
	if len(inner) == 0 {
		return body // a lone "}": not an object
	}
	meta, _ := json.Marshal(struct {
		Target      string `json:"target"`
		QueueMS     int64  `json:"queue_ms"`
		InferenceMS int64  `json:"inference_ms"`
	}{o.where.target, o.where.queued.Milliseconds(), (time.Since(o.arrival) - o.where.queued).Milliseconds()})
	out := make([]byte, 0, len(body)+len(meta)+20)
	out = append(out, inner...)
	if inner[len(inner)-1] != '{' {
		out = append(out, ',')
	}
	out = append(append(append(out, `"x_pool_meta":`...), meta...), '}')
	return append(out, body[end+1:]...)
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
