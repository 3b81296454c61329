package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"time"

	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"

	"modelrelay/protocol"
)

// Config is the server's effective configuration after flags, environment, config file and
// defaults have been merged (in that order of precedence) and validated.
type Config struct {
	Listen                 string
	HTTPServer             string // the listener's HTTP server: net/http or lean (lowercased)
	WorkerSecret           string // "" = relay workers cannot join
	Provider               string
	MaxQueueLen            int           // 0 = unbounded
	QueueTimeout           time.Duration // 0 = none
	RequestTimeout         time.Duration // 0 = none
	DrainTimeout           time.Duration
	LogLevel               string // debug, info, warn or error
	LogFormat              string // text or json
	AccessLog              bool   // one info line per request
	AdminToken             string // "" = admin routes answer 403
	RequireAPIKeys         bool   // inference routes ask for a client API key
	DatabaseURL            string // PostgreSQL for keys and usage; "" = in memory
	KeyCacheTTL            time.Duration
	UsageMaxPending        int    // distinct usage rows held while the database is down
	RedisURL               string // shares keys' limits across nodes; "" = each node its own
	MaxBodyBytes           int64
	BodyReadTimeout        time.Duration
	BodyMinRate            int64 // bytes/s; 0 = no minimum
	BodyBudgetBytes        int64
	MaxModelsPerWorker     int
	MaxStreamBytes         int64
	MaxFrameBytes          int64
	DefaultMaxTokens       int // max_tokens for OpenAI requests translated to Anthropic targets
	RequireProtocolVersion bool
	TrustedProxies         []netip.Prefix         // masked; bare IPs became /32 or /128
	TrustedOrigins         []string               // browser origins let through cross-origin protection, as browsers send them
	WorkerGrace            time.Duration          // wait for a model's last relay worker to come back
	BreakerFailures        int                    // consecutive failures that open a target's breaker
	BreakerCooldown        time.Duration          // first open period
	BreakerMaxCooldown     time.Duration          // longest open period (the cooldown doubles up to it)
	SlowStart              time.Duration          // a target back from an open breaker regains its share over this; 0 = at once
	Fallbacks              map[string][]string    // model -> alternates in order; file only
	Models                 map[string]ModelConfig // what the relay knows of each model; file only
	ResponsesTTL           time.Duration          // a stored Responses API response is kept this long
	ResponsesStoreMaxBytes int64                  // the in-memory responses store holds at most this much
	Routing                string                 // least_load or cache_aware (lowercased)
	AffinityTTL            time.Duration          // a session returns to its last target for this long
	AffinitySlack          *int                   // ... while that target's load is at most the lowest + this (nil: the relay's default)
	PrefixMinMatch         float64                // share of a prompt's blocks a target must hold to win it
	PrefixCacheEntries     int                    // block hashes remembered per target
	PriorityAging          time.Duration          // a waiter's class rises one step per this much waiting
	MaxClientPriority      string                 // highest class a request without a client key may ask for
	Cache                  CacheConfig
	Backends               []BackendConfig
	Demo                   bool // also serve the built-in demo model as the static backend "demo"
	AppProxy               AppProxyConfig
	ConfigFile             string // the file that was read, "" if none
}

// CacheConfig is the `cache:` section: the opt-in response cache.
type CacheConfig struct {
	Enabled  bool
	TTL      time.Duration
	MaxBytes int64
	Store    string // memory or redis (lowercased); redis is the server's redis_url
}

// ModelConfig is one model's entry of the `models:` section.
type ModelConfig struct {
	Cache string // keys.CacheDefault, keys.CacheOff, or "" (requests use the cache when they ask)
	// Reasoning marks a reasoning model: a Responses call's reasoning.effort reaches it as
	// reasoning_effort. Other models never get the parameter (most servers refuse it).
	Reasoning bool
}

// BackendConfig is one static upstream from the `backends:` list.
type BackendConfig struct {
	Name          string // defaults to the URL's host:port
	URL           string
	Models        []string // empty = discover from GET /v1/models
	Weight        float64  // > 0, default 1
	MaxConcurrent int      // 0 = no cap
	Dialects      []string // openai, anthropic; empty = auto
	APIKey        string   // the backend's own credential; never logged or printed
}

