// Package relay is the ModelRelay core: pools of targets (relay workers that dial in over
// WebSocket, HTTP upstreams the relay calls), a bounded priority queue per pool, the dispatcher,
// and the stages of an OpenAI/Anthropic call in front of them. It knows nothing of Backend.AI:
// the AppProxy mode drives it through SetUpstreamPool and RemovePool. Its HTTP routes are
// package relay/api's (api.Handler); the operator's surface (the admin API, the status page)
// is package relay/admin, which adds its routes with Mount.
package relay

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"modelrelay/protocol"
	"modelrelay/relay/keys"
	"modelrelay/relay/responses"
	"modelrelay/relay/throttle"
)

// Options configure a Server. Zero values take the defaults of the relay contract.
type Options struct {
	Provider               string // pool of relay workers and static backends ("local")
	WorkerSecret           string // "" = relay workers cannot join
	MaxQueueLen            int    // per pool; 0 = unbounded
	QueueTimeout           time.Duration
	RequestTimeout         time.Duration // arrival to first byte, queue time included
	DrainTimeout           time.Duration
	AdminToken             string
	MaxBodyBytes           int64
	BodyLimits             BodyLimits
	MaxModelsPerWorker     int
	MaxStreamBytes         int64
	DefaultMaxTokens       int   // max_tokens of an OpenAI request translated for an Anthropic target that set none (4096)
	MaxFrameBytes          int64 // largest worker frame read (a non-streamed answer travels in one)
	RequireProtocolVersion bool
	TrustedProxies         []netip.Prefix
	// TrustedOrigins are the browser origins ("https://app.example.com") whose non-safe
	// cross-origin requests the inference and admin routes accept; other browsers' are refused.
	TrustedOrigins []string
	Backends       []Backend
	// Responses keeps the Responses API's stored responses (nil: in this process, for an
	// hour, at most 256 MiB).
	Responses responses.Store
	// Reasoning reports whether a model is configured as a reasoning model: a Responses call's
	// reasoning.effort reaches it as reasoning_effort, and is dropped for any other (nil:
	// none is).
	Reasoning func(model string) bool
	// Fallbacks are the configured chains: a request for a key's model that cannot be served
	// before its first byte moves to the listed models in order.
	Fallbacks map[string][]string
	// WorkerGrace is how long requests for a model whose last relay worker left wait for one
	// to come back before they get 503 (0 = 10 s; negative = not at all).
	WorkerGrace time.Duration
	// SlowStart is how long a static backend or circuit replica whose breaker closes again
	// takes to get its whole share of traffic back (0 = 30 s; negative = at once).
	SlowStart  time.Duration
	Breaker    BreakerOptions
	Scheduling Scheduling
	Cache      CacheOptions
	// RequireAPIKeys makes every inference route (but on circuit hosts, which keep their own
	// rules) ask for a client API key from Keys. Without it, a request that sends one of our
	// keys is still checked, limited and accounted; one that sends none is served.
	RequireAPIKeys bool
	Keys           KeyOptions
	Version        string
	Logger         *slog.Logger
	Timings        Timings
	// AccessLog: one INFO line per inference request; the server's config key access_log,
	// default true.
	AccessLog bool
}

// Backend is a static HTTP upstream from the config file.
type Backend struct {
	Name          string
	URL           string
	Models        []string // empty = discover from GET /v1/models
	Weight        float64
	MaxConcurrent int
	Dialects      []Dialect // the API families it speaks; empty = auto (learned from its answers)
	// APIKey, when set, is the backend's own credential (a cloud endpoint): sent as
	// Authorization: Bearer to OpenAI-family calls and x-api-key to Anthropic ones. The
	// client's own credentials are then never forwarded to it.
	APIKey string
}

// Scheduling shapes placement (selection, select.go) and the order of waiting requests.
type Scheduling struct {
	CacheAware  bool          // routing: cache_aware (false = least_load)
	AffinityTTL time.Duration // a session returns to its last target for this long (5 m)
	// AffinitySlack: a session returns, and a prompt goes to the target holding its prefix,
	// while that target's load is at most the lowest + this. 0 = a quarter of the target's
	// max_concurrent, at least 2; negative = none (the lowest load only).
	AffinitySlack      int
	PrefixMinMatch     float64       // share of a prompt's blocks a target must hold to win it (0.3)
	PrefixCacheEntries int           // block hashes remembered per target (16384)
	PriorityAging      time.Duration // a waiter's class rises one step per this much waiting (10 s)
	// MaxClientPriority is the highest class a request without a client key may ask for
	// (high, normal or low; "" = high): keyed requests have their key's ceiling instead.
	MaxClientPriority string
}

