// Command modelrelay-server is the relay: OpenAI and Anthropic HTTP in front, relay workers
// (dialing in over WebSocket) and HTTP upstreams behind, and optionally a Backend.AI AppProxy
// inference worker.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"modelrelay/cmd/internal/gcfloor"
	"modelrelay/cmd/internal/pprofserve"
	"modelrelay/relay"
	"modelrelay/relay/admin"
	"modelrelay/relay/api"
	"modelrelay/relay/cache"
	"modelrelay/relay/keys"
	"modelrelay/relay/keys/postgres"
	"modelrelay/relay/keys/redislimit"
	"modelrelay/relay/responses"
)

// version and commit are stamped at build time (make build, make dist, deploy/Dockerfile) with
// -ldflags "-X main.version=… -X main.commit=…"; --version prints both, as the worker does.
var version, commit = "dev", "unknown"

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, warnings, err := LoadConfig(args, getenv, stderr)
	if err != nil && !errors.Is(err, errHelp) && !errors.Is(err, errVersion) {
		for _, w := range warnings { // a misspelled key often explains the error
			fmt.Fprintln(stderr, "modelrelay-server: warning:", w)
		}
	}
	switch {
	case errors.Is(err, errHelp):
		fmt.Fprint(stdout, usageText())
		return 0
	case errors.Is(err, errVersion):
		fmt.Fprintf(stdout, "modelrelay-server %s (%s)\n", version, commit)
		return 0
	case err != nil:
		// A config error may hold several problems, one per line: each gets the prefix.
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, "modelrelay-server:", line)
		}
		return 1
	}
	log := newLogger(cfg, stderr)
	for _, w := range warnings {
		log.Warn(w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if addr := getenv(pprofserve.EnvVar); addr != "" {
		pprofserve.Start(ctx, addr, log)
	}
	defer gcfloor.Start(gcfloor.Floor)()
	if err := serve(ctx, cfg, log); err != nil {
		fmt.Fprintln(stderr, "modelrelay-server:", err)
		return 1
	}
	return 0
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.SlogLevel(), ReplaceAttr: readableDuration}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// readableDuration logs a duration as Go duration text ("1.5s"), as modelrelay-worker does:
// slog's JSON handler would write nanoseconds, which nobody reads at a glance and which
// differ from the text format.
func readableDuration(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

func relayOptions(cfg Config, log *slog.Logger, store keys.Store) relay.Options {
	backends := make([]relay.Backend, 0, len(cfg.Backends))
	for _, b := range cfg.Backends {
		dialects, _ := parseDialects(b.Dialects) // validated with the config
		backends = append(backends, relay.Backend{Name: b.Name, URL: b.URL, Models: b.Models,
			Weight: b.Weight, MaxConcurrent: b.MaxConcurrent, Dialects: dialects, APIKey: b.APIKey})
	}
	breaker := relay.BreakerOptions{Failures: cfg.BreakerFailures, Cooldown: cfg.BreakerCooldown,
		MaxCooldown: cfg.BreakerMaxCooldown}
	grace := cfg.WorkerGrace
	if grace == 0 {
		grace = -1 // relay: negative = no grace (zero takes its default)
	}
	slowStart := cfg.SlowStart
	if slowStart == 0 {
		slowStart = -1 // relay: negative = no slow start (zero takes its default)
	}
	slack := 0 // relay: its default, a quarter of each target's max_concurrent (at least 2)
	if cfg.AffinitySlack != nil {
		slack = *cfg.AffinitySlack
		if slack == 0 {
			slack = -1 // relay: negative = no slack (zero takes its default)
		}
	}
	scheduling := relay.Scheduling{
		CacheAware:         cfg.Routing == "cache_aware", // validated: else least_load
		AffinityTTL:        cfg.AffinityTTL,
		AffinitySlack:      slack,
		PrefixMinMatch:     cfg.PrefixMinMatch,
		PrefixCacheEntries: cfg.PrefixCacheEntries,
		PriorityAging:      cfg.PriorityAging,
		MaxClientPriority:  cfg.MaxClientPriority,
	}
	return relay.Options{
		Provider:               cfg.Provider,
		WorkerSecret:           cfg.WorkerSecret,
		MaxQueueLen:            cfg.MaxQueueLen,
		QueueTimeout:           cfg.QueueTimeout,
		RequestTimeout:         cfg.RequestTimeout,
		DrainTimeout:           cfg.DrainTimeout,
		AdminToken:             cfg.AdminToken,
		MaxBodyBytes:           cfg.MaxBodyBytes,
		BodyLimits:             bodyLimits(cfg),
		MaxModelsPerWorker:     cfg.MaxModelsPerWorker,
		MaxStreamBytes:         cfg.MaxStreamBytes,
		DefaultMaxTokens:       cfg.DefaultMaxTokens,
		MaxFrameBytes:          cfg.MaxFrameBytes,
		RequireProtocolVersion: cfg.RequireProtocolVersion,
		TrustedProxies:         cfg.TrustedProxies,
		TrustedOrigins:         cfg.TrustedOrigins,
		Backends:               backends,
		Fallbacks:              cfg.Fallbacks,
		Responses:              responses.NewMemory(cfg.ResponsesTTL, cfg.ResponsesStoreMaxBytes),
		Reasoning:              func(model string) bool { return cfg.Models[model].Reasoning },
		WorkerGrace:            grace,
		SlowStart:              slowStart,
		Breaker:                breaker,
		Scheduling:             scheduling,
		Cache:                  relay.CacheOptions{TTL: cfg.Cache.TTL, MaxBytes: cfg.Cache.MaxBytes, Models: cacheModels(cfg.Models)},
		RequireAPIKeys:         cfg.RequireAPIKeys,
		Keys:                   relay.KeyOptions{Store: store, CacheTTL: cfg.KeyCacheTTL, MaxPending: cfg.UsageMaxPending},
		AccessLog:              cfg.AccessLog,
		Version:                version,
		Logger:                 log,
		Timings:                relay.Timings{HealthInterval: cfg.AppProxy.HealthCheckInterval},
	}
}

// cacheModels are the models configured to use the response cache by default, or never.
func cacheModels(models map[string]ModelConfig) map[string]string {
	out := map[string]string{}
	for name, m := range models {
		if m.Cache != "" {
			out[name] = m.Cache
		}
	}
	return out
}

func bodyLimits(cfg Config) relay.BodyLimits {
	rate := cfg.BodyMinRate
	if rate == 0 {
		rate = -1 // relay: negative = no minimum rate
	}
	return relay.BodyLimits{ReadTimeout: cfg.BodyReadTimeout, MinRate: rate, Budget: cfg.BodyBudgetBytes}
}

// serve runs the relay until ctx ends (SIGTERM), then shuts down in order: in worker mode the
// heartbeat stops and the worker deregisters first, so the coordinator stops sending users
// here; then workers are told to finish, new requests get 503, in-flight ones run until the
// drain timeout.
func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	store, err := openKeyStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer store.Close()
	var demoModel *demoServer
	if cfg.Demo {
		if demoModel, err = startDemo(&cfg, log); err != nil {
			return err
		}
		defer demoModel.stop() // deferred: it outlives the relay's drain
	}
	opts := relayOptions(cfg, log, store)
	var rdb *redis.Client
	if cfg.RedisURL != "" {
		rdbOpts, _ := redis.ParseURL(cfg.RedisURL) // validated with the config
		rdb = redis.NewClient(rdbOpts)
		defer rdb.Close()
		opts.Keys.Budget = redislimit.New(rdb, log)
		opts.Responses = responses.NewRedis(rdb, "modelrelay:responses:", cfg.ResponsesTTL)
		log.Info("client key limits and stored responses shared through Redis", "redis", urlShown(cfg.RedisURL))
	}
	if cfg.Cache.Enabled {
		opts.Cache.Store = cache.NewMemory(cfg.Cache.MaxBytes)
		if cfg.Cache.Store == "redis" { // validated: redis_url is set
			opts.Cache.Store = cache.NewRedis(rdb, log)
		}
		log.Info("response cache on", "cache", cacheShown(cfg.Cache))
	}
	srv, err := relay.New(opts)
	if err != nil {
		return err
	}
	ops := admin.Mount(srv) // the operator's routes and /ui, beside the relay's own
	handler := api.Handler(srv)
	var mode *workerMode
	if cfg.AppProxy.Enabled {
		if mode, err = newWorkerMode(cfg, log, srv, ops); err != nil {
			return err
		}
		handler = relay.WholeAnswers(mode.front) // the front answers refusals of its own
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	httpSrv := newHTTPServer(cfg.HTTPServer, handler, log)
	served := make(chan error, 1)
	go func() {
		if cfg.tlsListen() {
			// net/http's server: validation keeps http_server on it under TLS (the lean
			// server has no TLS, nor HTTP/2).
			served <- httpSrv.(*http.Server).ServeTLS(ln, cfg.AppProxy.TLSCert, cfg.AppProxy.TLSKey)
			return
		}
		served <- httpSrv.Serve(ln)
	}()
	runCtx, stopRun := context.WithCancel(context.Background())
	var background sync.WaitGroup
	background.Go(func() { srv.Run(runCtx) })
	workerCtx, stopWorker := context.WithCancel(context.Background())
	workerDone := make(chan error, 1)
	if mode != nil {
		go func() { workerDone <- mode.run(workerCtx) }()
	}

	log.Info("modelrelay-server listening", "addr", ln.Addr().String(), "http_server", cfg.HTTPServer, "provider", cfg.Provider,
		"backends", len(cfg.Backends), "appproxy", cfg.AppProxy.Enabled, "version", version)
	if demoModel != nil {
		demoModel.logReady(log, cfg, ln.Addr())
	}
	if cfg.WorkerSecret == "" && len(cfg.Backends) > 0 {
		log.Info("no worker secret is set, so relay workers cannot join: set --worker-secret or WORKER_SECRET to let them")
	}

	var failure error
	select {
	case err := <-served:
		failure = fmt.Errorf("serve: %w", err)
	case err := <-workerDone:
		failure = err // the coordinator rejected our configuration
		workerDone <- nil
	case <-ctx.Done():
	}
	if mode != nil {
		log.Info("shutting down: deregistering from the coordinator")
		stopWorker()
		<-workerDone
	}
	stopWorker()
	if failure == nil {
		log.Info("shutting down: draining in-flight requests", "drain_timeout", cfg.DrainTimeout.String())
		drainCtx, cancel := context.WithTimeout(context.Background(), max(cfg.DrainTimeout, time.Second))
		srv.Drain(drainCtx)
		cancel()
	}
	srv.Close()
	stopRun()
	background.Wait()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	httpSrv.Shutdown(shutdownCtx)
	if failure != nil {
		return failure
	}
	log.Info("shutdown complete")
	return nil
}

// openKeyStore opens the client key store: PostgreSQL when database_url is set (its
// migrations applied), else memory, with a warning when keys are required.
func openKeyStore(ctx context.Context, cfg Config, log *slog.Logger) (keys.Store, error) {
	if cfg.DatabaseURL == "" {
		if cfg.RequireAPIKeys {
			log.Warn("database_url not set: client API keys are kept in memory (this process only, lost on restart)")
		}
		return keys.NewMemory(), nil
	}
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	store, err := postgres.Open(openCtx, cfg.DatabaseURL, postgres.Options{})
	if err != nil {
		return nil, fmt.Errorf("database_url: %w", err)
	}
	log.Info("client API keys in PostgreSQL", "database", urlShown(cfg.DatabaseURL))
	return store, nil
}
