package appproxy

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"modelrelay/protocol"
)

// ApplyFunc makes the relay serve exactly circuits; it returns once they are routable (the ack
// promises that). The reconcile package provides it.
type ApplyFunc func(ctx context.Context, circuits []protocol.Circuit) error

// Config wires a Worker. Zero durations get the defaults given with each.
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
	node       string // this replica's name: the registration's node_id, else the hostname

	mu              sync.Mutex // guards the fields below, which Status reads
	workerID        string
	registered      bool
	lastHeartbeatOK bool
	nodes           int // the authority's node count in the coordinator's last answer

	firstPull sync.Once

	// Owned by the Run goroutine.
	everRegistered bool
	attempts       int
	dirty          bool              // the store holds changes Apply has not accepted yet
	inFlight       map[string]bool   // coordinator calls running, by kind
	pullAgain      bool              // a pull was asked for while one ran
	beatAfterPull  bool              // send a heartbeat when the pull after registration ends
	seq            uint64            // events applied so far
	touched        map[string]uint64 // circuit id -> seq of the last event that changed it

	results chan restResult // coordinator calls report here
	calls   sync.WaitGroup  // coordinator calls running
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
		inFlight:   map[string]bool{},
		touched:    map[string]uint64{},
		results:    make(chan restResult, 3),
	}
	w.node = cfg.Registration.NodeID
	if w.node == "" {
		w.node, _ = os.Hostname()
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
	cancel() // ends coordinator calls still running
	w.calls.Wait()
	if err != nil {
		return err
	}
	w.deregister(ctx)
	return nil
}

// loop is the one goroutine that owns the store, Apply and acks. Coordinator REST calls run on
// goroutines of their own and report back here, so an event is applied and acked the moment it
// arrives even while the coordinator is slow to answer a heartbeat or a pull (it waits only 15 s
// for an ack). A pull that started before an event was applied must not undo it: see merge.
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
			w.startRegister(ctx)
		case <-w.subscribed:
			switch {
			case w.isRegistered():
				w.startPull(ctx)
			case w.attempts == 0:
				register.Reset(0)
			}
		case ev := <-w.events:
			w.handle(ctx, ev)
		case <-heartbeat.C:
			w.startHeartbeat(ctx)
		case <-resync.C:
			if w.isRegistered() {
				w.startPull(ctx)
			} else if w.dirty {
				w.apply(ctx, "retry")
			}
		case r := <-w.results:
			if err := w.finish(ctx, r, register, heartbeat, bo); err != nil {
				return err
			}
		}
	}
}

// restResult is what one coordinator call reports back to the loop.
type restResult struct {
	call     string // "register", "pull" or "heartbeat"
	workerID string // the id the call used (pull, heartbeat) or got (register)
	nodes    int
	circuits []protocol.Circuit
	err      error
	since    uint64 // pull: the event sequence number when it started
}

// rest runs call on its own goroutine; at most one call of each kind is in flight, so the
// results channel (one slot per kind) never blocks the sender.
func (w *Worker) rest(ctx context.Context, kind string, call func() restResult) bool {
	if w.inFlight[kind] {
		return false
	}
	w.inFlight[kind] = true
	w.calls.Go(func() {
		r := call()
		r.call = kind
		w.results <- r
	})
	return true
}

func (w *Worker) startRegister(ctx context.Context) {
	if w.isRegistered() {
		return
	}
	w.attempts++
	w.rest(ctx, "register", func() restResult {
		rec, err := w.cfg.Coordinator.Register(ctx, w.cfg.Registration)
		w.cfg.Metrics.call("register", err)
		if err != nil {
			return restResult{err: err}
		}
		return restResult{workerID: rec.ID, nodes: rec.Nodes}
	})
}

func (w *Worker) startPull(ctx context.Context) {
	id, ok := w.id()
	if !ok {
		return
	}
	since := w.seq
	if !w.rest(ctx, "pull", func() restResult {
		cs, err := w.cfg.Coordinator.Circuits(ctx, id)
		w.cfg.Metrics.call("pull", err)
		return restResult{workerID: id, circuits: cs, err: err, since: since}
	}) {
		w.pullAgain = true // the running pull may predate what asked for this one
	}
}

