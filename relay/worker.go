package relay

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"modelrelay/protocol"
	"modelrelay/relay/wsconn"
)

// Close reasons the relay protocol defines.
const (
	reasonAuthFailed      = "worker authentication failed"
	reasonRateLimited     = "worker authentication temporarily rate limited"
	reasonProtocolError   = "worker registration protocol error"
	reasonHeartbeat       = "worker heartbeat timed out"
	reasonDrainComplete   = "graceful shutdown complete"
	reasonDrainTimedOut   = "graceful shutdown timed out"
	reasonServerShutdown  = "server shutting down"
	closeHandshakeTimeout = time.Second
	writeTimeout          = 10 * time.Second
	sendBuffer            = 256
	// maxBatch bounds the frames the writer sends in one write: the frames queued behind the
	// first wait no longer than it takes to copy that many.
	maxBatch = 64
)

// workerSession is one relay worker connected over WebSocket: a target in its pool. The
// connection's reader runs on the HTTP handler's goroutine; one writer goroutine owns every
// write, because gorilla/websocket allows only one concurrent writer.
type workerSession struct {
	srv    *Server
	conn   *websocket.Conn
	batch  *wsconn.Conn   // the socket under conn: the writer sends what is queued at once
	reader *wsconn.Reader // the buffer conn's messages are read into
	pool   *Pool
	m      *member
	id     string
	name   string
	log    *slog.Logger
	send   chan *[]byte  // encoded frames, in wsconn buffers the writer releases
	done   chan struct{} // closed once the session starts closing
	wrote  chan struct{} // closed when the writer has exited
	closer sync.Once
	code   int
	reason string

	drainExpired atomic.Bool
	closeBy      atomic.Int64 // unix nanoseconds; once closing, no read may wait past it

	// Suspect state (see checkSilence). readSince is when the reader began waiting for the
	// next frame, 0 while it handles one; pingAt is when the ping being checked was sent (0 =
	// no check pending). Both are monoNanos. flagged says the member is suspect, or about to
	// be: the next frame clears it. silence is the check's timer, owned by the writer.
	// silentSince is when the silence of a suspect worker began (guarded by the pool's mutex).
	readSince   atomic.Int64
	pingAt      atomic.Int64
	flagged     atomic.Bool
	silence     *time.Timer
	silentSince int64

	mu        sync.Mutex
	pending   map[string]*pendingReq
	closed    bool
	drainTime *time.Timer
}

// pendingReq is a request this worker holds, from dispatch until its slot is freed.
type pendingReq struct {
	id        string
	events    eventQueue
	abandoned chan struct{} // the request goroutine stopped listening (cancel)
	lost      chan struct{} // the session ended or drained out; lostErr says how
	lostErr   error
	cancelled bool // guarded by session.mu
	slot      releaser
	grace     *time.Timer
}

type workerEvent struct {
	chunk    string
	complete *protocol.ResponseComplete
	err      error // an error frame for this request
}

// enqueue hands a frame to the writer; false means the session is closing.
func (ws *workerSession) enqueue(frame *[]byte) bool {
	select {
	case ws.send <- frame:
		return true
	case <-ws.done:
		return false
	}
}

func (ws *workerSession) enqueueMessage(m protocol.Message) bool {
	frame := wsconn.Buffer()
	var err error
	if *frame, err = protocol.AppendMarshal(*frame, m); err != nil {
		ws.log.Error("encode frame", "type", m.MessageType(), "err", err)
		return false
	}
	return ws.enqueue(frame)
}

// closeWith starts closing the session with a close frame; the first reason wins.
func (ws *workerSession) closeWith(code int, reason string) {
	ws.closer.Do(func() {
		ws.code, ws.reason = code, reason
		// Keep reading until the peer answers the close frame, but not for long.
		by := time.Now().Add(closeHandshakeTimeout)
		ws.closeBy.Store(by.UnixNano())
		close(ws.done)
		ws.conn.SetReadDeadline(by)
	})
}