func (o *Scheduling) fill() {
	if o.AffinityTTL <= 0 {
		o.AffinityTTL = 5 * time.Minute
	}
	if o.PrefixMinMatch <= 0 || o.PrefixMinMatch > 1 {
		o.PrefixMinMatch = 0.3
	}
	if o.PrefixCacheEntries <= 0 {
		o.PrefixCacheEntries = 16384
	}
	if o.PriorityAging <= 0 {
		o.PriorityAging = 10 * time.Second
	}
	if o.MaxClientPriority == "" {
		o.MaxClientPriority = "high"
	}
}

// KeyOptions configure client API keys: who may call, which models, how much.
type KeyOptions struct {
	Store      keys.Store    // nil = in memory (one process; lost on restart)
	CacheTTL   time.Duration // a validated key is trusted this long (at most 5 s, the default)
	MaxPending int           // distinct usage rows held while the store is down (100000)
	// Budget enforces keys' rate and token limits: nil = in this process (keys.Local); a
	// shared one (package redislimit) holds them across nodes.
	Budget keys.Budget
}

// BreakerOptions shape every static backend's and circuit replica's circuit breaker.
type BreakerOptions struct {
	Failures    int           // consecutive failures before first byte that open it (5)
	Cooldown    time.Duration // first open period (5 s); doubles on every failed trial
	MaxCooldown time.Duration // longest open period (60 s)
}

// Timings are the protocol's clocks. The defaults are the contract's; tests shorten them.
type Timings struct {
	HeartbeatInterval time.Duration // ping every (15 s)
	HeartbeatTimeout  time.Duration // close a silent worker after (45 s)
	SuspectAfter      time.Duration // no frame this long after a ping: the worker gets no new requests (5 s)
	RegisterTimeout   time.Duration // first frame must arrive within (10 s)
	CancelGrace       time.Duration // slot freed this long after a cancel at the latest (10 s)
	AuthFailureStep   time.Duration // answers to one address's wrong secrets or tokens come this far apart (250 ms)
	AuthFailureHold   time.Duration // no wrong-secret answer is held longer; past it, "rate limited" (5 s)
	KeepKnown         time.Duration // a model stays known after its last advertiser left (10 min)
	Discovery         time.Duration // retry period for upstream model discovery (5 s)
	HealthInterval    time.Duration // upstream TCP probe period (10 s)
}

func (t *Timings) fill() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.HeartbeatInterval, 15*time.Second)
	def(&t.HeartbeatTimeout, 45*time.Second)
	def(&t.SuspectAfter, 5*time.Second)
	def(&t.RegisterTimeout, 10*time.Second)
	def(&t.CancelGrace, 10*time.Second)
	def(&t.AuthFailureStep, 250*time.Millisecond)
	def(&t.AuthFailureHold, 5*time.Second)
	def(&t.KeepKnown, 10*time.Minute)
	def(&t.Discovery, 5*time.Second)
	def(&t.HealthInterval, 10*time.Second)
}

// Server is the relay. Create it with New, serve Handler, run Run in the background.
type Server struct {
	opts     Options
	timings  Timings
	poolConf *poolConfig // what every pool shares
	log      *slog.Logger
	metrics  *metrics
	started  time.Time

	poolsMu sync.Mutex // serializes pool creation and removal
	pools   sync.Map   // name -> *Pool; the request path reads it without a lock

	keys       *keys.Auth                  // client API keys, validated and cached
	responses  responses.Store             // the Responses API's stored responses
	budget     keys.Budget                 // their rate and token limits
	ledger     *keys.Ledger                // what keys used, on its way to the store
	sessions   sync.Map                    // worker id -> *workerSession
	guesses    *throttle.Throttle          // wrong secrets, tokens and keys, per client address (guesser)
	origins    *http.CrossOriginProtection // refuses blind cross-site browser requests (origins.go)
	bodyBudget *bodyBudget
	upstreams  *upstreamClient
	backends   []*upstream
	cache      *responseCache // nil: no response cache

	clientCeiling priority // the highest class a request without a client key may take

	workerSeq atomic.Uint64
	memberSeq atomic.Uint64
	reqSeq    atomic.Uint64
	inFlight  atomic.Int64 // requests inside the relay (queued or running)
	draining  atomic.Bool
	notReady  atomic.Int32 // readiness holds outstanding

	extraMu sync.Mutex
	extras  []healthExtra
	mounted []Route // the operator's surface (Mount)

	serving stopSet // the requests a hard stop (the drain deadline passing, Close) ends
}