// String keeps APIKey out of every %v and %+v rendering (test failures, debug prints).
func (b BackendConfig) String() string {
	b.APIKey = secretState(b.APIKey)
	type plain BackendConfig // no String method: no recursion
	return fmt.Sprintf("%+v", plain(b))
}

// GoString does the same for %#v.
func (b BackendConfig) GoString() string { return "main.BackendConfig" + b.String() }

// secretState is how a secret appears in logs and prints: "set" or "unset", never its value.
func secretState(s string) string {
	if s == "" {
		return "unset"
	}
	return "set"
}

// AppProxyConfig is the `appproxy:` section: worker mode for Backend.AI. With Enabled the
// server registers with the coordinator as an AppProxy worker named by Authority, serves one
// subdomain of WildcardDomain per inference circuit, and acks the coordinator's circuit events
// read from RedisURL; each key is also APPPROXY_<KEY> (appProxyKeys).
type AppProxyConfig struct {
	Enabled             bool
	CoordinatorURL      string
	APISecret           string
	JWTSecret           string
	RedisURL            string // redis://host:port/db; add ?master_name=NAME for Sentinel
	EventsEnabled       bool
	Authority           string // defaults to os.Hostname()
	Hostname            string
	APIPort             int // defaults to the listen port
	WildcardDomain      string
	WildcardTrafficPort int
	TLSListen           bool
	TLSCert             string
	TLSKey              string
	TLSAdvertised       bool
	AggregationHosts    []string // lowercased
	HeartbeatPeriod     time.Duration
	ReconcileInterval   time.Duration
	RouteMaxConcurrent  int // 0 = none
	HealthCheckInterval time.Duration
	LiveMarkers         bool
	RequireTokenExp     bool   // refuse circuit tokens without "exp" (PyJWT accepts them)
	NodeID              string // this replica's name to coordinators that track HA nodes; "" = not sent
}

// RedisSentinel reports whether RedisURL names a Sentinel master (parse it with
// redis.ParseFailoverURL) rather than a single server (redis.ParseURL).
func (a AppProxyConfig) RedisSentinel() bool {
	u, err := url.Parse(a.RedisURL)
	return err == nil && u.Query().Has("master_name")
}

