package daemon

import (
	"context"
	"errors"
	"time"

	"modelrelay/protocol"
)

// admit starts a request if a slot is free; otherwise it answers at once with a 503 so the
// server can free its own slot and route elsewhere.
func (s *session) admit(ctx context.Context, req protocol.Request) {
	jctx, jcancel := context.WithCancelCause(ctx)
	var refusal failure
	switch s.flights.admit(req.RequestID, jcancel) {
	case admitted:
		s.wg.Go(func() { s.serve(ctx, jctx, jcancel, req) })
		return
	case refusedDuplicate:
		jcancel(nil)
		s.log.Warn("ignoring a request id already in flight", "request_id", req.RequestID)
		return
	case refusedDraining:
		refusal = failDraining
	default:
		refusal = failBusy
	}
	jcancel(nil)
	s.log.Warn("refusing request", "request_id", req.RequestID, "reason", refusal.message)
	// Queued from a goroutine: the reader must not wait behind a long stream's chunks.
	s.wg.Go(func() { _ = s.out.send(ctx, refusal.complete(req.RequestID, req.EndpointPath)) })
}

// serve runs one admitted request to its response_complete.
func (s *session) serve(ctx, jctx context.Context, jcancel context.CancelCauseFunc, req protocol.Request) {
	defer s.flights.done()
	start := time.Now()
	emit := func(chunk string) error {
		return s.out.send(jctx, protocol.ResponseChunk{RequestID: req.RequestID, Chunk: chunk})
	}
	final := s.backend.forward(jctx, req, emit)
	if errors.Is(context.Cause(jctx), errServerCancel) {
		empty := ""
		final = protocol.ResponseComplete{RequestID: req.RequestID, StatusCode: cancelledStatus, Body: &empty}
	}
	s.flights.release(req.RequestID)
	jcancel(nil)
	s.log.Debug("request done", "request_id", req.RequestID, "model", req.Model,
		"path", req.EndpointPath, "streaming", req.IsStreaming, "status", final.StatusCode,
		"duration", time.Since(start))
	err := s.out.send(ctx, final)
	if errors.Is(err, errFrameTooLarge) {
		// JSON escaping grew the answer past the limit: the client gets a 502 that says so.
		err = s.out.send(ctx, tooLargeForFrame(s.out.maxFrame).complete(req.RequestID, req.EndpointPath))
	}
	if err != nil {
		s.log.Debug("response_complete not sent", "request_id", req.RequestID, "error", err)
	}
}
