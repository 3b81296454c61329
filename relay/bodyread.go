package relay

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"
)

// Body reading is where a client holds the relay's memory before any target is involved, so
// it is bounded three ways: in size (max_body_bytes, 413), in time (body_read_timeout and a
// minimum rate, 408) and in total (body_budget_bytes across every body not yet dispatched,
// and every translated body for the life of its request: see chargedForeignWire; 503). The
// announced Content-Length is never trusted for an allocation.

// BodyLimits bound request-body reading. Zero values take the defaults.
type BodyLimits struct {
	ReadTimeout time.Duration // whole body within this (30 s)
	MinRate     int64         // bytes/s after MinRateGrace; 0 = default 4 KiB/s, <0 = off
	Budget      int64         // bytes held in bodies not yet dispatched and in translated ones, server-wide (256 MiB)
}

// minRateGrace is how long a body may take before the minimum rate applies: a client on a
// slow link still gets to send a normal prompt.
const minRateGrace = 5 * time.Second

// initialBodyBuffer is the most an announced length may pre-allocate.
const initialBodyBuffer = 32 << 10

// lingerBytes and lingerTime bound how much of a refused body the relay reads and discards so
// that the client, still sending, sees the answer instead of a connection reset (discardBody).
const (
	lingerBytes = 256 << 20
	lingerTime  = 10 * time.Second
)

func (l *BodyLimits) fill() {
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = 30 * time.Second
	}
	if l.MinRate == 0 {
		l.MinRate = 4 << 10
	}
	if l.Budget <= 0 {
		l.Budget = 256 << 20
	}
}

// bodyBudget counts the bytes held in request bodies that no target has taken yet, and in
// translated bodies.
type bodyBudget struct {
	limit int64
	held  atomic.Int64
}

// take reserves n bytes; false means the budget is spent and nothing was reserved.
func (b *bodyBudget) take(n int64) bool {
	if b.held.Add(n) > b.limit {
		b.held.Add(-n)
		return false
	}
	return true
}

func (b *bodyBudget) give(n int64) { b.held.Add(-n) }

// Why a body could not be read; each is counted under its own reason.
var (
	errBodyMalformed = &relayError{status: http.StatusBadRequest, message: "request body is malformed (bad chunked encoding)"}
	errBodyTruncated = &relayError{status: http.StatusBadRequest, message: "request body ended before its announced length"}
	errBodyTimeout   = &relayError{status: http.StatusRequestTimeout, message: "request body not received in time"}
	errBodyBudget    = &relayError{status: http.StatusServiceUnavailable, message: "server is holding too many request bodies; retry shortly"}
)

func tooLarge(limit int64) *relayError {
	return &relayError{status: http.StatusRequestEntityTooLarge, message: fmt.Sprintf("request body exceeds %d bytes", limit)}
}

// bodyReader reads one request body within the limits. held is what it reserved from the
// budget; release returns it (idempotent), which the request does once a target takes it.
type bodyReader struct {
	r      *http.Request
	rc     http.ResponseController // held by value: one allocation fewer
	limits *BodyLimits
	budget *bodyBudget
	max    int64
	held   int64
}

func (b *bodyReader) release() {
	if b.held > 0 {
		b.budget.give(b.held)
		b.held = 0
	}
}

// read returns the whole body, or a relayError to answer (errClientGone: answer nothing).
func (b *bodyReader) read() ([]byte, error) {
	if b.r.ContentLength > b.max {
		return nil, tooLarge(b.max)
	}
	start := time.Now()
	deadline := start.Add(b.limits.ReadTimeout)
	// Without a connection to set deadlines on (a test recorder) the limits in size still hold.
	timed := b.rc.SetReadDeadline(b.nextDeadline(start, deadline, 0)) == nil
	if timed {
		defer b.rc.SetReadDeadline(time.Time{})
	}
	size := int64(initialBodyBuffer)
	if b.r.ContentLength >= 0 && b.r.ContentLength < size {
		size = b.r.ContentLength + 1 // +1: EOF is seen without growing
	}
	if !b.budget.take(size) {
		return nil, errBodyBudget
	}
	b.held = size
	buf := make([]byte, 0, size)
	for {
		n, err := b.r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > b.max {
			return nil, tooLarge(b.max)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, classifyBodyError(err)
		}
		if timed && n > 0 && int64(len(buf)) != b.r.ContentLength {
			// (A body whole by its length ends with no read of the connection: the next read
			// returns EOF at once, and the deadline it would move is a timer change for
			// nothing.)
			b.rc.SetReadDeadline(b.nextDeadline(start, deadline, int64(len(buf))))
		}
		if len(buf) == cap(buf) {
			grown := min(2*int64(cap(buf)), b.max+1)
			if b.r.ContentLength >= 0 {
				// Growth stops at the announced length (net/http reads no further): only a
				// smaller buffer, never a larger one, on the client's word.
				grown = min(grown, b.r.ContentLength+1)
			}
			if !b.budget.take(grown - int64(cap(buf))) {
				return nil, errBodyBudget
			}
			b.held += grown - int64(cap(buf))
			buf = append(make([]byte, 0, grown), buf...)
		}
	}
}

// nextDeadline is when the next byte must have arrived: the minimum rate allows got/rate
// seconds past the grace period for the bytes so far, never past the whole-body deadline.
func (b *bodyReader) nextDeadline(start, deadline time.Time, got int64) time.Time {
	if b.limits.MinRate < 0 {
		return deadline
	}
	d := start.Add(minRateGrace + time.Duration(float64(got)/float64(b.limits.MinRate)*float64(time.Second)))
	if d.After(deadline) {
		return deadline
	}
	return d
}