// SlogLevel maps LogLevel onto log/slog.
func (c Config) SlogLevel() slog.Level {
	switch c.LogLevel {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

var (
	// errHelp means -h/--help was given: print usageText() to stdout and exit 0.
	errHelp = errors.New("help requested")
	// errVersion means --version was given: print the version to stdout and exit 0.
	errVersion = errors.New("version requested")
)

const envConfigFile = "MODELRELAY_CONFIG"

// setting ties a top-level file key to its flag and environment variable. A flag beats the
// environment, which beats the file, which beats the default.
type setting struct {
	key, flag, env string
	boolean        bool
}

var settings = []setting{
	{key: "listen", flag: "listen", env: "LISTEN_ADDR"},
	{key: "http_server", flag: "http-server", env: "MODELRELAY_HTTP_SERVER"},
	{key: "worker_secret", flag: "worker-secret", env: "WORKER_SECRET"},
	{key: "provider", flag: "provider", env: "PROVIDER_NAME"},
	{key: "max_queue_len", flag: "max-queue-len", env: "MAX_QUEUE_LEN"},
	{key: "queue_timeout", flag: "queue-timeout", env: "QUEUE_TIMEOUT_SECS"},
	{key: "request_timeout", flag: "request-timeout", env: "REQUEST_TIMEOUT_SECS"},
	{key: "drain_timeout", flag: "drain-timeout", env: "DRAIN_TIMEOUT_SECS"},
	{key: "log_level", flag: "log-level", env: "LOG_LEVEL"},
	{key: "log_format", flag: "log-format", env: "LOG_FORMAT"},
	{key: "access_log", flag: "access-log", env: "ACCESS_LOG", boolean: true},
	{key: "admin_token", flag: "admin-token", env: "MODELRELAY_ADMIN_TOKEN"},
	{key: "require_api_keys", flag: "require-api-keys", env: "MODELRELAY_REQUIRE_API_KEYS", boolean: true},
	{key: "database_url", flag: "database-url", env: "DATABASE_URL"},
	{key: "key_cache_ttl", flag: "key-cache-ttl", env: "KEY_CACHE_TTL"},
	{key: "usage_max_pending", flag: "usage-max-pending", env: "USAGE_MAX_PENDING"},
	{key: "redis_url", flag: "redis-url", env: "REDIS_URL"},
	{key: "max_body_bytes", flag: "max-body-bytes", env: "MAX_BODY_BYTES"},
	{key: "body_read_timeout", flag: "body-read-timeout", env: "BODY_READ_TIMEOUT"},
	{key: "body_min_rate", flag: "body-min-rate", env: "BODY_MIN_RATE"},
	{key: "body_budget_bytes", flag: "body-budget-bytes", env: "BODY_BUDGET_BYTES"},
	{key: "max_models_per_worker", flag: "max-models-per-worker", env: "MAX_MODELS_PER_WORKER"},
	{key: "max_stream_bytes", flag: "max-stream-bytes", env: "MAX_STREAM_BYTES"},
	{key: "max_frame_bytes", flag: "max-frame-bytes", env: "MAX_FRAME_BYTES"},
	{key: "default_max_tokens", flag: "default-max-tokens", env: "DEFAULT_MAX_TOKENS"},
	{key: "require_protocol_version", flag: "require-protocol-version", env: "REQUIRE_PROTOCOL_VERSION", boolean: true},
	{key: "trusted_proxies", flag: "trusted-proxies", env: "TRUSTED_PROXIES"},
	{key: "trusted_origins", flag: "trusted-origins", env: "MODELRELAY_TRUSTED_ORIGINS"},
	{key: "worker_grace", flag: "worker-grace", env: "WORKER_GRACE"},
	{key: "breaker_failures", flag: "breaker-failures", env: "BREAKER_FAILURES"},
	{key: "breaker_cooldown", flag: "breaker-cooldown", env: "BREAKER_COOLDOWN"},
	{key: "breaker_max_cooldown", flag: "breaker-max-cooldown", env: "BREAKER_MAX_COOLDOWN"},
	{key: "slow_start", flag: "slow-start", env: "SLOW_START"},
	{key: "routing", flag: "routing", env: "ROUTING"},
	{key: "affinity_ttl", flag: "affinity-ttl", env: "AFFINITY_TTL"},
	{key: "affinity_slack", flag: "affinity-slack", env: "AFFINITY_SLACK"},
	{key: "prefix_min_match", flag: "prefix-min-match", env: "PREFIX_MIN_MATCH"},
	{key: "prefix_cache_entries", flag: "prefix-cache-entries", env: "PREFIX_CACHE_ENTRIES"},
	{key: "priority_aging", flag: "priority-aging", env: "PRIORITY_AGING"},
	{key: "max_client_priority", flag: "max-client-priority", env: "MODELRELAY_MAX_CLIENT_PRIORITY"},
	{key: "responses_ttl", flag: "responses-ttl", env: "MODELRELAY_RESPONSES_TTL"},
	{key: "responses_store_max_bytes", flag: "responses-store-max-bytes", env: "MODELRELAY_RESPONSES_STORE_MAX_BYTES"},
	{key: "cache.enabled", flag: "cache-enabled", env: "MODELRELAY_CACHE_ENABLED", boolean: true},
	{key: "cache.ttl", flag: "cache-ttl", env: "MODELRELAY_CACHE_TTL"},
	{key: "cache.max_bytes", flag: "cache-max-bytes", env: "MODELRELAY_CACHE_MAX_BYTES"},
	{key: "cache.store", flag: "cache-store", env: "MODELRELAY_CACHE_STORE"},
	{key: "demo", flag: "demo", env: "MODELRELAY_DEMO", boolean: true},
}

// httpServers are the values of `http_server`, the server of the inference listener:
// net/http's, or relay/h1's lean HTTP/1.1 server (plain connections only, so appproxy's
// tls_listen keeps net/http, which serves TLS and HTTP/2).
var httpServers = []string{"net/http", "lean"}

// defaultHTTPServer is http_server when nothing sets it (and TLS does not ask for net/http).
const defaultHTTPServer = "net/http"

// routingPolicies are the values of `routing`: least_load picks by load alone; cache_aware
// also returns a session to its last target and a prompt to the target holding its prefix.
var routingPolicies = []string{"least_load", "cache_aware"}

// priorityClasses are the values of `max_client_priority`, highest first.
var priorityClasses = []string{"high", "normal", "low"}

// maxPrefixCacheEntries bounds prefix_cache_entries: the relay keeps that many block hashes
// per target, so a typo must not become gigabytes.
const maxPrefixCacheEntries = 1 << 24

// fileOnlyKeys are top-level file keys with no flag or environment variable.
var fileOnlyKeys = []string{"appproxy", "backends", "fallbacks", "models"}

// cacheStores are the values of cache.store: this process's memory, or the server's
// redis_url, shared by every node on it.
var cacheStores = []string{"memory", "redis"}

// minCacheBytes is the smallest cache.max_bytes: an answer of 64 KiB still fits one entry.
const minCacheBytes = 1 << 20

// modelKeys are the keys of one model's entry in the `models:` section.
var modelKeys = []string{"cache", "reasoning"}

// appProxyKeys are the keys of the `appproxy:` section; each is also APPPROXY_<KEY>.
var appProxyKeys = []string{
	"enabled", "coordinator_url", "api_secret", "jwt_secret", "redis_url", "events_enabled",
	"authority", "hostname", "api_port", "wildcard_domain", "wildcard_traffic_port",
	"tls_listen", "tls_cert", "tls_key", "tls_advertised", "aggregation_hosts",
	"heartbeat_period", "reconcile_interval", "route_max_concurrent", "health_check_interval",
	"live_markers", "require_token_exp", "node_id",
}

var backendKeys = []string{"name", "url", "models", "weight", "max_concurrent", "dialects", "api_key"}

// coordinatorTimeout is how long the Backend.AI coordinator waits for a heartbeat before
// marking a worker LOST (it checks every 15 s, so LOST comes 30 to 45 s after the last one).
const coordinatorTimeout = 30 * time.Second

func defaultValues() map[string]any {
	return map[string]any{
		"listen":                         "127.0.0.1:8080",
		"http_server":                    defaultHTTPServer,
		"provider":                       "local",
		"max_queue_len":                  100,
		"queue_timeout":                  30 * time.Second,
		"request_timeout":                300 * time.Second,
		"drain_timeout":                  30 * time.Second,
		"log_level":                      "info",
		"log_format":                     "text",
		"access_log":                     true,
		"require_api_keys":               false,
		"key_cache_ttl":                  5 * time.Second,
		"usage_max_pending":              100000,
		"max_body_bytes":                 int64(32 << 20),
		"body_read_timeout":              30 * time.Second,
		"body_min_rate":                  int64(4 << 10),
		"body_budget_bytes":              int64(256 << 20),
		"responses_ttl":                  time.Hour,
		"responses_store_max_bytes":      int64(256 << 20),
		"max_models_per_worker":          256,
		"max_stream_bytes":               int64(10 << 30),
		"max_frame_bytes":                int64(protocol.DefaultMaxFrameBytes),
		"default_max_tokens":             4096,
		"require_protocol_version":       false,
		"worker_grace":                   10 * time.Second,
		"breaker_failures":               5,
		"breaker_cooldown":               5 * time.Second,
		"breaker_max_cooldown":           60 * time.Second,
		"slow_start":                     30 * time.Second,
		"routing":                        "cache_aware",
		"affinity_ttl":                   5 * time.Minute,
		"prefix_min_match":               0.3,
		"prefix_cache_entries":           16384,
		"priority_aging":                 10 * time.Second,
		"max_client_priority":            "high", // what every client could ask before the setting existed
		"cache.enabled":                  false,
		"cache.ttl":                      10 * time.Minute,
		"cache.max_bytes":                int64(256 << 20),
		"cache.store":                    "memory",
		"demo":                           false,
		"appproxy.enabled":               false,
		"appproxy.events_enabled":        true,
		"appproxy.wildcard_traffic_port": 443,
		"appproxy.tls_listen":            false,
		"appproxy.tls_advertised":        false,
		"appproxy.heartbeat_period":      10 * time.Second,
		"appproxy.reconcile_interval":    15 * time.Second,
		"appproxy.route_max_concurrent":  0,
		"appproxy.health_check_interval": 10 * time.Second,
		"appproxy.live_markers":          true,
		"appproxy.require_token_exp":     false,
	}
}

// LoadConfig builds the configuration from command-line args (without the program name),
// the environment and the config file. Warnings are returned even when err is non-nil: an
// unknown (misspelled) key often explains the error, so print them first. err is errHelp or
// errVersion when the caller should print that and exit 0; otherwise it names every problem
// found, one line each ("config: <key>: <what>"). Nothing is written to stderr today (flag
// errors come back in err, ending in "see --help"); it is part of the signature so that the
// caller's wiring need not change if that ever changes.
//
// getenv cannot list the environment, which the warning about unknown MODELRELAY_* and
// APPPROXY_* variables needs, so the names come from os.Environ; a name counts only when
// getenv has a value for it, so a caller's own getenv (a test's) still decides what is set.
func LoadConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, []string, error) {
	return loadConfig(args, getenv, os.Environ())
}

// loadConfig is LoadConfig with the environment's names given: environ holds NAME=value
// entries, of which only the names are read.
func loadConfig(args []string, getenv func(string) string, environ []string) (Config, []string, error) {
	flags, configPath, err := parseFlags(args)
	if err != nil {
		return Config{}, nil, err
	}
	if configPath == "" {
		configPath = getenv(envConfigFile)
	}

	k := koanf.New(".")
	if err := k.Load(confmap.Provider(defaultValues(), "."), nil); err != nil {
		return Config{}, nil, fmt.Errorf("config: defaults: %w", err)
	}
	var p problems
	var file configFile
	explicit := map[string]bool{}
	if configPath != "" {
		if file, err = readConfigFile(configPath, getenv, &p); err != nil {
			return Config{}, file.warnings, err
		}
		markExplicit(explicit, "", file.values)
		if err := k.Load(confmap.Provider(file.values, ""), nil); err != nil {
			return Config{}, file.warnings, fmt.Errorf("config: %s: %w", configPath, err)
		}
	}
	warnings := append(file.warnings, unknownEnvWarnings(environ, getenv, file.vars)...)
	for _, layer := range []map[string]any{envValues(getenv), flags} {
		for key := range layer {
			explicit[key] = true
		}
		if err := k.Load(confmap.Provider(layer, "."), nil); err != nil {
			return Config{}, warnings, fmt.Errorf("config: %w", err)
		}
	}

	cfg := decodeConfig(k, &p)
	cfg.ConfigFile = configPath
	cfg.applyDerivedDefaults(explicit)
	cfg.validate(&p)
	if err := p.err(); err != nil {
		return Config{}, warnings, err
	}
	return cfg, append(warnings, cfg.warnings(explicit)...), nil
}

// parseFlags returns the flags the user actually set, keyed like the file, so that a flag's
// zero value never hides the environment or the file.
func parseFlags(args []string) (map[string]any, string, error) {
	fs := flag.NewFlagSet("modelrelay-server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	keyOf := map[string]string{}
	for _, s := range settings {
		keyOf[s.flag] = s.key
		if s.boolean {
			fs.Bool(s.flag, false, s.key)
		} else {
			fs.String(s.flag, "", s.key)
		}
	}
	configPath := fs.String("config", "", "config file")
	showVersion := fs.Bool("version", false, "print the version")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, "", errHelp
		}
		return nil, "", fmt.Errorf("config: %w (see --help)", err)
	}
	if *showVersion {
		return nil, "", errVersion
	}
	if fs.NArg() > 0 {
		return nil, "", fmt.Errorf("config: unexpected argument %q (boolean flags take --flag=false; see --help)", fs.Arg(0))
	}
	set := map[string]any{}
	fs.Visit(func(f *flag.Flag) {
		if key, ok := keyOf[f.Name]; ok {
			set[key] = f.Value.String()
		}
	})
	return set, *configPath, nil
}

func markExplicit(explicit map[string]bool, prefix string, m map[string]any) {
	for key, v := range m {
		if sub, ok := v.(map[string]any); ok && prefix == "" {
			markExplicit(explicit, key+".", sub)
			continue
		}
		explicit[prefix+key] = true
	}
}