func (ws *workerSession) writeLoop() {
	defer close(ws.wrote)
	ping := time.NewTicker(ws.srv.timings.HeartbeatInterval)
	defer ping.Stop()
	for {
		select {
		case frame := <-ws.send:
			if !ws.writeQueued(frame) {
				return
			}
		case <-ping.C:
			// Unconditional: a worker busy streaming to us must still hear from us, or its own
			// silence timer fires.
			sent := time.Now()
			ts := uint64(sent.UnixMilli())
			frame := wsconn.Buffer()
			*frame, _ = protocol.AppendMarshal(*frame, protocol.Ping{TimestampUnixMs: &ts})
			if !ws.write(frame) {
				return
			}
			ws.watchSilence(sent)
		case <-ws.done:
			if ws.code != websocket.CloseAbnormalClosure {
				ws.flushQueued()
				msg := websocket.FormatCloseMessage(ws.code, ws.reason)
				ws.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeHandshakeTimeout))
			}
			return
		}
	}
}

// writeQueued writes frame and the frames queued behind it, up to maxBatch, in one write to
// the socket: under load the requests' frames arrive faster than one write each could carry.
// When the queue runs dry it yields once before the write: the goroutines that are ready to run
// (requests about to send, streams about to pass a chunk) queue their frames meanwhile, which
// took a write from 1.4 frames to ~6 under load, and a writer with nothing else ready to run
// gets the processor straight back.
func (ws *workerSession) writeQueued(frame *[]byte) bool {
	ws.batch.Hold()
	ok := ws.write(frame)
	yielded := false
	for n := 1; ok && n < maxBatch; n++ {
		select {
		case frame = <-ws.send:
			ok = ws.write(frame)
		default:
			if yielded {
				n = maxBatch
				break
			}
			yielded = true
			runtime.Gosched()
		}
	}
	if err := ws.batch.Flush(); err != nil && ok {
		ws.fail()
		return false
	}
	return ok
}

// write sends one frame and releases its buffer; a failed write ends the session (the reader
// then tears it down).
func (ws *workerSession) write(frame *[]byte) bool {
	ws.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	err := ws.conn.WriteMessage(websocket.TextMessage, *frame)
	wsconn.Release(frame)
	if err != nil {
		ws.fail()
		return false
	}
	return true
}

// fail ends a session whose connection can no longer be written to.
func (ws *workerSession) fail() {
	ws.closeWith(websocket.CloseAbnormalClosure, "")
	ws.conn.Close()
}

// flushQueued writes the frames already queued (a register_ack, a graceful_shutdown) before a
// graceful close frame, so the worker learns why it is being closed.
func (ws *workerSession) flushQueued() {
	for {
		select {
		case frame := <-ws.send:
			ws.conn.SetWriteDeadline(time.Now().Add(closeHandshakeTimeout))
			err := ws.conn.WriteMessage(websocket.TextMessage, *frame)
			wsconn.Release(frame)
			if err != nil {
				return
			}
		default:
			return
		}
	}
}

// readLoop processes frames until the connection ends, then tears the session down.
func (ws *workerSession) readLoop() {
	defer ws.teardown()
	// The silence clock restarts before every read, not after every frame: time spent
	// handing a chunk to a slow client is not the worker's silence.
	// The suspect check's clock (readSince) restarts at the same moments.
	timeout := ws.srv.timings.HeartbeatTimeout
	touch := func(string) error {
		now := time.Now()
		deadline := now.Add(timeout)
		if by := ws.closeBy.Load(); by != 0 && by < deadline.UnixNano() {
			deadline = time.Unix(0, by)
		}
		ws.conn.SetReadDeadline(deadline)
		ws.readSince.Store(monoNanos(now))
		return nil
	}
	// A WebSocket ping or pong is a frame too: it restarts both clocks and clears a suspect.
	control := func(data string) error {
		touch(data)
		ws.heard()
		return nil
	}
	ws.conn.SetPingHandler(func(data string) error {
		control(data)
		ws.conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(writeTimeout))
		return nil
	})
	ws.conn.SetPongHandler(control)
	for {
		touch("")
		kind, data, err := ws.reader.Read(ws.conn)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				ws.closeWith(websocket.CloseNormalClosure, reasonHeartbeat)
			} else {
				ws.closeWith(websocket.CloseAbnormalClosure, "")
			}
			return
		}
		ws.readSince.Store(0) // handling a frame is no silence (see checkSilence)
		ws.heard()
		if ws.closing() {
			continue // draining the peer's last frames until its close arrives
		}
		if kind != websocket.TextMessage {
			ws.protocolError("binary frame")
			continue
		}
		msg, err := protocol.DecodeWorkerMessage(data)
		if err != nil {
			ws.protocolError(err.Error())
			continue
		}
		ws.handle(msg)
	}
}

