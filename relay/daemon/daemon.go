package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Daemon keeps one worker connected to a relay server, reconnecting for as long as it runs.
type Daemon struct {
	cfg        Config
	log        *slog.Logger
	backend    *backend
	connectURL string

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
	u, _ := ConnectURL(cfg.ProxyURL, cfg.Provider) // validated above
	return &Daemon{
		cfg:        cfg,
		log:        cfg.Logger,
		backend:    newBackend(cfg.BackendURL, cfg.HTTPClient, cfg.DialTimeout, cfg.MaxConcurrency, cfg.MaxFrameBytes, cfg.Logger),
		connectURL: u,
		stopping:   make(chan struct{}),
		done:       make(chan struct{}),
	}, nil
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

	bo := newBackoff(d.cfg)
	for attempt := 1; ; attempt++ {
		if d.isStopping() || ctx.Err() != nil {
			return nil
		}
		start := time.Now()
		end := d.connect(ctx)
		if end.drained {
			d.log.Info("drained, disconnected from server")
			return nil
		}
		if d.isStopping() || ctx.Err() != nil {
			return nil
		}
		wait := bo.next(end, time.Since(start))
		level := slog.LevelWarn
		if end.graceful { // a restarting server; expected
			level = slog.LevelInfo
		}
		d.log.Log(ctx, level, "disconnected from server, reconnecting", "error", end.err,
			"attempt", attempt, "delay", wait.Round(time.Millisecond))
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
func (d *Daemon) connect(ctx context.Context) sessionEnd {
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
	models := d.resolveModels(dctx)
	conn, err := d.dial(dctx)
	if err != nil {
		return sessionEnd{err: err}
	}
	d.log.Info("connected to server", "url", redact(d.connectURL), "models", models,
		"max_concurrency", d.cfg.MaxConcurrency)
	s := &session{
		cfg: d.cfg, log: d.log, backend: d.backend, conn: conn,
		out: newOutbox(conn, d.cfg.WriteTimeout, d.cfg.MaxFrameBytes), flights: newFlights(d.cfg.MaxConcurrency),
		stopping: d.stopping, models: models, refresh: d.resolveModels,
	}
	return s.run(ctx)
}

func (d *Daemon) dial(ctx context.Context) (*websocket.Conn, error) {
	dialer := websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: d.cfg.DialTimeout}
	header := http.Header{"X-Worker-Secret": []string{d.cfg.WorkerSecret}}
	conn, resp, err := dialer.DialContext(ctx, d.connectURL, header)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("connect to %s: handshake answered %s", redact(d.connectURL), resp.Status)
		}
		return nil, fmt.Errorf("connect to %s: %w", redact(d.connectURL), err)
	}
	return conn, nil
}

// resolveModels returns the configured models, or with "*" the backend's own list (falling
// back to "*" itself, which the server routes every model to).
func (d *Daemon) resolveModels(ctx context.Context) []string {
	if !hasWildcard(d.cfg.Models) {
		return d.cfg.Models
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.DiscoveryLimit)
	defer cancel()
	ids, err := d.backend.models(ctx)
	if err != nil {
		d.log.Warn("model discovery failed, registering the wildcard", "error", err)
		return d.cfg.Models
	}
	return ids
}

// redact hides any password in a URL before it reaches a log line.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparseable url>"
	}
	return u.Redacted()
}
