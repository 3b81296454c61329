package daemon

import (
	"context"
	"errors"
	"time"

	"modelrelay/protocol"
	"modelrelay/relay/wsconn"
)

// slotWait bounds how long a request waits for a slot when the daemon serves several relays:
// one relay may hand out a slot another has just taken, before the daemon's load report
// reaches it. The wait absorbs that race; the client never sees it.
const slotWait = 2 * time.Second

// admit starts a request once it holds a slot. With one relay a request that finds every slot
// taken is refused at once with a 503, so the server frees its own slot and routes elsewhere
// (that server knows our load exactly, so this is rare); with several it waits up to slotWait.
func (s *session) admit(ctx context.Context, req protocol.Request) {
	jctx, jcancel := context.WithCancelCause(ctx)
	switch s.flights.admit(req.RequestID, jcancel) {
	case refusedDuplicate:
		jcancel(nil)
		s.log.Warn("ignoring a request id already in flight", "request_id", req.RequestID)
		return
	case refusedDraining:
		jcancel(nil)
		// Queued from a goroutine: the reader must not wait behind a long stream's chunks.
		s.wg.Go(func() { s.refuse(ctx, req, failDraining) })
		return
	}
	if s.slots.tryTake() {
		s.loadChanged()
		s.wg.Go(func() { s.serve(ctx, jctx, jcancel, req) })
		return
	}
	// The reader must not wait: the slot is awaited (if at all) on the request's goroutine.
	s.wg.Go(func() {
		if s.slotWait > 0 && s.slots.take(jctx, s.slotWait) {
			s.loadChanged()
			s.serve(ctx, jctx, jcancel, req)
			return
		}
		cause := context.Cause(jctx)
		s.flights.release(req.RequestID)
		jcancel(nil)
		defer s.flights.done()
		switch {
		case ctx.Err() != nil: // the session ended: there is nobody to answer
		case errors.Is(cause, errServerCancel):
			_ = s.out.send(ctx, cancelledComplete(req.RequestID))
		default:
			s.refuse(ctx, req, failBusy)
		}
	})
}

// refuse answers a request the daemon will not serve.
func (s *session) refuse(ctx context.Context, req protocol.Request, why failure) {
	s.log.Warn("refusing request", "request_id", req.RequestID, "reason", why.message)
	_ = s.out.send(ctx, why.complete(req.RequestID, req.EndpointPath))
}

// serve runs one admitted request that holds a slot to its response_complete.
func (s *session) serve(ctx, jctx context.Context, jcancel context.CancelCauseFunc, req protocol.Request) {
	defer s.flights.done()
	start := time.Now()
	emit := func(chunk []byte) error { return s.out.sendChunk(jctx, req.RequestID, chunk) }
	final, body := s.backend.forward(jctx, req, emit)
	if errors.Is(context.Cause(jctx), errServerCancel) {
		final = cancelledComplete(req.RequestID)
		if body != nil {
			wsconn.Release(body)
			body = nil
		}
	}
	// The slot is free before the response_complete is queued: the server may hand out the
	// next request the moment it reads that frame.
	s.flights.release(req.RequestID)
	s.slots.give()
	s.loadChanged()
	jcancel(nil)
	s.log.Debug("request done", "request_id", req.RequestID, "model", req.Model,
		"path", req.EndpointPath, "streaming", req.IsStreaming, "status", final.StatusCode,
		"duration", time.Since(start))
	err := s.out.sendComplete(ctx, final, body)
	if errors.Is(err, errFrameTooLarge) {
		// JSON escaping grew the answer past the limit: the client gets a 502 that says so.
		err = s.out.send(ctx, tooLargeForFrame(s.out.maxFrame).complete(req.RequestID, req.EndpointPath))
	}
	if err != nil {
		s.log.Debug("response_complete not sent", "request_id", req.RequestID, "error", err)
	}
}

// cancelledComplete frees the server's slot for a request it cancelled.
func cancelledComplete(requestID string) protocol.ResponseComplete {
	empty := ""
	return protocol.ResponseComplete{RequestID: requestID, StatusCode: cancelledStatus, Body: &empty}
}