// monoEpoch anchors monoNanos: the suspect check compares instants on the monotonic clock.
var monoEpoch = time.Now()

// monoNanos is t in nanoseconds since monoEpoch, never 0 (0 means "none" where it is stored).
func monoNanos(t time.Time) int64 { return max(int64(t.Sub(monoEpoch)), 1) }

// watchSilence arms the suspect check for the ping sent at sent: SuspectAfter later the
// worker is suspect unless a frame came in between. One check at a time (the writer is the
// only caller): a ping sent while one is pending adds nothing the pending one will not see.
func (ws *workerSession) watchSilence(sent time.Time) {
	if !ws.pingAt.CompareAndSwap(0, monoNanos(sent)) {
		return
	}
	after := ws.srv.timings.SuspectAfter
	if ws.silence == nil {
		ws.silence = time.AfterFunc(after, ws.checkSilence)
	} else {
		ws.silence.Reset(after)
	}
}

// checkSilence runs SuspectAfter after a ping: a worker that sent no frame at all since the
// ping (and whose reader sat waiting for one all along) becomes suspect. A suspect worker
// takes no new requests but keeps those it holds; the next frame of any kind clears it
// (heard), and the heartbeat timeout still closes it if none comes.
//
// The reader stores readSince before it looks at flagged; this stores flagged before it
// looks at readSince, under the pool's mutex. So a frame that races with the check is seen
// by one of the two: either the check finds it and marks nothing, or the frame finds the
// flag and clears the mark once the check is done.
func (ws *workerSession) checkSilence() {
	sent := ws.pingAt.Swap(0)
	if sent == 0 || ws.closing() {
		return
	}
	if since := ws.readSince.Load(); since == 0 || since > sent {
		return // it spoke after the ping, or the reader is busy with a frame
	}
	var marked bool
	var silent time.Duration
	ws.pool.update(ws.m, func(m *member) {
		if m.out != 0 { // gone, or already suspect
			return
		}
		ws.flagged.Store(true)
		since := ws.readSince.Load()
		if since == 0 || since > sent {
			ws.flagged.Store(false)
			return
		}
		m.setOut(outSuspect, true)
		ws.silentSince, marked = since, true
		silent = time.Duration(monoNanos(time.Now()) - since)
	})
	if marked {
		ws.log.Warn("worker suspect: no frame since the last ping; no new requests until it speaks",
			"silent_for", silent.Round(time.Millisecond).String(), "in_flight", ws.held())
	}
}

// heard is called for every frame the worker sends: a suspect worker is healthy again, and
// the pool hands it queued work at once.
func (ws *workerSession) heard() {
	if !ws.flagged.Load() {
		return
	}
	var cleared bool
	var silent time.Duration
	ws.pool.update(ws.m, func(m *member) {
		ws.flagged.Store(false)
		if !m.suspect() {
			return
		}
		m.setOut(outSuspect, false)
		cleared = true
		silent = time.Duration(monoNanos(time.Now()) - ws.silentSince)
	})
	if cleared {
		ws.log.Info("worker recovered: it spoke again", "silent_for", silent.Round(time.Millisecond).String())
	}
}

// held is how many requests the worker holds.
func (ws *workerSession) held() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.pending)
}

func (ws *workerSession) closing() bool {
	select {
	case <-ws.done:
		return true
	default:
		return false
	}
}

func (ws *workerSession) protocolError(detail string) {
	ws.log.Warn("closing worker: protocol error", "detail", detail)
	ws.closeWith(websocket.CloseProtocolError, reasonProtocolError)
}

func (ws *workerSession) handle(msg protocol.Message) {
	switch m := msg.(type) {
	case protocol.ResponseChunk:
		ws.deliver(m.RequestID, workerEvent{chunk: m.Chunk}, false)
	case protocol.ResponseComplete:
		ws.deliver(m.RequestID, workerEvent{complete: &m}, true)
	case protocol.Error:
		if m.RequestID == nil {
			ws.log.Warn("worker reported an error", "code", m.Code, "message", m.Message)
			return
		}
		ws.deliver(*m.RequestID, workerEvent{err: errUpstream(m.Message)}, true)
	case protocol.Pong:
		ws.pool.update(ws.m, func(mem *member) { mem.reported = int(m.CurrentLoad) })
	case protocol.ModelsUpdate:
		models, _ := sanitizeModels(m.Models, ws.srv.opts.MaxModelsPerWorker)
		ws.pool.setModels(ws.m, models, int(m.CurrentLoad))
	case protocol.Register:
		ws.protocolError("second register")
	default:
		ws.protocolError("unexpected " + msg.MessageType())
	}
}