// New builds a server from opts.
func New(opts Options) (*Server, error) {
	if opts.Provider == "" {
		opts.Provider = "local"
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 32 << 20
	}
	if opts.MaxModelsPerWorker <= 0 {
		opts.MaxModelsPerWorker = 256
	}
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = protocol.DefaultMaxFrameBytes
	}
	if opts.DefaultMaxTokens <= 0 {
		opts.DefaultMaxTokens = 4096
	}
	if opts.MaxStreamBytes <= 0 {
		opts.MaxStreamBytes = 10 << 30
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case opts.WorkerGrace == 0:
		opts.WorkerGrace = 10 * time.Second
	case opts.WorkerGrace < 0:
		opts.WorkerGrace = 0
	}
	switch {
	case opts.SlowStart == 0:
		opts.SlowStart = 30 * time.Second
	case opts.SlowStart < 0:
		opts.SlowStart = 0
	}
	opts.Breaker.fill()
	opts.Scheduling.fill()
	clientCeiling, ok := parsePriority(opts.Scheduling.MaxClientPriority)
	if !ok {
		return nil, fmt.Errorf("max client priority %q is none of high, normal or low", opts.Scheduling.MaxClientPriority)
	}
	opts.Timings.fill()
	opts.BodyLimits.fill()
	if opts.Keys.Store == nil {
		opts.Keys.Store = keys.NewMemory()
	}
	if opts.Responses == nil {
		opts.Responses = responses.NewMemory(responses.DefaultTTL, responses.DefaultMaxBytes)
	}
	if opts.Reasoning == nil {
		opts.Reasoning = func(string) bool { return false }
	}
	if opts.Keys.Budget == nil {
		opts.Keys.Budget = &keys.Local{}
	}
	s := &Server{
		opts:       opts,
		timings:    opts.Timings,
		log:        opts.Logger,
		started:    time.Now(),
		guesses:    throttle.New(opts.Timings.AuthFailureStep, opts.Timings.AuthFailureHold),
		upstreams:  newUpstreamClient(),
		bodyBudget: &bodyBudget{limit: opts.BodyLimits.Budget},
		responses:  opts.Responses,
		poolConf: &poolConfig{maxQueue: opts.MaxQueueLen, keepKnown: opts.Timings.KeepKnown,
			workerGrace: opts.WorkerGrace, slowStart: opts.SlowStart, breaker: opts.Breaker, sched: opts.Scheduling, log: opts.Logger,
			names: &modelNames{}},
	}
	s.clientCeiling = clientCeiling
	if opts.Cache.Store != nil {
		s.cache = newResponseCache(opts.Cache)
	}
	var err error
	if s.origins, err = newOriginGuard(opts.TrustedOrigins); err != nil {
		return nil, err
	}
	s.keys = keys.NewAuth(opts.Keys.Store, opts.Keys.CacheTTL)
	s.budget = opts.Keys.Budget
	s.ledger = keys.NewLedger(opts.Keys.Store, time.Second, opts.Keys.MaxPending, opts.Logger)
	for model, chain := range opts.Fallbacks {
		s.poolConf.names.note(model)
		s.poolConf.names.note(chain...)
	}
	s.metrics = newMetrics(s)
	pool := s.relayPool(opts.Provider)
	for i, b := range opts.Backends {
		u, err := newUpstream(s, b, true)
		if err != nil {
			return nil, err
		}
		if i == 0 && b.Name == "" {
			u.m.id = "backend-1"
		}
		u.pool = pool
		s.backends = append(s.backends, u)
		pool.add(u.m)
	}
	return s, nil
}

// WrongCredential holds the answer to a wrong secret or token presented by client until its
// turn in the guess throttle (shared by worker secrets, admin tokens, circuit tokens and client
// API keys, so mixing them gains a guesser nothing). kind labels the metric. It reports whether
// the failure got a turn: true, answer with the verdict (401, 403); false, the address is
// failing faster than one per turn, so answer "rate limited" (tooManyFailures, or the
// worker protocol's close reason) and never the verdict.
func (s *Server) WrongCredential(ctx context.Context, kind, client string) bool {
	s.metrics.authFailures.WithLabelValues(kind).Inc()
	return s.guesses.Fail(ctx, guesser(client))
}

