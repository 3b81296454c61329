package appproxy

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"modelrelay/protocol"
)

// ApplyFunc makes the relay serve exactly circuits; it returns once they are routable (the ack
// promises that). The reconcile package provides it.
type ApplyFunc func(ctx context.Context, circuits []protocol.Circuit) error

// Config wires a Worker. Zero durations get the spec defaults.
type Config struct {
	Registration protocol.WorkerRegistration
	Coordinator  *Coordinator
	// Events is the coordinator's [redis] server; nil runs pull-only (events_enabled: false).
	Events *redis.Client
	Apply  ApplyFunc

	HeartbeatPeriod   time.Duration // default 10 s; the coordinator's timeout is 30 s
	ReconcileInterval time.Duration // default 15 s
	// MinBackoff/MaxBackoff bound registration and resubscription retries (1 s, 30 s).
	MinBackoff, MaxBackoff time.Duration
	// SubscribeGrace is how long the first registration waits for the event subscription; past
	// it we register anyway (the pull after the eventual subscribe catches up). Default 5 s.
	SubscribeGrace time.Duration
	// EventsIdleProbe is how long a silent subscription waits before pinging Redis (default
	// 30 s); a lost peer is detected within twice this.
	EventsIdleProbe time.Duration
	// DeregisterTimeout bounds the DELETE on shutdown. Default 5 s.
	DeregisterTimeout time.Duration
	Logger            *slog.Logger
	// Metrics counts calls, events and acks; nil counts nothing.
	Metrics *Metrics
	// OnFirstPull runs once, when the coordinator's circuit set was first pulled and applied
	// (what /readyz waits for).
	OnFirstPull func()
}

// Worker is this process as the coordinator sees it: an AppProxy worker. It subscribes to the
// coordinator's events, registers, pulls and heartbeats, keeps the circuit Store, calls Apply on
// every change and acks created circuits once they are routable.
type Worker struct {
	cfg   Config
	log   *slog.Logger
	store *Store
	sub   *Subscriber // nil when pull-only
	acker *Acker

	events     chan protocol.Event
	subscribed chan struct{}

	mu              sync.Mutex // guards the fields below, which Status reads
	workerID        string
	registered      bool
	lastHeartbeatOK bool

	firstPull sync.Once

	// Owned by the Run goroutine.
	everRegistered bool
	attempts       int
	dirty          bool // the store holds changes Apply has not accepted yet
}

// NewWorker checks the wiring.
func NewWorker(cfg Config) (*Worker, error) {
	if cfg.Coordinator == nil || cfg.Apply == nil {
		return nil, errors.New("appproxy worker: Coordinator and Apply are required")
	}
	if cfg.Registration.Authority == "" {
		return nil, errors.New("appproxy worker: authority is empty")
	}
	defaults(&cfg)
	w := &Worker{
		cfg:        cfg,
		log:        cfg.Logger.With("authority", cfg.Registration.Authority),
		store:      NewStore(),
		events:     make(chan protocol.Event, 64),
		subscribed: make(chan struct{}, 1),
		dirty:      true, // the first pull applies even an empty set
	}
	if cfg.Events != nil {
		w.acker = &Acker{Client: cfg.Events}
		w.sub = &Subscriber{
			Client:       cfg.Events,
			OnSubscribed: w.onSubscribed,
			OnEvent:      w.onEvent,
			Logger:       w.log,
			Metrics:      cfg.Metrics,
			MinBackoff:   cfg.MinBackoff,
			MaxBackoff:   cfg.MaxBackoff,
			IdleProbe:    cfg.EventsIdleProbe,
		}
	}
	return w, nil
}

func defaults(cfg *Config) {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&cfg.HeartbeatPeriod, 10*time.Second)
	set(&cfg.ReconcileInterval, 15*time.Second)
	set(&cfg.MinBackoff, defaultMinBackoff)
	set(&cfg.MaxBackoff, defaultMaxBackoff)
	set(&cfg.SubscribeGrace, 5*time.Second)
	set(&cfg.DeregisterTimeout, 5*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
}

// Run drives the worker until ctx is done, then deregisters and returns nil. It returns an
// ErrConfig error if the coordinator rejects the first registration (bad secret or body): the
// caller should exit 1 with that one line.
func (w *Worker) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	// Subscribe before registering: an event published between registration and subscription
	// would be lost.
	if w.sub != nil {
		wg.Go(func() { w.sub.Run(ctx) })
	}
	err := w.loop(ctx)
	if err != nil {
		return err
	}
	w.deregister(ctx)
	return nil
}