// deliver routes a frame to the request it belongs to. Frames for requests this worker does not
// hold (late chunks after a cancel, unknown ids) are dropped and counted: a stray frame is no
// reason to kill a session that serves other requests.
func (ws *workerSession) deliver(id string, ev workerEvent, final bool) {
	ws.mu.Lock()
	p := ws.pending[id]
	cancelled := p != nil && p.cancelled
	ws.mu.Unlock()
	if p == nil || cancelled {
		if cancelled && final {
			ws.finish(p)
		}
		ws.srv.metrics.strayFrames.Inc()
		return
	}
	if final {
		ws.finish(p) // the slot is free the moment the worker says so
	}
	p.events.push(ev, p.abandoned)
}

// finish forgets p and frees its slot; it runs at most once per request.
func (ws *workerSession) finish(p *pendingReq) {
	ws.mu.Lock()
	_, held := ws.pending[p.id]
	delete(ws.pending, p.id)
	o := outcomeOK // (relay workers have no breaker: this feeds the pool's service time)
	if p.cancelled {
		o = outcomeNone
	}
	ws.mu.Unlock()
	if !held {
		return
	}
	if p.grace != nil {
		p.grace.Stop()
	}
	p.slot.release(o)
}

// cancel tells the worker to stop req; its slot is freed by the worker's response_complete or,
// if that never comes, after the grace period, so a silent worker cannot leak capacity.
func (ws *workerSession) cancel(p *pendingReq, reason protocol.CancelReason) {
	ws.mu.Lock()
	if _, held := ws.pending[p.id]; !held || p.cancelled {
		ws.mu.Unlock()
		return
	}
	p.cancelled = true
	close(p.abandoned)
	p.grace = time.AfterFunc(ws.srv.timings.CancelGrace, func() { ws.finish(p) })
	ws.mu.Unlock()
	ws.enqueueMessage(protocol.Cancel{RequestID: p.id, Reason: reason})
}

// serve sends req to the worker and relays its answer.
func (ws *workerSession) serve(ctx context.Context, req *Request, c call) error {
	p := &pendingReq{
		id:        req.ID,
		events:    newEventQueue(),
		abandoned: make(chan struct{}),
		lost:      make(chan struct{}),
		slot:      c.slot,
	}
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		c.slot.release(outcomeNone)
		return errTargetLost
	}
	ws.pending[p.id] = p
	ws.mu.Unlock()
	if ctx.Err() != nil {
		ws.finish(p)
		return causeOf(ctx)
	}
	// The body goes into the frame as the client sent it, without a copy as a string.
	frame := wsconn.Buffer()
	*frame = protocol.AppendRequest(*frame, protocol.Request{
		RequestID:    req.ID,
		Model:        req.Model,
		EndpointPath: req.Path,
		IsStreaming:  req.Streaming,
		Headers:      wireHeaders(req.Header),
	}, req.Body)
	ws.enqueue(frame)
	out := frameWriter{out: c.out}
	// relayQueued relays the events queued so far; answered means the request is done.
	relayQueued := func() (answered bool, err error) {
		for ev, ok := p.events.take(); ok; ev, ok = p.events.take() {
			if done, err := ws.relay(ev, &out); done || err != nil {
				return true, err
			}
		}
		return false, nil
	}
	for {
		select {
		case <-p.events.ready:
			if answered, err := relayQueued(); answered {
				return ws.afterRelay(p, err)
			}
		case <-p.lost:
			if answered, err := relayQueued(); answered {
				return ws.afterRelay(p, err)
			}
			return p.lostErr
		case <-ctx.Done():
			cause := causeOf(ctx)
			ws.cancel(p, cancelReason(cause))
			return cause
		}
	}
}

func (ws *workerSession) afterRelay(p *pendingReq, err error) error {
	switch {
	case errors.Is(err, errClientGone):
		ws.cancel(p, protocol.CancelClientDisconnect)
	case errors.Is(err, errStreamTooLarge):
		ws.cancel(p, protocol.CancelReason("stream exceeded size limit"))
	case errors.Is(err, errRequestTimeout):
		ws.cancel(p, protocol.CancelTimeout)
	}
	return err
}

