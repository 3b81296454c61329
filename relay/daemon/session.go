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
	"modelrelay/relay/wsconn"
)

// maxFrameBytes bounds one frame from the server; a request frame carries a whole client body
// (32 MiB by default on the server) escaped as a JSON string.
const maxFrameBytes = 256 << 20

// sessionEnd says how a session ended, which decides the reconnect delay.
type sessionEnd struct {
	graceful bool // the server closed with 1000: it is restarting or drained us
	drained  bool // our own Shutdown finished; do not reconnect
	refused  bool // the server refused the worker secret (errSecretRefused)
	err      error
}

// loadReportGap spaces the load reports a session sends when other sessions take and free
// slots: under load that happens on every request, and a report per change would cost the
// server more than the precision is worth (a request that still finds no slot waits for one).
const loadReportGap = 10 * time.Millisecond

// session is one WebSocket connection to a server, from register to close.
type session struct {
	cfg      Config
	log      *slog.Logger
	backend  *backend
	conn     *websocket.Conn
	out      *outbox
	flights  *flights
	slots    *slots          // the daemon's, shared with its other sessions
	slotWait time.Duration   // how long a request may wait for a slot (0 = refuse at once)
	stopping <-chan struct{} // closed by Daemon.Shutdown
	refresh  func(context.Context) (models []string, discovered bool)
	// rediscover: model discovery failed at connect, so discoverLater keeps trying.
	rediscover bool
	// notify tells the daemon this session took or freed a slot, so the other sessions report
	// the new load to their servers (nil with one relay).
	notify func(*session)
	stale  chan struct{} // signalled when another session changed the load
	wg     sync.WaitGroup

	advMu  sync.Mutex // orders reading models with queueing the frame that carries them
	models []string   // what the server was last told we serve
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

	// Urgent, like every frame that carries the models: none may overtake it.
	register := protocol.Register{WorkerName: s.cfg.WorkerName, Models: s.models,
		MaxConcurrent: uint32(s.cfg.MaxConcurrency), ProtocolVersion: protocol.Ptr(protocol.Version),
		CurrentLoad: protocol.Ptr(s.slots.load())}
	if err := s.out.sendUrgent(sctx, register); err != nil {
		cancel(fmt.Errorf("queue register: %w", err))
	}
	if s.notify != nil {
		s.wg.Go(func() { s.reportLoad(sctx) })
	}
	if s.rediscover {
		s.wg.Go(func() { s.discoverLater(sctx) })
	}
	readErr := s.read(sctx)
	cancel(readErr)
	s.wg.Wait()

	end := sessionEnd{err: context.Cause(sctx)}
	end.drained = errors.Is(end.err, errDrained)
	var closeErr *websocket.CloseError
	if errors.As(readErr, &closeErr) {
		end.graceful = closeErr.Code == websocket.CloseNormalClosure
		end.refused = closeErr.Code == websocket.ClosePolicyViolation && closeErr.Text == closeAuthFailed
		if end.refused {
			end.err = readErr
		}
	}
	return end
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
	var reader wsconn.Reader
	for {
		kind, data, err := reader.Read(s.conn)
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
	// The server's close frame says more than whatever our side failed on meanwhile (a write
	// racing the close fails with "close sent").
	var closeErr *websocket.CloseError
	if errors.As(err, &closeErr) {
		return fmt.Errorf("read from server: %w", err)
	}
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
		pong := protocol.Pong{CurrentLoad: s.slots.load(), TimestampUnixMs: m.TimestampUnixMs}
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
		models, _ = s.refresh(ctx)
	}
	if err := s.advertise(ctx, models); err != nil {
		s.log.Debug("models_update not sent", "error", err)
	}
}

// Background discovery after a failed one at connect: the first retry after
// rediscoverMin, doubling up to rediscoverMax.
const (
	rediscoverMin = 2 * time.Second
	rediscoverMax = time.Minute
)

// discoverLater asks the backend for its models again until it answers, then advertises them
// in place of the wildcard it registered with. A backend that starts after the daemon (a model
// still loading) is then served by name, and listed by the server's /v1/models.
func (s *session) discoverLater(ctx context.Context) {
	for wait := rediscoverMin; ; wait = min(2*wait, rediscoverMax) {
		select {
		case <-ctx.Done():
			return
		case <-s.stopping:
			return
		case <-time.After(wait):
		}
		models, ok := s.refresh(ctx)
		if !ok || s.flights.isDraining() {
			continue
		}
		if err := s.advertise(ctx, models); err != nil {
			return
		}
		s.log.Info("model discovery succeeded: advertising the backend's models", "models", models)
		return
	}
}

// advertise queues a models_update with the daemon's load and models, or the models last
// advertised when models is nil.
func (s *session) advertise(ctx context.Context, models []string) error {
	s.advMu.Lock()
	defer s.advMu.Unlock()
	if models != nil {
		s.models = models
	}
	return s.out.sendUrgent(ctx, protocol.ModelsUpdate{Models: s.models, CurrentLoad: s.slots.load()})
}

// loadChanged is called after this session took or freed a slot.
func (s *session) loadChanged() {
	if s.notify != nil {
		s.notify(s)
	}
}

// markStale asks reportLoad to tell the server the load changed; it never blocks.
func (s *session) markStale() {
	select {
	case s.stale <- struct{}{}:
	default:
	}
}

// reportLoad tells the server the daemon's load when other sessions changed it (the server
// counts the requests it sent itself), at most once per loadReportGap. A session the server
// asked to drain stays quiet: a models_update would advertise its models again.
func (s *session) reportLoad(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.stale:
		}
		if !s.flights.isDraining() {
			if err := s.advertise(ctx, nil); err != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(loadReportGap):
		}
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
	if err := s.advertise(ctx, []string{}); err != nil {
		return
	}
	s.log.Info("draining: waiting for in-flight requests", "in_flight", s.flights.count())
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