// guesser is whom the guess throttle holds to account for a client address: the address, or
// for IPv6 its /64, which one host or one customer's network holds whole (keyed by the whole
// address, one host would get 2^64 addresses' turns).
func guesser(client string) string {
	a, err := netip.ParseAddr(client)
	if err != nil || !a.Is6() || a.Is4In6() {
		return client
	}
	p, err := a.WithZone("").Prefix(64)
	if err != nil {
		return client
	}
	return p.String()
}

// tooManyFailures answers a wrong credential that got no turn in the guess throttle. It says
// nothing about the credential itself.
var tooManyFailures = &relayError{status: http.StatusTooManyRequests,
	message: "too many failed authentication attempts from this address; retry later", code: "too_many_failed_attempts"}

// pool returns the named pool, or nil.
func (s *Server) pool(name string) *Pool {
	if p, ok := s.pools.Load(name); ok {
		return p.(*Pool)
	}
	return nil
}

// relayPool returns the pool of a relay provider, creating it on first use: relay pools queue
// even while empty, because their workers dial in.
func (s *Server) relayPool(name string) *Pool {
	if p := s.pool(name); p != nil {
		return p
	}
	s.poolsMu.Lock()
	defer s.poolsMu.Unlock()
	if p := s.pool(name); p != nil {
		return p
	}
	p := newPool(name, s.poolConf, false)
	s.pools.Store(name, p)
	return p
}

// eachPool calls fn for every pool.
func (s *Server) eachPool(fn func(name string, p *Pool)) {
	s.pools.Range(func(k, v any) bool {
		fn(k.(string), v.(*Pool))
		return true
	})
}

// HoldReady keeps /readyz at 503 until the returned func is called (AppProxy mode holds it
// until the first circuit pull is applied).
func (s *Server) HoldReady() (release func()) {
	s.notReady.Add(1)
	var once sync.Once
	return func() { once.Do(func() { s.notReady.Add(-1) }) }
}

// Run runs the background loops (upstream health probes, static backend model discovery)
// until ctx ends.
func (s *Server) Run(ctx context.Context) {
	s.probeAll(ctx) // a backend that is down at start fails fast from the first request
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); s.healthLoop(ctx) }()
	go func() { defer wg.Done(); s.keys.Run(ctx) }()
	go func() { defer wg.Done(); s.ledger.Run(ctx) }()
	if r, ok := s.budget.(interface{ Run(context.Context) }); ok { // its own upkeep
		wg.Add(1)
		go func() { defer wg.Done(); r.Run(ctx) }()
	}
	for _, u := range s.backends {
		if len(u.configured) == 0 {
			wg.Add(1)
			go func() { defer wg.Done(); u.discoverLoop(ctx) }()
		}
	}
	wg.Wait()
}

// Drain is the SIGTERM path: new inference requests get 503, queued ones fail, every worker is
// asked to finish what it holds, and Drain waits for in-flight requests until ctx ends. Then it
// fails what is still running with 503. Last, what keys used goes to the store.
func (s *Server) Drain(ctx context.Context) {
	defer s.flushUsage(ctx)
	s.draining.Store(true)
	s.eachPool(func(_ string, p *Pool) { p.failQueued(errShuttingDown, false) })
	s.sessions.Range(func(_, v any) bool {
		v.(*workerSession).drain(s.opts.DrainTimeout, reasonServerShutdown)
		return true
	})
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for s.inFlight.Load() > 0 {
		select {
		case <-ctx.Done():
			s.log.Warn("drain deadline passed; failing in-flight requests", "in_flight", s.inFlight.Load())
			s.serving.stop(errShuttingDown)
			grace := time.NewTimer(time.Second)
			defer grace.Stop()
			for s.inFlight.Load() > 0 {
				select {
				case <-grace.C:
					return
				case <-tick.C:
				}
			}
			return
		case <-tick.C:
		}
	}
}

// flushUsage writes the usage ledger during the drain: within ctx, or for a few seconds
// more when the drain used all of it (usage is worth a short wait; a store that is down
// keeps it from being written either way, and the log says how much).
func (s *Server) flushUsage(ctx context.Context) {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
	}
	if err := s.ledger.Flush(ctx); err != nil {
		s.log.Error("usage not written at shutdown", "err", err, "rows_lost", s.ledger.Pending())
	}
}

// Close ends every request and worker session at once.
func (s *Server) Close() {
	s.serving.stop(errShuttingDown)
	s.sessions.Range(func(_, v any) bool {
		v.(*workerSession).closeWith(1000, reasonServerShutdown)
		return true
	})
	s.upstreams.close()
}