func (w *Worker) startHeartbeat(ctx context.Context) {
	id, ok := w.id()
	if !ok {
		return
	}
	w.rest(ctx, "heartbeat", func() restResult {
		rec, err := w.cfg.Coordinator.Heartbeat(ctx, id)
		w.cfg.Metrics.call("heartbeat", err)
		return restResult{workerID: id, nodes: rec.Nodes, err: err}
	})
}

// finish takes a coordinator call's result on the loop goroutine.
func (w *Worker) finish(ctx context.Context, r restResult, register *time.Timer, heartbeat *time.Ticker, bo *backoff) error {
	w.inFlight[r.call] = false
	if ctx.Err() != nil {
		return nil
	}
	current, _ := w.id()
	switch r.call {
	case "register":
		switch {
		case r.err == nil:
			bo.Reset()
			w.everRegistered = true
			w.mu.Lock()
			w.workerID, w.registered, w.lastHeartbeatOK, w.nodes = r.workerID, true, true, r.nodes
			w.mu.Unlock()
			w.log.Info("appproxy registered with coordinator", "worker_id", r.workerID, "nodes", r.nodes)
			w.beatAfterPull = true
			w.startPull(ctx)
		case errors.Is(r.err, ErrConfig) && !w.everRegistered:
			return r.err // already one line: "coordinator register: HTTP 401: …"
		default:
			delay := bo.Next()
			w.log.Warn("appproxy registration failed; retrying", "err", r.err, "retry_in", delay)
			register.Reset(delay)
		}
	case "pull":
		switch {
		case r.workerID != current:
			// Asked under an id we no longer hold: its answer says nothing about this one.
		case errors.Is(r.err, ErrNotFound):
			w.forgotten(register, "circuit pull")
		case r.err != nil:
			w.log.Warn("appproxy circuit pull failed", "err", r.err)
		default:
			w.pulled(ctx, r)
		}
		if w.beatAfterPull && r.workerID == current {
			// The stock worker's first PATCH follows register and pull at once.
			w.beatAfterPull = false
			heartbeat.Reset(w.cfg.HeartbeatPeriod)
			w.startHeartbeat(ctx)
		}
		if w.pullAgain {
			w.pullAgain = false
			w.startPull(ctx)
		}
	case "heartbeat":
		switch {
		case r.workerID != current:
		case r.err == nil:
			if !w.heartbeatOK() {
				w.log.Info("appproxy heartbeat recovered", "worker_id", r.workerID)
			}
			w.setHeartbeatOK(true)
			w.mu.Lock()
			w.nodes = r.nodes
			w.mu.Unlock()
		case errors.Is(r.err, ErrNotFound):
			w.forgotten(register, "heartbeat")
		default:
			w.setHeartbeatOK(false)
			w.log.Warn("appproxy heartbeat failed", "err", r.err)
		}
	}
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

// pulled makes the store equal to the coordinator's list (this is what heals lost events),
// except for circuits an event changed after the pull started: the event is newer than the
// list, so those keep what the event made of them (present, absent, or with its routes).
func (w *Worker) pulled(ctx context.Context, r restResult) {
	changed := w.store.Replace(w.merge(w.serveable(r.circuits, slog.LevelDebug), r.since))
	for id, seq := range w.touched {
		if seq <= r.since {
			delete(w.touched, id) // this pull saw that event's effect, or will be corrected by the next
		}
	}
	if changed || w.dirty {
		if w.apply(ctx, "pull") != nil {
			return
		}
	}
	if w.cfg.OnFirstPull != nil {
		w.firstPull.Do(w.cfg.OnFirstPull)
	}
}

// merge is the pulled list with the store's view of every circuit touched by an event after
// sequence number since.
func (w *Worker) merge(pulled []protocol.Circuit, since uint64) []protocol.Circuit {
	newer := func(id string) bool { return w.touched[id] > since }
	out := make([]protocol.Circuit, 0, len(pulled))
	for _, c := range pulled {
		if !newer(c.ID) {
			out = append(out, c)
		}
	}
	for _, c := range w.store.Circuits() {
		if newer(c.ID) {
			out = append(out, c)
		}
	}
	return out
}

// touch records that an event just changed circuits ids.
func (w *Worker) touch(ids ...string) {
	w.seq++
	for _, id := range ids {
		w.touched[id] = w.seq
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

func (w *Worker) heartbeatOK() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastHeartbeatOK
}

func (w *Worker) setHeartbeatOK(ok bool) {
	w.mu.Lock()
	w.lastHeartbeatOK = ok
	w.mu.Unlock()
}