// loop is the one goroutine that owns the store, Apply, acks and the REST calls. Serializing
// them keeps a pull fetched before an event from being applied after it (which would undo the
// event until the next resync); the client's 10 s timeout bounds how long a call can delay an ack.
func (w *Worker) loop(ctx context.Context) error {
	bo := newBackoff(w.cfg.MinBackoff, w.cfg.MaxBackoff)
	first := time.Duration(0)
	if w.sub != nil {
		first = w.cfg.SubscribeGrace
	}
	register := time.NewTimer(first)
	defer register.Stop()
	heartbeat := time.NewTicker(w.cfg.HeartbeatPeriod)
	defer heartbeat.Stop()
	resync := time.NewTicker(w.cfg.ReconcileInterval)
	defer resync.Stop()

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-register.C:
			if err := w.tryRegister(ctx, register, bo); err != nil {
				return err
			}
		case <-w.subscribed:
			switch {
			case w.isRegistered():
				w.pull(ctx, register)
			case w.attempts == 0:
				register.Reset(0)
			}
		case ev := <-w.events:
			w.handle(ctx, ev)
		case <-heartbeat.C:
			w.heartbeat(ctx, register)
		case <-resync.C:
			if w.isRegistered() {
				w.pull(ctx, register)
			} else if w.dirty {
				w.apply(ctx, "retry")
			}
		}
	}
}

// tryRegister registers (then pulls) unless already registered; failures are retried with
// backoff, except a configuration error before the first success, which ends Run.
func (w *Worker) tryRegister(ctx context.Context, register *time.Timer, bo *backoff) error {
	if w.isRegistered() {
		return nil
	}
	err := w.register(ctx)
	switch {
	case err == nil:
		bo.Reset()
		w.pull(ctx, register)
	case errors.Is(err, ErrConfig) && !w.everRegistered:
		return err // already one line: "coordinator register: HTTP 401: …"
	case ctx.Err() == nil:
		delay := bo.Next()
		w.log.Warn("appproxy registration failed; retrying", "err", err, "retry_in", delay)
		register.Reset(delay)
	}
	return nil
}

func (w *Worker) register(ctx context.Context) error {
	w.attempts++
	rec, err := w.cfg.Coordinator.Register(ctx, w.cfg.Registration)
	w.cfg.Metrics.call("register", err)
	if err != nil {
		return err
	}
	w.everRegistered = true
	w.mu.Lock()
	w.workerID, w.registered, w.lastHeartbeatOK = rec.ID, true, true
	w.mu.Unlock()
	w.log.Info("appproxy registered with coordinator", "worker_id", rec.ID, "nodes", rec.Nodes)
	return nil
}

// forgotten handles a 404: the coordinator lost our id, so register again at once.
func (w *Worker) forgotten(register *time.Timer, during string) {
	w.log.Warn("appproxy coordinator forgot this worker; re-registering", "during", during)
	w.mu.Lock()
	w.registered, w.lastHeartbeatOK = false, false
	w.mu.Unlock()
	register.Reset(0)
}

func (w *Worker) heartbeat(ctx context.Context, register *time.Timer) {
	id, ok := w.id()
	if !ok {
		return
	}
	_, err := w.cfg.Coordinator.Heartbeat(ctx, id)
	w.cfg.Metrics.call("heartbeat", err)
	switch {
	case err == nil:
		w.setHeartbeatOK(true)
	case errors.Is(err, ErrNotFound):
		w.forgotten(register, "heartbeat")
	case ctx.Err() == nil:
		w.setHeartbeatOK(false)
		w.log.Warn("appproxy heartbeat failed", "err", err)
	}
}

// pull makes the store equal to the coordinator's list; this is what heals lost events.
func (w *Worker) pull(ctx context.Context, register *time.Timer) {
	id, ok := w.id()
	if !ok {
		return
	}
	cs, err := w.cfg.Coordinator.Circuits(ctx, id)
	w.cfg.Metrics.call("pull", err)
	switch {
	case errors.Is(err, ErrNotFound):
		w.forgotten(register, "circuit pull")
		return
	case err != nil:
		if ctx.Err() == nil {
			w.log.Warn("appproxy circuit pull failed", "err", err)
		}
		return
	}
	if w.store.Replace(w.serveable(cs, slog.LevelDebug)) || w.dirty {
		if w.apply(ctx, "pull") != nil {
			return
		}
	}
	if w.cfg.OnFirstPull != nil {
		w.firstPull.Do(w.cfg.OnFirstPull)
	}
}

func (w *Worker) apply(ctx context.Context, cause string) error {
	err := w.cfg.Apply(ctx, w.store.Circuits())
	w.dirty = err != nil
	if err != nil && ctx.Err() == nil {
		w.log.Error("appproxy apply circuits failed", "cause", cause, "err", err)
	}
	return err
}

// deregister runs on shutdown, after the heartbeat loop has stopped.
func (w *Worker) deregister(ctx context.Context) {
	id, ok := w.id()
	if !ok {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.DeregisterTimeout)
	defer cancel()
	err := w.cfg.Coordinator.Deregister(dctx, id)
	w.cfg.Metrics.call("deregister", err)
	w.mu.Lock()
	w.registered = false
	w.mu.Unlock()
	if err != nil {
		w.log.Warn("appproxy deregister failed", "err", err)
		return
	}
	w.log.Info("appproxy deregistered", "worker_id", id)
}

func (w *Worker) id() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.workerID, w.registered
}

func (w *Worker) isRegistered() bool {
	_, ok := w.id()
	return ok
}

func (w *Worker) setHeartbeatOK(ok bool) {
	w.mu.Lock()
	w.lastHeartbeatOK = ok
	w.mu.Unlock()
}
