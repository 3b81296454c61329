package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"modelrelay/protocol"
)

// maxFrameBytes bounds one frame from the server; a request frame carries a whole client body
// (32 MiB by default on the server) escaped as a JSON string.
const maxFrameBytes = 256 << 20

// sessionEnd says how a session ended, which decides the reconnect delay.
type sessionEnd struct {
	graceful bool // the server closed with 1000: it is restarting or drained us
	drained  bool // our own Shutdown finished; do not reconnect
	err      error
}

// session is one WebSocket connection to the server, from register to close.
type session struct {
	cfg      Config
	log      *slog.Logger
	backend  *backend
	conn     *websocket.Conn
	out      *outbox
	flights  *flights
	stopping <-chan struct{} // closed by Daemon.Shutdown
	models   []string        // what we register with
	refresh  func(context.Context) []string
	wg       sync.WaitGroup
}

// run serves the connection until it ends and every goroutine it started has returned.
func (s *session) run(ctx context.Context) sessionEnd {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.wg.Go(func() { cancel(s.out.run(sctx)) })
	s.wg.Go(func() {
		<-sctx.Done()
		s.conn.Close() // unblocks the reader
	})
	s.wg.Go(func() { s.watchShutdown(sctx) })

	register := protocol.Register{WorkerName: s.cfg.WorkerName, Models: s.models,
		MaxConcurrent: uint32(s.cfg.MaxConcurrency), ProtocolVersion: protocol.Ptr(protocol.Version),
		CurrentLoad: protocol.Ptr(uint32(0))}
	if err := s.out.send(sctx, register); err != nil {
		cancel(fmt.Errorf("queue register: %w", err))
	}
	readErr := s.read(sctx)
	cancel(readErr)
	s.wg.Wait()

	cause := context.Cause(sctx)
	var closeErr *websocket.CloseError
	return sessionEnd{
		drained:  errors.Is(cause, errDrained),
		graceful: errors.As(readErr, &closeErr) && closeErr.Code == websocket.CloseNormalClosure,
		err:      cause,
	}
}

// read handles server frames until the connection fails; it returns why.
func (s *session) read(ctx context.Context) error {
	s.conn.SetReadLimit(maxFrameBytes)
	alive := func() { _ = s.conn.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout)) }
	alive()
	s.conn.SetPongHandler(func(string) error { alive(); return nil })
	s.conn.SetPingHandler(func(data string) error {
		alive()
		err := s.conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(s.cfg.WriteTimeout))
		if err != nil && !errors.Is(err, websocket.ErrCloseSent) {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return err
			}
		}
		return nil
	})
	for {
		kind, data, err := s.conn.ReadMessage()
		if err != nil {
			return s.readFailure(ctx, err)
		}
		alive()
		if kind != websocket.TextMessage {
			s.log.Debug("ignoring non-text frame from server", "kind", kind)
			continue
		}
		msg, err := protocol.DecodeServerMessage(data)
		if err != nil {
			// A newer server may send frames we do not know; that is no reason to drop work.
			s.log.Warn("ignoring server frame", "error", err)
			continue
		}
		s.handle(ctx, msg)
	}
}

func (s *session) readFailure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("no frame from the server for %s", s.cfg.IdleTimeout)
	}
	return fmt.Errorf("read from server: %w", err)
}

func (s *session) handle(ctx context.Context, msg protocol.Message) {
	switch m := msg.(type) {
	case protocol.RegisterAck:
		s.log.Info("registered", "worker_id", m.WorkerID, "models", m.Models)
		for _, w := range m.Warnings {
			s.log.Warn("server warning on register", "warning", w)
		}
	case protocol.Request:
		s.admit(ctx, m)
	case protocol.Cancel:
		if !s.flights.cancel(m.RequestID, errServerCancel) {
			s.log.Debug("cancel for a request not in flight", "request_id", m.RequestID)
		}
	case protocol.Ping:
		pong := protocol.Pong{CurrentLoad: s.flights.load(), TimestampUnixMs: m.TimestampUnixMs}
		if err := s.out.sendUrgent(ctx, pong); err != nil {
			s.log.Debug("pong not sent", "error", err)
		}
	case protocol.GracefulShutdown:
		s.log.Info("server asked to drain", "reason", deref(m.Reason))
		s.flights.drain()
	case protocol.ModelsRefresh:
		s.wg.Go(func() { s.answerRefresh(ctx) })
	default:
		s.log.Debug("ignoring frame meant for a server", "type", msg.MessageType())
	}
}

// answerRefresh re-lists the models and tells the server; a worker that is shutting down
// keeps advertising nothing.
func (s *session) answerRefresh(ctx context.Context) {
	models := []string{}
	select {
	case <-s.stopping:
	default:
		models = s.refresh(ctx)
	}
	upd := protocol.ModelsUpdate{Models: models, CurrentLoad: s.flights.load()}
	if err := s.out.sendUrgent(ctx, upd); err != nil {
		s.log.Debug("models_update not sent", "error", err)
	}
}

// watchShutdown turns Daemon.Shutdown into the drain sequence: advertise no models so the
// server sends nothing new, let in-flight requests finish, then close normally.
func (s *session) watchShutdown(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-s.stopping:
	}
	idle := s.flights.drain()
	upd := protocol.ModelsUpdate{Models: []string{}, CurrentLoad: s.flights.load()}
	if err := s.out.sendUrgent(ctx, upd); err != nil {
		return
	}
	s.log.Info("draining: waiting for in-flight requests", "in_flight", upd.CurrentLoad)
	select {
	case <-ctx.Done():
		return
	case <-idle:
	}
	_ = s.out.closeAfterQueued(ctx)
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
