package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"modelrelay/relay/wsconn"
)

// Daemon keeps one worker connected to one or several relay servers, reconnecting to each for
// as long as it runs. Its backend's request slots are shared by all of them.
type Daemon struct {
	cfg      Config
	log      *slog.Logger
	backend  *backend
	slots    *slots
	relays   []string                   // connect URLs, one session each
	sessions atomic.Pointer[[]*session] // the live sessions, read when the load changes
	sessMu   sync.Mutex                 // serializes changes to sessions (copy on write)

	stopOnce sync.Once
	stopping chan struct{} // closed by Shutdown

	mu      sync.Mutex
	started bool
	abort   context.CancelFunc // cancels Run's context
	done    chan struct{}      // closed when Run returns
}

// New checks cfg and returns a daemon ready to Run.
func New(cfg Config) (*Daemon, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("worker config: %w", err)
	}
	relays, _ := connectURLs(cfg.ProxyURL, cfg.Provider) // validated above
	d := &Daemon{
		cfg:      cfg,
		log:      cfg.Logger,
		backend:  newBackend(cfg.BackendURL, cfg.DialTimeout, cfg.MaxConcurrency, cfg.MaxFrameBytes, cfg.Logger),
		slots:    newSlots(cfg.MaxConcurrency),
		relays:   relays,
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
	d.sessions.Store(&[]*session{})
	return d, nil
}

// Run connects, serves and reconnects until ctx is done (in-flight requests are aborted) or
// Shutdown has drained the daemon. It returns only after every goroutine it started is gone.
func (d *Daemon) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.mu.Lock()
	if d.started {
		d.mu.Unlock()
		return errors.New("daemon: Run called twice")
	}
	d.started, d.abort = true, cancel
	d.mu.Unlock()
	defer close(d.done)
	// Idle keep-alive connections to the backend each hold two goroutines; a stopped daemon
	// should leave nothing behind.
	defer d.backend.closeIdle()

	var wg sync.WaitGroup
	for _, u := range d.relays {
		log := d.log
		if len(d.relays) > 1 {
			log = log.With("relay", redact(u))
		}
		wg.Go(func() { d.attach(ctx, u, log) })
	}
	wg.Wait()
	return nil
}

// attach keeps a session with one relay until ctx is done or the daemon has drained.
func (d *Daemon) attach(ctx context.Context, connectURL string, log *slog.Logger) {
	bo := newBackoff(d.cfg)
	told := false // the operator has been told the secret is refused
	for attempt := 1; ; attempt++ {
		if d.isStopping() || ctx.Err() != nil {
			return
		}
		start := time.Now()
		end := d.connect(ctx, connectURL, log)
		if end.drained {
			log.Info("drained, disconnected from server")
			return
		}
		if d.isStopping() || ctx.Err() != nil {
			return
		}
		wait := bo.next(end, time.Since(start))
		switch {
		case end.refused && !told:
			// Retrying cannot fix a wrong secret: say so once, with what to check, and keep
			// trying quietly (backed off) in case the relay's side is the one being fixed.
			told = true
			log.Error(hintSecretRefused, "error", end.err, "delay", wait.Round(time.Millisecond))
		case end.refused:
			log.Debug("the relay refused the worker secret again", "attempt", attempt, "delay", wait.Round(time.Millisecond))
		default:
			told = false
			level := slog.LevelWarn
			if end.graceful { // a restarting server; expected
				level = slog.LevelInfo
			}
			log.Log(ctx, level, "disconnected from server, reconnecting", "error", end.err,
				"attempt", attempt, "delay", wait.Round(time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-d.stopping:
		case <-t.C:
		}
		t.Stop()
	}
}

// Shutdown stops taking work (the server is told the worker has no models), waits for the
// requests in flight, closes the session normally and waits for Run to return. If ctx ends
// first the remaining requests are aborted and ctx's error is returned.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.stopOnce.Do(func() { close(d.stopping) })
	d.mu.Lock()
	started, abort := d.started, d.abort
	d.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		abort()
		<-d.done
		return fmt.Errorf("drain: %w", ctx.Err())
	}
}

func (d *Daemon) isStopping() bool {
	select {
	case <-d.stopping:
		return true
	default:
		return false
	}
}