// classifyBodyError tells a client that left from one that sent a broken or slow body.
func classifyBodyError(err error) error {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return errBodyTimeout
	case errors.Is(err, io.ErrUnexpectedEOF):
		// The client closed its sending side early; it may still be reading (half-close).
		return errBodyTruncated
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed), errors.Is(err, syscall.EPIPE):
		return errClientGone
	case errors.Is(err, http.ErrBodyReadAfterClose):
		return errClientGone
	}
	// net/http's chunked reader reports framing errors as plain errors ("malformed chunked
	// encoding", "invalid byte in chunk length", ...): the body is broken, not gone.
	return errBodyMalformed
}

// refuseBody answers a body error. A refused body the client is still sending is read and
// discarded (bounded) after the answer, so the client sees the answer instead of a reset.
func (s *Server) refuseBody(w http.ResponseWriter, r *http.Request, d Dialect, err error) (status int) {
	var re *relayError
	if !errors.As(err, &re) {
		s.metrics.bodyErrors.WithLabelValues("client_gone").Inc()
		s.log.Info("client left while sending its body", "route", r.URL.Path, "peer", r.RemoteAddr)
		return 0
	}
	reason := bodyErrorReason(re)
	s.metrics.bodyErrors.WithLabelValues(reason).Inc()
	if reason != "invalid" {
		s.log.Info("request body refused", "reason", reason, "status", re.status, "route", r.URL.Path, "peer", r.RemoteAddr)
	}
	linger := reason == "too_large" || reason == "over_budget"
	if linger || reason == "timeout" || reason == "truncated" || reason == "malformed" {
		// The connection's framing is no longer trustworthy (or the client is slow): one
		// answer, then close.
		w.Header().Set("Connection", "close")
	}
	rc := http.NewResponseController(w)
	if linger {
		rc.EnableFullDuplex() // keep the body readable after the answer is written
	}
	writeError(w, d, re)
	if linger {
		rc.Flush()
		discardBody(rc, r)
	}
	return re.status
}

// discardBody reads and drops, within lingerBytes and lingerTime, what the client still sends
// of a body the relay will not use. A connection closed with request bytes unread in its
// receive buffer, or that receives more after the close, is reset by the kernel: the client
// gets a write error while still sending, or loses the part of the answer it has not read,
// and an SDK reports a connection error (and retries) instead of the answer.
func discardBody(rc *http.ResponseController, r *http.Request) {
	if r.Header.Get("Expect") != "" {
		return // the client sends nothing before a 100 Continue, which a refusal never asks for
	}
	rc.SetReadDeadline(time.Now().Add(lingerTime))
	io.CopyN(io.Discard, r.Body, lingerBytes)
}

// WholeAnswers wraps the server's outermost handler so that an answer given without reading
// the request body reaches the client whole: a 401 decided on the headers, a 403, 404, 405,
// a 429 from the guess throttle, a 503 while draining. net/http discards up to 256 KiB of
// an unread body itself, but only on a connection it keeps open; when the connection closes
// after the answer (the client sent Connection: close or spoke HTTP/1.0, or the body is
// larger) it closes with the body unread, and the reset loses the answer (discardBody). So a
// body no handler touched is read and discarded here, before the answer goes out, within the
// bounds of a refused oversized body; a handler that read part of its body decides itself
// (refuseBody). HTTP/2 streams end on their own, and an upgraded connection's bytes belong
// to the WebSocket. Wrapped twice (a front around Handler), the inner one's discarding counts
// as a read for the outer.
func WholeAnswers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 || r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody ||
			field(r.Header, "Upgrade") != "" || field(r.Header, "Expect") != "" {
			next.ServeHTTP(w, r)
			return
		}
		// The body is swapped in place, as http.MaxBytesReader's users do: the server finishes
		// the request through its own reference to the body, not r.Body.
		body := &watchedBody{ReadCloser: r.Body}
		r.Body = body
		next.ServeHTTP(w, r)
		if !body.read.Load() {
			rc := http.NewResponseController(w)
			discardBody(rc, r)
			rc.SetReadDeadline(time.Time{})
		}
	})
}

// watchedBody is a request body that remembers whether anyone read it. The transport may read
// a pass-through body on its own goroutine, past the handler's return, hence the atomic.
type watchedBody struct {
	io.ReadCloser
	read atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.ReadCloser.Read(p)
}

func bodyErrorReason(re *relayError) string {
	switch {
	case re.status == http.StatusRequestEntityTooLarge:
		return "too_large"
	case re == errBodyMalformed:
		return "malformed"
	case re == errBodyTruncated:
		return "truncated"
	case re == errBodyTimeout:
		return "timeout"
	case re == errBodyBudget:
		return "over_budget"
	}
	return "invalid" // parse errors (not JSON, no model): the client's mistake, not logged
}

// streamedBody is a pass-through body on its way to the target: the minimum rate applies (a
// large upload may take longer than body_read_timeout, a stalled one may not), and its read
// error is kept so the answer names the client's fault rather than the target's.
type streamedBody struct {
	r     io.Reader
	rc    *http.ResponseController
	rate  int64
	start time.Time
	got   int64
	// failed is the first read error other than EOF. The transport reads the body on its own
	// goroutine, which may outlive Do, hence the atomic.
	failed atomic.Pointer[error]
}

// err is why the client's body could not be read, or nil.
func (b *streamedBody) err() error {
	if p := b.failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (b *streamedBody) Read(p []byte) (int, error) {
	if b.rate > 0 {
		b.rc.SetReadDeadline(b.start.Add(minRateGrace + time.Duration(float64(b.got)/float64(b.rate)*float64(time.Second))))
	}
	n, err := b.r.Read(p)
	b.got += int64(n)
	if err != nil && err != io.EOF {
		why := classifyBodyError(err)
		b.failed.CompareAndSwap(nil, &why)
	}
	return n, err
}