// frameWriter passes one request's frames to its sink. The relay protocol streams chunks
// without a head: the first chunk starts the answer as a 200 event stream.
type frameWriter struct {
	out  Sink
	body Sink // where the body goes, once the head went out (nil before)
}

// eventStreamHead is the head a streamed answer implies. Shared: sinks only read headers.
var eventStreamHead = http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache"}}

// relay writes one event to the client; done means the request is answered.
func (ws *workerSession) relay(ev workerEvent, out *frameWriter) (done bool, err error) {
	switch {
	case ev.err != nil:
		return true, ev.err
	case ev.complete != nil:
		return true, out.complete(ev.complete)
	default:
		if out.body == nil {
			body, err := out.out.Head(http.StatusOK, eventStreamHead, -1)
			if err != nil {
				return false, err
			}
			out.body = body
		}
		return false, out.body.Chunk([]byte(ev.chunk), true)
	}
}

// complete answers with a response_complete: the whole response when nothing was streamed,
// else the stream's last segment.
func (out *frameWriter) complete(c *protocol.ResponseComplete) error {
	var body []byte
	if c.Body != nil {
		body = []byte(*c.Body)
	}
	if out.body == nil {
		// The whole answer is here: the client learns its length, as from an HTTP upstream.
		length := int64(-1)
		if len(body) > 0 {
			length = int64(len(body))
		}
		sink, err := out.out.Head(int(c.StatusCode), httpHeaders(c.Headers), length)
		if err != nil {
			return err
		}
		if len(body) == 0 {
			return nil
		}
		return sink.Chunk(body, false)
	}
	if len(body) == 0 {
		return nil
	}
	return out.body.Chunk(body, true)
}

func cancelReason(cause error) protocol.CancelReason {
	switch {
	case errors.Is(cause, errRequestTimeout):
		return protocol.CancelTimeout
	case errors.Is(cause, errShuttingDown):
		return protocol.CancelServerShutdown
	}
	return protocol.CancelClientDisconnect
}

// drain asks the worker to finish what it holds and take nothing new.
func (ws *workerSession) drain(timeout time.Duration, reason string) {
	secs := uint64(math.Max(1, math.Ceil(timeout.Seconds())))
	ws.enqueueMessage(protocol.GracefulShutdown{Reason: &reason, DrainTimeoutSecs: &secs})
	ws.mu.Lock()
	if ws.drainTime == nil && !ws.closed {
		ws.drainTime = time.AfterFunc(timeout, func() {
			// Fail the requests before the close starts, so none is mistaken for a lost one
			// and requeued; freeing the last slot then closes the session as timed out.
			ws.drainExpired.Store(true)
			ws.failPending(errShuttingDown)
			ws.closeWith(websocket.CloseNormalClosure, reasonDrainTimedOut)
		})
	}
	ws.mu.Unlock()
	ws.pool.update(ws.m, func(m *member) { m.draining = true })
}

func (ws *workerSession) drained() {
	if ws.drainExpired.Load() {
		ws.closeWith(websocket.CloseNormalClosure, reasonDrainTimedOut)
		return
	}
	ws.closeWith(websocket.CloseNormalClosure, reasonDrainComplete)
}

// failPending ends every request the worker holds with err.
func (ws *workerSession) failPending(err error) {
	ws.mu.Lock()
	held := make([]*pendingReq, 0, len(ws.pending))
	for _, p := range ws.pending {
		held = append(held, p)
	}
	ws.mu.Unlock()
	for _, p := range held {
		ws.mu.Lock()
		select {
		case <-p.lost:
		default:
			p.lostErr = err
			close(p.lost)
		}
		ws.mu.Unlock()
		ws.finish(p)
	}
}

// teardown runs when the reader stops: the writer sends the close frame, the connection
// closes, the member leaves its pool and every request it held is lost (and requeued by its
// own goroutine when no byte reached the client yet).
func (ws *workerSession) teardown() {
	<-ws.wrote
	if ws.silence != nil { // the writer, its only other user, has exited
		ws.silence.Stop()
	}
	ws.conn.Close()
	ws.pool.drop(ws.m)
	ws.mu.Lock()
	ws.closed = true
	if ws.drainTime != nil {
		ws.drainTime.Stop()
	}
	ws.mu.Unlock()
	ws.failPending(errTargetLost)
	ws.srv.sessions.Delete(ws.id)
	ws.srv.metrics.workersConnected.Dec()
	ws.log.Info("worker disconnected", "close_code", ws.code, "reason", ws.reason)
}