// connect resolves the model list, dials and serves one session.
func (d *Daemon) connect(ctx context.Context, connectURL string, log *slog.Logger) sessionEnd {
	// Discovery and dialing give up as soon as Shutdown starts: there is nothing to drain.
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	go func() {
		select {
		case <-d.stopping:
			dcancel()
		case <-dctx.Done():
		}
	}()
	models, discovered := d.resolveModels(dctx, log)
	conn, batch, err := d.dial(dctx, connectURL)
	if err != nil {
		return sessionEnd{err: err, refused: errors.Is(err, errSecretRefused)}
	}
	// DEBUG: a relay that refuses the secret after the upgrade gets this far on every attempt;
	// "registered" is the line that says the session is up.
	log.Debug("connected to server", "url", redact(connectURL), "models", models,
		"max_concurrency", d.cfg.MaxConcurrency)
	s := &session{
		cfg: d.cfg, log: log, backend: d.backend, conn: conn,
		out: newOutbox(conn, batch, d.cfg.WriteTimeout, d.cfg.MaxFrameBytes), flights: newFlights(),
		slots: d.slots, stopping: d.stopping, models: models,
		refresh:    func(ctx context.Context) ([]string, bool) { return d.resolveModels(ctx, log) },
		rediscover: !discovered,
	}
	if len(d.relays) > 1 {
		s.slotWait, s.notify, s.stale = slotWait, d.loadChanged, make(chan struct{}, 1)
		d.track(s, true)
		defer d.track(s, false)
	}
	return s.run(ctx)
}

// track adds s to the live sessions, or removes it.
func (d *Daemon) track(s *session, live bool) {
	d.sessMu.Lock()
	defer d.sessMu.Unlock()
	old := *d.sessions.Load()
	next := make([]*session, 0, len(old)+1)
	for _, o := range old {
		if o != s {
			next = append(next, o)
		}
	}
	if live {
		next = append(next, s)
	}
	d.sessions.Store(&next)
}

// loadChanged asks every session but from to report the daemon's new load: from's server
// counts the requests it sent itself.
func (d *Daemon) loadChanged(from *session) {
	for _, s := range *d.sessions.Load() {
		if s != from {
			s.markStale()
		}
	}
}

// dial connects to the server; batch is the socket under the WebSocket (under TLS, if any).
func (d *Daemon) dial(ctx context.Context, connectURL string) (conn *websocket.Conn, batch *wsconn.Conn, err error) {
	var tcp net.Dialer
	dialer := websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: d.cfg.DialTimeout,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := tcp.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			batch = wsconn.New(c)
			return batch, nil
		}}
	header := http.Header{"X-Worker-Secret": []string{d.cfg.WorkerSecret}}
	conn, resp, err := dialer.DialContext(ctx, connectURL, header)
	if err != nil {
		if resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
			return nil, nil, fmt.Errorf("connect to %s: handshake answered %s: %w", redact(connectURL), resp.Status, errSecretRefused)
		}
		if resp != nil {
			return nil, nil, fmt.Errorf("connect to %s: handshake answered %s", redact(connectURL), resp.Status)
		}
		return nil, nil, fmt.Errorf("connect to %s: %w", redact(connectURL), err)
	}
	return conn, batch, nil
}

// errSecretRefused is the relay refusing the worker secret: a 401 or 403 to the handshake (the
// Rust relay), or a close 1008 "worker authentication failed" right after it (this relay,
// which upgrades first, as the protocol says).
var errSecretRefused = errors.New("the relay refused the worker secret")

// closeAuthFailed is the close reason (with 1008) of a refused secret in the relay contract.
const closeAuthFailed = "worker authentication failed"

// hintSecretRefused is the one ERROR line a refused secret gets.
const hintSecretRefused = "the relay refused the worker secret: check --worker-secret / WORKER_SECRET and the relay's worker_secret"

// resolveModels returns the configured models, or with "*" the backend's own list. When the
// backend does not answer it falls back to "*" itself (which the server routes every model to)
// and reports discovered false, so the session keeps trying (discoverLater).
func (d *Daemon) resolveModels(ctx context.Context, log *slog.Logger) (models []string, discovered bool) {
	if !hasWildcard(d.cfg.Models) {
		return d.cfg.Models, true
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.DiscoveryLimit)
	defer cancel()
	ids, err := d.backend.models(ctx)
	if err != nil {
		log.Warn("model discovery failed, registering the wildcard; retrying in the background", "error", err)
		return d.cfg.Models, false
	}
	return ids, true
}

// redact hides any password in a URL before it reaches a log line.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparseable url>"
	}
	return u.Redacted()
}
