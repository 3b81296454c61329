package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"modelrelay/relay"
)

// loadCase runs LoadConfig with a private environment and, when file is non-empty, a config
// file named name (default config.yaml) passed through MODELRELAY_CONFIG.
type loadCase struct {
	args []string
	env  map[string]string
	file string
	name string
}

func (lc loadCase) load(t *testing.T) (Config, []string, error) {
	t.Helper()
	env := map[string]string{}
	for k, v := range lc.env {
		env[k] = v
	}
	if lc.file != "" {
		name := lc.name
		if name == "" {
			name = "config.yaml"
		}
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(lc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		env[envConfigFile] = path
	}
	var stderr bytes.Buffer
	return LoadConfig(lc.args, func(k string) string { return env[k] }, &stderr)
}

func mustLoad(t *testing.T, lc loadCase) (Config, []string) {
	t.Helper()
	cfg, warns, err := lc.load(t)
	if err != nil {
		t.Fatalf("LoadConfig: %v (warnings %q)", err, warns)
	}
	return cfg, warns
}

func TestZeroConfigYieldsSpecDefaults(t *testing.T) {
	cfg, _ := mustLoad(t, loadCase{})
	host, _ := os.Hostname()
	want := Config{
		Listen:                 "127.0.0.1:8080",
		HTTPServer:             defaultHTTPServer, // one constant: the default is flipped there alone
		Provider:               "local",
		MaxQueueLen:            100,
		QueueTimeout:           30 * time.Second,
		RequestTimeout:         300 * time.Second,
		DrainTimeout:           30 * time.Second,
		LogLevel:               "info",
		LogFormat:              "text",
		AccessLog:              true,
		KeyCacheTTL:            5 * time.Second,
		UsageMaxPending:        100000,
		MaxBodyBytes:           33554432,
		BodyReadTimeout:        30 * time.Second,
		BodyMinRate:            4096,
		BodyBudgetBytes:        256 << 20,
		ResponsesTTL:           time.Hour,
		ResponsesStoreMaxBytes: 256 << 20,
		MaxFrameBytes:          64 << 20,
		DefaultMaxTokens:       4096,
		MaxModelsPerWorker:     256,
		MaxStreamBytes:         10737418240,
		WorkerGrace:            10 * time.Second,
		BreakerFailures:        5,
		BreakerCooldown:        5 * time.Second,
		BreakerMaxCooldown:     60 * time.Second,
		SlowStart:              30 * time.Second,
		Routing:                "cache_aware",
		AffinityTTL:            5 * time.Minute,
		AffinitySlack:          nil, // the relay's: a quarter of each target's max_concurrent, at least 2
		PrefixMinMatch:         0.3,
		PrefixCacheEntries:     16384,
		PriorityAging:          10 * time.Second,
		MaxClientPriority:      "high",
		Cache:                  CacheConfig{TTL: 10 * time.Minute, MaxBytes: 256 << 20, Store: "memory"},
		AppProxy: AppProxyConfig{
			EventsEnabled:       true,
			Authority:           host,
			APIPort:             8080,
			WildcardTrafficPort: 443,
			HeartbeatPeriod:     10 * time.Second,
			ReconcileInterval:   15 * time.Second,
			HealthCheckInterval: 10 * time.Second,
			LiveMarkers:         true,
		},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", cfg, want)
	}
}

// TestPrecedence sets one key in up to three layers and checks which one wins.
func TestPrecedence(t *testing.T) {
	type layers struct{ flag, env, file string }
	cases := []struct {
		key, flag, env string
		vals           layers // the value each layer would set; "" = layer absent
		get            func(Config) any
		fileVal        any
		envVal         any
		flagVal        any
		defaultVal     any
	}{
		{key: "listen", flag: "listen", env: "LISTEN_ADDR",
			vals:    layers{"127.0.0.1:3", "127.0.0.1:2", `"127.0.0.1:1"`},
			get:     func(c Config) any { return c.Listen },
			fileVal: "127.0.0.1:1", envVal: "127.0.0.1:2", flagVal: "127.0.0.1:3", defaultVal: "127.0.0.1:8080"},
		{key: "max_queue_len", flag: "max-queue-len", env: "MAX_QUEUE_LEN",
			vals:    layers{"3", "2", "1"},
			get:     func(c Config) any { return c.MaxQueueLen },
			fileVal: 1, envVal: 2, flagVal: 3, defaultVal: 100},
		{key: "queue_timeout", flag: "queue-timeout", env: "QUEUE_TIMEOUT_SECS",
			vals:    layers{"3s", "2", "1s"},
			get:     func(c Config) any { return c.QueueTimeout },
			fileVal: time.Second, envVal: 2 * time.Second, flagVal: 3 * time.Second, defaultVal: 30 * time.Second},
		{key: "log_level", flag: "log-level", env: "LOG_LEVEL",
			vals:    layers{"error", "warn", "debug"},
			get:     func(c Config) any { return c.LogLevel },
			fileVal: "debug", envVal: "warn", flagVal: "error", defaultVal: "info"},
		{key: "require_api_keys", flag: "require-api-keys", env: "MODELRELAY_REQUIRE_API_KEYS",
			vals:    layers{"false", "true", "false"},
			get:     func(c Config) any { return c.RequireAPIKeys },
			fileVal: false, envVal: true, flagVal: false, defaultVal: false},
		{key: "access_log", flag: "access-log", env: "ACCESS_LOG",
			vals:    layers{"false", "true", "false"},
			get:     func(c Config) any { return c.AccessLog },
			fileVal: false, envVal: true, flagVal: false, defaultVal: true},
		{key: "worker_secret", flag: "worker-secret", env: "WORKER_SECRET",
			vals:    layers{"flag-secret", "env-secret", "file-secret"},
			get:     func(c Config) any { return c.WorkerSecret },
			fileVal: "file-secret", envVal: "env-secret", flagVal: "flag-secret", defaultVal: ""},
		{key: "trusted_proxies", flag: "trusted-proxies", env: "TRUSTED_PROXIES",
			vals:    layers{"10.0.0.3", "10.0.0.2", "[10.0.0.1]"},
			get:     func(c Config) any { return c.TrustedProxies },
			fileVal: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")},
			envVal:  []netip.Prefix{netip.MustParsePrefix("10.0.0.2/32")},
			flagVal: []netip.Prefix{netip.MustParsePrefix("10.0.0.3/32")}},
		{key: "max_stream_bytes", flag: "max-stream-bytes", env: "MAX_STREAM_BYTES",
			vals:    layers{"3", "2", "1"},
			get:     func(c Config) any { return c.MaxStreamBytes },
			fileVal: int64(1), envVal: int64(2), flagVal: int64(3), defaultVal: int64(10737418240)},
		{key: "worker_grace", flag: "worker-grace", env: "WORKER_GRACE",
			vals:    layers{"3s", "2", "0"},
			get:     func(c Config) any { return c.WorkerGrace },
			fileVal: time.Duration(0), envVal: 2 * time.Second, flagVal: 3 * time.Second, defaultVal: 10 * time.Second},
		{key: "breaker_failures", flag: "breaker-failures", env: "BREAKER_FAILURES",
			vals:    layers{"3", "2", "1"},
			get:     func(c Config) any { return c.BreakerFailures },
			fileVal: 1, envVal: 2, flagVal: 3, defaultVal: 5},
		{key: "breaker_cooldown", flag: "breaker-cooldown", env: "BREAKER_COOLDOWN",
			vals:    layers{"3s", "2", "1s"},
			get:     func(c Config) any { return c.BreakerCooldown },
			fileVal: time.Second, envVal: 2 * time.Second, flagVal: 3 * time.Second, defaultVal: 5 * time.Second},
		{key: "breaker_max_cooldown", flag: "breaker-max-cooldown", env: "BREAKER_MAX_COOLDOWN",
			vals:    layers{"3m", "120", "90s"},
			get:     func(c Config) any { return c.BreakerMaxCooldown },
			fileVal: 90 * time.Second, envVal: 2 * time.Minute, flagVal: 3 * time.Minute, defaultVal: time.Minute},
		{key: "slow_start", flag: "slow-start", env: "SLOW_START",
			vals:    layers{"1m", "45", "0"},
			get:     func(c Config) any { return c.SlowStart },
			fileVal: time.Duration(0), envVal: 45 * time.Second, flagVal: time.Minute, defaultVal: 30 * time.Second},
		{key: "http_server", flag: "http-server", env: "MODELRELAY_HTTP_SERVER",
			vals:    layers{"Lean", "NET/HTTP", "lean"},
			get:     func(c Config) any { return c.HTTPServer },
			fileVal: "lean", envVal: "net/http", flagVal: "lean", defaultVal: defaultHTTPServer},
		{key: "routing", flag: "routing", env: "ROUTING",
			vals:    layers{"Least_Load", "CACHE_AWARE", "least_load"},
			get:     func(c Config) any { return c.Routing },
			fileVal: "least_load", envVal: "cache_aware", flagVal: "least_load", defaultVal: "cache_aware"},
		{key: "affinity_ttl", flag: "affinity-ttl", env: "AFFINITY_TTL",
			vals:    layers{"3m", "120", "90s"},
			get:     func(c Config) any { return c.AffinityTTL },
			fileVal: 90 * time.Second, envVal: 2 * time.Minute, flagVal: 3 * time.Minute, defaultVal: 5 * time.Minute},
		{key: "affinity_slack", flag: "affinity-slack", env: "AFFINITY_SLACK",
			vals:    layers{"3", "1", "0"},
			get:     func(c Config) any { return valueOf(c.AffinitySlack) },
			fileVal: 0, envVal: 1, flagVal: 3, defaultVal: nil},
		{key: "prefix_min_match", flag: "prefix-min-match", env: "PREFIX_MIN_MATCH",
			vals:    layers{"1", "0.75", "0.5"},
			get:     func(c Config) any { return c.PrefixMinMatch },
			fileVal: 0.5, envVal: 0.75, flagVal: 1.0, defaultVal: 0.3},
		{key: "prefix_cache_entries", flag: "prefix-cache-entries", env: "PREFIX_CACHE_ENTRIES",
			vals:    layers{"3", "2", "1"},
			get:     func(c Config) any { return c.PrefixCacheEntries },
			fileVal: 1, envVal: 2, flagVal: 3, defaultVal: 16384},
		{key: "priority_aging", flag: "priority-aging", env: "PRIORITY_AGING",
			vals:    layers{"3s", "2.5", "1s"},
			get:     func(c Config) any { return c.PriorityAging },
			fileVal: time.Second, envVal: 2500 * time.Millisecond, flagVal: 3 * time.Second, defaultVal: 10 * time.Second},
		{key: "max_client_priority", flag: "max-client-priority", env: "MODELRELAY_MAX_CLIENT_PRIORITY",
			vals:    layers{"Low", "normal", "high"},
			get:     func(c Config) any { return c.MaxClientPriority },
			fileVal: "high", envVal: "normal", flagVal: "low", defaultVal: "high"},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			file := tc.key + ": " + tc.vals.file + "\n"
			env := map[string]string{tc.env: tc.vals.env}
			args := []string{"--" + tc.flag + "=" + tc.vals.flag}
			steps := []struct {
				name string
				lc   loadCase
				want any
			}{
				{"flag beats env and file", loadCase{args: args, env: env, file: file}, tc.flagVal},
				{"env beats file", loadCase{env: env, file: file}, tc.envVal},
				{"file beats default", loadCase{file: file}, tc.fileVal},
				{"default", loadCase{}, tc.defaultVal},
			}
			for _, s := range steps {
				cfg, _ := mustLoad(t, s.lc)
				if got := tc.get(cfg); !reflect.DeepEqual(got, s.want) && !(isNil(got) && s.want == nil) {
					t.Errorf("%s: got %v, want %v", s.name, got, s.want)
				}
			}
		})
	}
}

// valueOf is *p, or nil for no value.
func valueOf[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func isNil(v any) bool {
	rv := reflect.ValueOf(v)
	return v == nil || (rv.Kind() == reflect.Slice && rv.IsNil())
}

func TestAppProxyEnvBeatsFile(t *testing.T) {
	cfg, _ := mustLoad(t, loadCase{
		file: "appproxy:\n  heartbeat_period: 5s\n  aggregation_hosts: [a.example.com]\n",
		env:  map[string]string{"APPPROXY_HEARTBEAT_PERIOD": "7", "APPPROXY_AGGREGATION_HOSTS": "B.example.com, c.example.com"},
	})
	if cfg.AppProxy.HeartbeatPeriod != 7*time.Second {
		t.Errorf("heartbeat_period = %v, want 7s", cfg.AppProxy.HeartbeatPeriod)
	}
	if want := []string{"b.example.com", "c.example.com"}; !slices.Equal(cfg.AppProxy.AggregationHosts, want) {
		t.Errorf("aggregation_hosts = %q, want %q", cfg.AppProxy.AggregationHosts, want)
	}
}

// validAppProxy is a complete worker-mode section that individual cases break one key of.
const validAppProxyYAML = `
appproxy:
  enabled: true
  coordinator_url: http://coordinator:10200
  api_secret: api-s
  jwt_secret: jwt-s
  redis_url: redis://redis:6379/4
  authority: relay-1
  hostname: router.example.com
  api_port: 10201
  wildcard_domain: .models.example.com
  wildcard_traffic_port: 8443
  tls_advertised: true
  aggregation_hosts: [models.example.com, api.example.com]
  heartbeat_period: 5s
  reconcile_interval: 20
  route_max_concurrent: 4
  health_check_interval: 2.5
  live_markers: false
  events_enabled: false
`

const validAppProxyTOML = `
[appproxy]
enabled = true
coordinator_url = "http://coordinator:10200"
api_secret = "api-s"
jwt_secret = "jwt-s"
redis_url = "redis://redis:6379/4"
authority = "relay-1"
hostname = "router.example.com"
api_port = 10201
wildcard_domain = ".models.example.com"
wildcard_traffic_port = 8443
tls_advertised = true
aggregation_hosts = "models.example.com, api.example.com"
heartbeat_period = "5s"
reconcile_interval = 20
route_max_concurrent = 4
health_check_interval = 2.5
live_markers = false
events_enabled = false
`

func TestBothFileFormats(t *testing.T) {
	yamlFile := `
listen: 0.0.0.0:9000
worker_secret: ws
max_queue_len: 7
queue_timeout: 1m30s
trusted_proxies: [10.0.0.0/8, 192.168.1.7]
worker_grace: 2s
breaker_failures: 3
breaker_cooldown: 1s
breaker_max_cooldown: 30s
slow_start: 1m
routing: Least_Load
affinity_ttl: 90s
affinity_slack: 0
prefix_min_match: 0.5
prefix_cache_entries: 4096
priority_aging: 2.5
max_client_priority: normal
cache:
  enabled: true
  ttl: 1m
models:
  llama-3-70b: {cache: default}
fallbacks:
  llama-3-70b: [llama-3-8b, gpt-4o-mini]
  llama-3.1-8b: gpt-4o-mini
  "Qwen/Qwen2.5-7B": [qwen-fallback]
backends:
  - name: vllm
    url: http://127.0.0.1:8000
    models: [llama3-8b, qwen]
    weight: 2.5
    max_concurrent: 3
  - url: http://127.0.0.1:8001
    models: "a, b"
    api_key: sk-file-key
` + validAppProxyYAML
	tomlFile := `
listen = "0.0.0.0:9000"
worker_secret = "ws"
max_queue_len = 7
queue_timeout = "1m30s"
trusted_proxies = ["10.0.0.0/8", "192.168.1.7"]
worker_grace = 2
breaker_failures = 3
breaker_cooldown = "1s"
breaker_max_cooldown = 30
slow_start = "1m"
routing = "Least_Load"
affinity_ttl = "90s"
affinity_slack = 0
prefix_min_match = 0.5
prefix_cache_entries = 4096
priority_aging = 2.5
max_client_priority = "normal"

[cache]
enabled = true
ttl = 60

[models.llama-3-70b]
cache = "default"

[fallbacks]
llama-3-70b = ["llama-3-8b", "gpt-4o-mini"]
"llama-3.1-8b" = "gpt-4o-mini"
"Qwen/Qwen2.5-7B" = ["qwen-fallback"]

[[backends]]
name = "vllm"
url = "http://127.0.0.1:8000"
models = ["llama3-8b", "qwen"]
weight = 2.5
max_concurrent = 3

[[backends]]
url = "http://127.0.0.1:8001"
models = "a, b"
api_key = "sk-file-key"
` + validAppProxyTOML
	want := Config{
		Listen: "0.0.0.0:9000", HTTPServer: defaultHTTPServer, WorkerSecret: "ws", Provider: "local", MaxQueueLen: 7,
		QueueTimeout: 90 * time.Second, RequestTimeout: 300 * time.Second, DrainTimeout: 30 * time.Second,
		LogLevel: "info", LogFormat: "text", AccessLog: true, KeyCacheTTL: 5 * time.Second, UsageMaxPending: 100000,
		MaxBodyBytes: 33554432, MaxModelsPerWorker: 256,
		MaxStreamBytes: 10737418240, BodyReadTimeout: 30 * time.Second, BodyMinRate: 4096, BodyBudgetBytes: 256 << 20,
		ResponsesTTL: time.Hour, ResponsesStoreMaxBytes: 256 << 20,
		MaxFrameBytes:    64 << 20,
		DefaultMaxTokens: 4096,
		TrustedProxies:   []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32")},
		WorkerGrace:      2 * time.Second, BreakerFailures: 3, BreakerCooldown: time.Second, BreakerMaxCooldown: 30 * time.Second,
		SlowStart: time.Minute, Routing: "least_load", AffinityTTL: 90 * time.Second, AffinitySlack: ptr(0), PrefixMinMatch: 0.5,
		PrefixCacheEntries: 4096, PriorityAging: 2500 * time.Millisecond, MaxClientPriority: "normal",
		Cache:  CacheConfig{Enabled: true, TTL: time.Minute, MaxBytes: 256 << 20, Store: "memory"},
		Models: map[string]ModelConfig{"llama-3-70b": {Cache: "default"}},
		Fallbacks: map[string][]string{
			"llama-3-70b":     {"llama-3-8b", "gpt-4o-mini"},
			"llama-3.1-8b":    {"gpt-4o-mini"},
			"Qwen/Qwen2.5-7B": {"qwen-fallback"},
		},
		Backends: []BackendConfig{
			{Name: "vllm", URL: "http://127.0.0.1:8000", Models: []string{"llama3-8b", "qwen"}, Weight: 2.5, MaxConcurrent: 3},
			{Name: "127.0.0.1:8001", URL: "http://127.0.0.1:8001", Models: []string{"a", "b"}, Weight: 1, APIKey: "sk-file-key"},
		},
		AppProxy: AppProxyConfig{
			Enabled: true, CoordinatorURL: "http://coordinator:10200", APISecret: "api-s", JWTSecret: "jwt-s",
			RedisURL: "redis://redis:6379/4", Authority: "relay-1", Hostname: "router.example.com",
			APIPort: 10201, WildcardDomain: ".models.example.com", WildcardTrafficPort: 8443,
			TLSAdvertised: true, AggregationHosts: []string{"models.example.com", "api.example.com"},
			HeartbeatPeriod: 5 * time.Second, ReconcileInterval: 20 * time.Second, RouteMaxConcurrent: 4,
			HealthCheckInterval: 2500 * time.Millisecond,
		},
	}
	for _, lc := range []loadCase{{file: yamlFile, name: "c.yaml"}, {file: tomlFile, name: "c.toml"}} {
		t.Run(lc.name, func(t *testing.T) {
			cfg, warns := mustLoad(t, lc)
			want.ConfigFile = cfg.ConfigFile
			if !reflect.DeepEqual(cfg, want) {
				t.Errorf("\n got %+v\nwant %+v", cfg, want)
			}
			if len(warns) != 0 {
				t.Errorf("unexpected warnings %q", warns)
			}
		})
	}
}

func TestConfigFlagBeatsEnvFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	os.WriteFile(a, []byte("provider: from-a\n"), 0o600)
	os.WriteFile(b, []byte("provider: from-b\n"), 0o600)
	env := map[string]string{envConfigFile: a}
	getenv := func(k string) string { return env[k] }
	cfg, _, err := LoadConfig([]string{"--config", b}, getenv, &bytes.Buffer{})
	if err != nil || cfg.Provider != "from-b" || cfg.ConfigFile != b {
		t.Fatalf("got provider %q file %q err %v, want from-b from %s", cfg.Provider, cfg.ConfigFile, err, b)
	}
	cfg, _, err = LoadConfig(nil, getenv, &bytes.Buffer{})
	if err != nil || cfg.Provider != "from-a" {
		t.Fatalf("got provider %q err %v, want from-a", cfg.Provider, err)
	}
}

func TestInterpolation(t *testing.T) {
	env := map[string]string{"SECRET": "s3cr$t", "HOST": "router", "PORT": "9001", "PROXY": "10.1.0.0/16"}
	cfg, warns := mustLoad(t, loadCase{env: env, file: `
worker_secret: ${SECRET}
listen: "127.0.0.1:${PORT}"
admin_token: "pre-$${SECRET}-$HOME-$"
trusted_proxies: ["${PROXY}"]
backends:
  - url: http://${HOST}:8000
"${SECRET}": 1
`})
	if cfg.WorkerSecret != "s3cr$t" {
		t.Errorf("worker_secret = %q", cfg.WorkerSecret)
	}
	if cfg.Listen != "127.0.0.1:9001" {
		t.Errorf("listen = %q", cfg.Listen)
	}
	if cfg.AdminToken != "pre-${SECRET}-$HOME-$" {
		t.Errorf("admin_token = %q, want escapes and bare dollars kept", cfg.AdminToken)
	}
	if cfg.TrustedProxies[0] != netip.MustParsePrefix("10.1.0.0/16") {
		t.Errorf("trusted_proxies = %v", cfg.TrustedProxies)
	}
	if cfg.Backends[0].URL != "http://router:8000" {
		t.Errorf("backends[0].url = %q", cfg.Backends[0].URL)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], `unknown key "${SECRET}"`) {
		t.Errorf("keys must not be expanded; warnings %q", warns)
	}
}

func TestDurationForms(t *testing.T) {
	cases := []struct {
		name string
		lc   loadCase
		want time.Duration
	}{
		{"file go text", loadCase{file: "queue_timeout: 1m30s"}, 90 * time.Second},
		{"file int seconds", loadCase{file: "queue_timeout: 45"}, 45 * time.Second},
		{"file float seconds", loadCase{file: "queue_timeout: 1.5"}, 1500 * time.Millisecond},
		{"file string seconds", loadCase{file: `queue_timeout: "12"`}, 12 * time.Second},
		{"file zero", loadCase{file: "queue_timeout: 0"}, 0},
		{"toml int seconds", loadCase{file: "queue_timeout = 45", name: "c.toml"}, 45 * time.Second},
		{"toml float seconds", loadCase{file: "queue_timeout = 0.25", name: "c.toml"}, 250 * time.Millisecond},
		{"toml text", loadCase{file: `queue_timeout = "2h"`, name: "c.toml"}, 2 * time.Hour},
		{"env seconds", loadCase{env: map[string]string{"QUEUE_TIMEOUT_SECS": "60"}}, time.Minute},
		{"env float seconds", loadCase{env: map[string]string{"QUEUE_TIMEOUT_SECS": "0.5"}}, 500 * time.Millisecond},
		{"env go text", loadCase{env: map[string]string{"QUEUE_TIMEOUT_SECS": "100ms"}}, 100 * time.Millisecond},
		{"flag go text", loadCase{args: []string{"--queue-timeout", "2m"}}, 2 * time.Minute},
		{"flag seconds", loadCase{args: []string{"-queue-timeout=7"}}, 7 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := mustLoad(t, tc.lc)
			if cfg.QueueTimeout != tc.want {
				t.Errorf("queue_timeout = %v, want %v", cfg.QueueTimeout, tc.want)
			}
		})
	}
}

func TestListForms(t *testing.T) {
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	cases := []struct {
		name string
		lc   loadCase
	}{
		{"yaml list", loadCase{file: "trusted_proxies: [10.0.0.0/8, '::1']"}},
		{"yaml block list", loadCase{file: "trusted_proxies:\n  - 10.0.0.0/8\n  - ::1\n"}},
		{"yaml comma string", loadCase{file: "trusted_proxies: '10.0.0.0/8, ::1'"}},
		{"toml list", loadCase{file: `trusted_proxies = ["10.0.0.0/8", "::1"]`, name: "c.toml"}},
		{"toml comma string", loadCase{file: `trusted_proxies = "10.0.0.0/8,::1"`, name: "c.toml"}},
		{"env comma, blanks skipped", loadCase{env: map[string]string{"TRUSTED_PROXIES": " 10.0.0.0/8 ,, ::1 ,"}}},
		{"flag comma", loadCase{args: []string{"--trusted-proxies=10.0.0.0/8,::1"}}},
		{"host bits masked", loadCase{file: "trusted_proxies: [10.1.2.3/8, '::1']"}},
		{"ipv4-mapped unmapped", loadCase{file: "trusted_proxies: ['::ffff:10.0.0.0/104', '::1']"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := mustLoad(t, tc.lc)
			if !slices.Equal(cfg.TrustedProxies, want) {
				t.Errorf("trusted_proxies = %v, want %v", cfg.TrustedProxies, want)
			}
		})
	}
}

// trusted_origins: every list form, each origin written as browsers send Origin (compared
// byte for byte), and a one-line error naming the key for anything that is not
// scheme://host[:port]; the relay's options get the list.
func TestTrustedOrigins(t *testing.T) {
	want := []string{"https://app.example.com", "http://localhost:3000"}
	for _, lc := range []loadCase{
		{file: "trusted_origins: [https://app.example.com, 'http://localhost:3000']"},
		{file: `trusted_origins = "https://app.example.com,http://localhost:3000"`, name: "c.toml"},
		{env: map[string]string{"MODELRELAY_TRUSTED_ORIGINS": " https://app.example.com ,, http://localhost:3000"}},
		{args: []string{"--trusted-origins=HTTPS://App.Example.COM:443,http://localhost:3000"}},
	} {
		cfg, _ := mustLoad(t, lc)
		if !slices.Equal(cfg.TrustedOrigins, want) {
			t.Errorf("%+v: trusted_origins = %q, want %q", lc, cfg.TrustedOrigins, want)
		}
		if got := relayOptions(cfg, slog.New(slog.DiscardHandler), nil).TrustedOrigins; !slices.Equal(got, want) {
			t.Errorf("%+v: relay options get %q", lc, got)
		}
	}
	for in, out := range map[string]string{
		"http://app.example.com:80":  "http://app.example.com",
		"https://app.example.com:80": "https://app.example.com:80",
		"https://[::1]:8443":         "https://[::1]:8443",
		"http://127.0.0.1:8080":      "http://127.0.0.1:8080",
		"chrome-extension://abcdefg": "chrome-extension://abcdefg",
	} {
		if got, err := parseOrigin(in); err != nil || got != out {
			t.Errorf("parseOrigin(%q) = %q, %v; want %q", in, got, err, out)
		}
	}
	const hint = " (want scheme://host[:port], e.g. https://app.example.com)"
	for value, why := range map[string]string{
		"app.example.com":               "scheme and host required",
		"https://app.example.com/":      "no path, query or fragment (not even a trailing slash)",
		"https://app.example.com/chat":  "no path, query or fragment (not even a trailing slash)",
		"https://app.example.com?x=1":   "no path, query or fragment (not even a trailing slash)",
		"https://user@app.example.com":  "no user name or password",
		"https://app.example.com:":      "empty port",
		"https://app.example.com:99999": `invalid port "99999"`,
		"https://*.example.com":         `invalid host "*.example.com"`,
		"null":                          "scheme and host required",
		"mailto:ops@example.com":        "not a URL",
	} {
		_, _, err := loadCase{env: map[string]string{"MODELRELAY_TRUSTED_ORIGINS": value}}.load(t)
		if want := fmt.Sprintf("config: trusted_origins: invalid origin %q: %s", value, why) + hint; err == nil || err.Error() != want {
			t.Errorf("%q: error %v\nwant %s", value, err, want)
		}
	}
}

func TestValidationErrors(t *testing.T) {
	dir := t.TempDir()
	cert := filepath.Join(dir, "cert.pem")
	os.WriteFile(cert, []byte("x"), 0o600)
	enabled := func(key, val string) loadCase {
		return loadCase{file: validAppProxyYAML, env: map[string]string{"APPPROXY_" + strings.ToUpper(key): val}}
	}
	without := func(key string) loadCase {
		var lines []string
		for _, l := range strings.Split(validAppProxyYAML, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), key+":") {
				lines = append(lines, l)
			}
		}
		return loadCase{file: strings.Join(lines, "\n")}
	}
	file := func(s string) loadCase { return loadCase{file: s} }
	cases := []struct {
		name string
		lc   loadCase
		want string
	}{
		{"duration text", file("queue_timeout: abc"), `config: queue_timeout: invalid duration "abc" (want e.g. 30s, 5m or a number of seconds)`},
		{"duration negative", file("request_timeout: -5"), `config: request_timeout: must not be negative, got -5`},
		{"duration negative text", loadCase{env: map[string]string{"DRAIN_TIMEOUT_SECS": "-1s"}}, `config: drain_timeout: must not be negative, got "-1s"`},
		{"duration type", file("queue_timeout: [1]"), `config: queue_timeout: invalid duration [1]`},
		{"integer text", loadCase{env: map[string]string{"MAX_QUEUE_LEN": "ten"}}, `config: max_queue_len: invalid integer "ten"`},
		{"integer fraction", file("max_queue_len: 1.5"), `config: max_queue_len: invalid integer 1.5`},
		{"integer negative", loadCase{args: []string{"--max-queue-len=-1"}}, `config: max_queue_len: must not be negative, got -1`},
		{"integer too large", file("max_models_per_worker: 99999999999"), `config: max_models_per_worker: too large: 99999999999`},
		{"body zero", file("max_body_bytes: 0"), `config: max_body_bytes: must be positive`},
		{"models zero", file("max_models_per_worker: 0"), `config: max_models_per_worker: must be positive`},
		{"stream zero", file("max_stream_bytes: 0"), `config: max_stream_bytes: must be positive`},
		{"boolean", loadCase{env: map[string]string{"REQUIRE_PROTOCOL_VERSION": "maybe"}}, `config: require_protocol_version: invalid boolean "maybe" (want true or false)`},
		{"string type hides value", file("worker_secret: 12345"), `config: worker_secret: must be a string (quote the value)`},
		{"log level", file("log_level: verbose"), `config: log_level: unknown level "verbose" (want debug, info, warn or error)`},
		{"log format", loadCase{args: []string{"--log-format", "xml"}}, `config: log_format: unknown format "xml" (want text or json)`},
		{"listen", file("listen: localhost"), `config: listen: invalid address "localhost" (want host:port)`},
		{"listen port", file("listen: 'localhost:http'"), `config: listen: invalid port in "localhost:http"`},
		{"provider empty", file("provider: ''"), `config: provider: must not be empty`},
		{"trusted proxies", file("trusted_proxies: 10.0.0/8"), `config: trusted_proxies: invalid CIDR "10.0.0/8"`},
		{"trusted proxies zone", file("trusted_proxies: 'fe80::1%eth0'"), `config: trusted_proxies: invalid CIDR "fe80::1%eth0"`},
		{"list element type", file("trusted_proxies: [10.0.0.0/8, 7]"), `config: trusted_proxies[1]: must be a string`},
		{"list type", file("trusted_proxies: {a: b}"), `config: trusted_proxies: must be a list or a comma-separated string`},
		{"backends shape", file("backends: {name: x}"), `config: backends: must be a list`},
		{"backend shape", file("backends: [x]"), `config: backends[0]: must be a mapping`},
		{"backend url missing", file("backends: [{name: a}]"), `config: backends[0].url: required`},
		{"backend url scheme", file("backends: [{url: 'http://a:1'}, {url: 'ftp://u:pw@b'}]"), `config: backends[1].url: invalid URL "ftp://u:xxxxx@b" (want http:// or https://)`},
		{"backend url host", file("backends: [{url: 'http:///v1'}]"), `config: backends[0].url: invalid URL "http:///v1" (no host)`},
		{"backend url parse", file("backends: [{url: 'http://a b:%zz'}]"), `config: backends[0].url: invalid URL (want http://host:port)`},
		{"backend duplicate name", file("backends: [{url: 'http://a:1'}, {url: 'http://a:1'}]"), `config: backends[1].name: "a:1" is already used by backends[0]`},
		{"backend weight", file("backends: [{url: 'http://a:1', weight: 0}]"), `config: backends[0].weight: must be positive, got 0`},
		{"backend dialect", file("backends: [{url: 'http://a:1', dialects: [openai, gemini]}]"), `config: backends[0].dialects: unknown API family "gemini" (want openai, anthropic, responses or auto)`},
		{"backend dialect auto mixed", file("backends: [{url: 'http://a:1', dialects: [auto, openai]}]"), `config: backends[0].dialects: "auto" cannot be combined with a family`},
		{"worker grace negative", loadCase{env: map[string]string{"WORKER_GRACE": "-1s"}}, `config: worker_grace: must not be negative, got "-1s"`},
		{"worker grace text", loadCase{args: []string{"--worker-grace=soon"}}, `config: worker_grace: invalid duration "soon" (want e.g. 30s, 5m or a number of seconds)`},
		{"worker grace zero ok", file("worker_grace: 0"), ""},
		{"breaker failures zero", file("breaker_failures: 0"), `config: breaker_failures: must be at least 1, got 0`},
		{"breaker failures negative", loadCase{env: map[string]string{"BREAKER_FAILURES": "-3"}}, `config: breaker_failures: must not be negative, got -3`},
		{"breaker failures text", loadCase{args: []string{"--breaker-failures", "five"}}, `config: breaker_failures: invalid integer "five"`},
		{"breaker cooldown zero", loadCase{args: []string{"--breaker-cooldown=0s"}}, `config: breaker_cooldown: must be positive`},
		{"breaker cooldown negative", file("breaker_cooldown: -1"), `config: breaker_cooldown: must not be negative, got -1`},
		{"breaker max below cooldown", loadCase{env: map[string]string{"BREAKER_COOLDOWN": "10s", "BREAKER_MAX_COOLDOWN": "5s"}}, `config: breaker_max_cooldown: must be at least breaker_cooldown (10s), got 5s`},
		{"breaker max below default cooldown", file("breaker_max_cooldown: 1"), `config: breaker_max_cooldown: must be at least breaker_cooldown (5s), got 1s`},
		{"breaker max equal ok", file("breaker_cooldown: 7s\nbreaker_max_cooldown: 7"), ""},
		{"slow start negative", loadCase{env: map[string]string{"SLOW_START": "-30s"}}, `config: slow_start: must not be negative, got "-30s"`},
		{"slow start text", loadCase{args: []string{"--slow-start=gradual"}}, `config: slow_start: invalid duration "gradual" (want e.g. 30s, 5m or a number of seconds)`},
		{"slow start zero ok", file("slow_start: 0"), ""},
		{"http server unknown", file("http_server: fasthttp"), `config: http_server: unknown server "fasthttp" (want net/http or lean)`},
		{"http server empty", loadCase{args: []string{"--http-server="}}, `config: http_server: unknown server "" (want net/http or lean)`},
		{"http server type", file("http_server: 1"), `config: http_server: must be a string (quote the value)`},
		{"http server case ok", loadCase{env: map[string]string{"MODELRELAY_HTTP_SERVER": " LEAN "}}, ""},
		{"routing unknown", file("routing: round_robin"), `config: routing: unknown policy "round_robin" (want least_load or cache_aware)`},
		{"routing empty", loadCase{args: []string{"--routing="}}, `config: routing: unknown policy "" (want least_load or cache_aware)`},
		{"routing type", file("routing: 1"), `config: routing: must be a string (quote the value)`},
		{"routing case ok", loadCase{env: map[string]string{"ROUTING": " Cache_Aware "}}, ""},
		{"affinity ttl zero", loadCase{args: []string{"--affinity-ttl=0s"}}, `config: affinity_ttl: must be positive`},
		{"affinity ttl negative", loadCase{env: map[string]string{"AFFINITY_TTL": "-5m"}}, `config: affinity_ttl: must not be negative, got "-5m"`},
		{"affinity ttl text", file("affinity_ttl: forever"), `config: affinity_ttl: invalid duration "forever" (want e.g. 30s, 5m or a number of seconds)`},
		{"affinity slack negative", loadCase{env: map[string]string{"AFFINITY_SLACK": "-1"}}, `config: affinity_slack: must not be negative, got -1`},
		{"affinity slack text", loadCase{args: []string{"--affinity-slack", "two"}}, `config: affinity_slack: invalid integer "two"`},
		{"affinity slack fraction", file("affinity_slack: 1.5"), `config: affinity_slack: invalid integer 1.5`},
		{"affinity slack zero ok", file("affinity_slack: 0"), ""},
		{"prefix min match zero", file("prefix_min_match: 0"), `config: prefix_min_match: must be greater than 0 and at most 1, got 0`},
		{"prefix min match above one", loadCase{args: []string{"--prefix-min-match=1.5"}}, `config: prefix_min_match: must be greater than 0 and at most 1, got 1.5`},
		{"prefix min match negative", loadCase{env: map[string]string{"PREFIX_MIN_MATCH": "-0.1"}}, `config: prefix_min_match: must be greater than 0 and at most 1, got -0.1`},
		{"prefix min match text", file("prefix_min_match: half"), `config: prefix_min_match: invalid number "half"`},
		{"prefix min match nan", loadCase{env: map[string]string{"PREFIX_MIN_MATCH": "NaN"}}, `config: prefix_min_match: invalid number "NaN"`},
		{"prefix min match one ok", file("prefix_min_match: 1"), ""},
		{"prefix cache entries zero", file("prefix_cache_entries: 0"), `config: prefix_cache_entries: must be at least 1, got 0`},
		{"prefix cache entries above max", loadCase{env: map[string]string{"PREFIX_CACHE_ENTRIES": "16777217"}}, `config: prefix_cache_entries: must be at most 16777216, got 16777217`},
		{"prefix cache entries too large", file("prefix_cache_entries: 99999999999"), `config: prefix_cache_entries: too large: 99999999999`},
		{"prefix cache entries negative", loadCase{args: []string{"--prefix-cache-entries=-1"}}, `config: prefix_cache_entries: must not be negative, got -1`},
		{"prefix cache entries max ok", file("prefix_cache_entries: 16777216"), ""},
		{"priority aging zero", file("priority_aging: 0"), `config: priority_aging: must be positive`},
		{"priority aging negative", loadCase{args: []string{"--priority-aging=-10s"}}, `config: priority_aging: must not be negative, got "-10s"`},
		{"key cache ttl zero", file("key_cache_ttl: 0"), `config: key_cache_ttl: must be above 0 and at most 5s (how late a revocation may take effect), got 0s`},
		{"key cache ttl too long", loadCase{env: map[string]string{"KEY_CACHE_TTL": "1m"}}, `config: key_cache_ttl: must be above 0 and at most 5s (how late a revocation may take effect), got 1m0s`},
		{"usage max pending zero", loadCase{args: []string{"--usage-max-pending=0"}}, `config: usage_max_pending: must be at least 1, got 0`},
		{"database url not postgres", loadCase{env: map[string]string{"DATABASE_URL": "mysql://db/x"}}, `config: database_url: must be a postgres:// or postgresql:// URL`},
		{"redis url not redis", loadCase{env: map[string]string{"REDIS_URL": "http://cache:6379"}}, `config: redis_url: redis: invalid URL scheme: http`},
		{"priority aging text", loadCase{env: map[string]string{"PRIORITY_AGING": "often"}}, `config: priority_aging: invalid duration "often" (want e.g. 30s, 5m or a number of seconds)`},
		{"max client priority unknown", file("max_client_priority: urgent"), `config: max_client_priority: unknown class "urgent" (want high, normal or low)`},
		{"max client priority empty", loadCase{args: []string{"--max-client-priority="}}, `config: max_client_priority: unknown class "" (want high, normal or low)`},
		{"max client priority type", file("max_client_priority: 1"), `config: max_client_priority: must be a string (quote the value)`},
		{"max client priority env", loadCase{env: map[string]string{"MODELRELAY_MAX_CLIENT_PRIORITY": "highest"}}, `config: max_client_priority: unknown class "highest" (want high, normal or low)`},
		{"max client priority case ok", loadCase{env: map[string]string{"MODELRELAY_MAX_CLIENT_PRIORITY": " Normal "}}, ""},
		{"fallbacks shape", file("fallbacks: [a, b]"), `config: fallbacks: must be a mapping (model: [alternate, ...])`},
		{"fallbacks shape toml", loadCase{file: `fallbacks = "a"`, name: "c.toml"}, `config: fallbacks: must be a mapping (model: [alternate, ...])`},
		{"fallbacks chain type", file("fallbacks: {a: {b: c}}"), `config: fallbacks.a: must be a list of model names`},
		{"fallbacks chain number", file("fallbacks: {a: 7}"), `config: fallbacks.a: must be a list of model names`},
		{"fallbacks element type", file("fallbacks: {a: [b, 7]}"), `config: fallbacks.a[1]: must be a string`},
		{"fallbacks element empty", file("fallbacks: {a: [b, '  ']}"), `config: fallbacks.a[1]: must not be empty`},
		{"fallbacks string empty", file("fallbacks: {a: ''}"), `config: fallbacks.a[0]: must not be empty`},
		{"fallbacks empty model", file("fallbacks: {'': [b]}"), `config: fallbacks: a model name is empty`},
		{"fallbacks blank model", file("fallbacks: {' a': [b]}"), `config: fallbacks." a": model name has leading or trailing blanks`},
		{"fallbacks control char model", file(`fallbacks: {"a\nb": ["a\nb"]}`), `config: fallbacks."a\nb": the chain lists "a\nb" itself`},
		{"fallbacks itself", file("fallbacks:\n  llama-3-70b: [llama-3-8b, llama-3-70b]\n"), `config: fallbacks.llama-3-70b: the chain lists "llama-3-70b" itself`},
		{"fallbacks itself as string", file("fallbacks: {m: m}"), `config: fallbacks.m: the chain lists "m" itself`},
		{"fallbacks duplicate", file("fallbacks:\n  b: [x]\n  a: [x, y, x]\n"), `config: fallbacks.a: "x" is listed twice`},
		{"fallbacks duplicate after trim", loadCase{file: "[fallbacks]\n\"m.1\" = [\"x\", \" x \"]\n", name: "c.toml"}, `config: fallbacks.m.1: "x" is listed twice`},
		{"fallbacks empty list ok", file("fallbacks: {a: []}"), ""},
		{"backend api key type", file("backends: [{url: 'http://a:1', api_key: 12345}]"), `config: backends[0].api_key: must be a string (quote the value)`},
		{"backend api key bearer", file("backends: [{url: 'https://a', api_key: 'Bearer sk-12345'}]"), `config: backends[0].api_key: must be the bare key, without blanks (the relay adds "Bearer " itself)`},
		{"backend api key control", file(`backends: [{url: 'https://a', api_key: "sk-1\u000112345"}]`), `config: backends[0].api_key: must not contain control characters`},
		{"backend api key unset env", file("backends: [{url: 'https://a', api_key: '${NO_SUCH_KEY}'}]"), `config: backends[0].api_key: environment variable NO_SUCH_KEY is not set`},
		{"default max tokens", file("default_max_tokens: 0"), `config: default_max_tokens: must be positive, got 0`},
		{"backend weight text", file("backends: [{url: 'http://a:1', weight: heavy}]"), `config: backends[0].weight: invalid number "heavy"`},
		{"backend concurrency", file("backends: [{url: 'http://a:1', max_concurrent: -2}]"), `config: backends[0].max_concurrent: must not be negative, got -2`},
		{"backend models", file("backends: [{url: 'http://a:1', models: [x, 1]}]"), `config: backends[0].models[1]: must be a string`},
		{"appproxy shape", file("appproxy: true"), `config: appproxy: must be a mapping`},
		{"appproxy enabled", loadCase{env: map[string]string{"APPPROXY_ENABLED": "sure"}}, `config: appproxy.enabled: invalid boolean "sure" (want true or false)`},
		{"coordinator missing", without("coordinator_url"), `config: appproxy.coordinator_url: required when appproxy.enabled is true`},
		{"api secret missing", without("api_secret"), `config: appproxy.api_secret: required when appproxy.enabled is true`},
		{"jwt secret missing", without("jwt_secret"), `config: appproxy.jwt_secret: required when appproxy.enabled is true`},
		{"hostname missing", without("hostname"), `config: appproxy.hostname: required when appproxy.enabled is true`},
		{"wildcard missing", without("wildcard_domain"), `config: appproxy.wildcard_domain: required when appproxy.enabled is true`},
		{"events with redis ok", enabled("events_enabled", "true"), ""},
		{"redis missing", loadCase{file: strings.Replace(without("redis_url").file, "live_markers: false", "live_markers: true", 1)}, `config: appproxy.redis_url: required when appproxy.enabled is true`},
		{"api port zero", loadCase{file: without("api_port").file, args: []string{"--listen=127.0.0.1:0"}}, `config: appproxy.api_port: required: the listen port is 0`},
		{"api port range", enabled("api_port", "70000"), `config: appproxy.api_port: must be a port number 1-65535, got 70000`},
		{"traffic port range", enabled("wildcard_traffic_port", "0"), `config: appproxy.wildcard_traffic_port: must be a port number 1-65535, got 0`},
		{"coordinator scheme", enabled("coordinator_url", "coordinator:10200"), `config: appproxy.coordinator_url: invalid URL "coordinator:10200" (want http:// or https://)`},
		{"coordinator host", enabled("coordinator_url", "http://"), `config: appproxy.coordinator_url: invalid URL "http:" (no host)`},
		{"redis scheme", enabled("redis_url", "http://redis:6379"), `config: appproxy.redis_url: invalid URL "http://redis:6379" (want redis:// or rediss://)`},
		{"redis db hides password", enabled("redis_url", "redis://:pw@redis:6379/x"), `config: appproxy.redis_url: invalid URL "redis://:xxxxx@redis:6379/x": redis: invalid database number: "x"`},
		{"redis sentinel ok", enabled("redis_url", "redis://sentinel:26379?master_name=mymaster"), ""},
		{"wildcard dot", enabled("wildcard_domain", "models.example.com"), `config: appproxy.wildcard_domain: must start with a dot`},
		{"wildcard name", enabled("wildcard_domain", ".models..example.com"), `config: appproxy.wildcard_domain: invalid domain ".models..example.com"`},
		{"aggregation host", enabled("aggregation_hosts", "ok.example.com,https://bad"), `config: appproxy.aggregation_hosts: invalid host "https://bad" (want a bare host name, no scheme or port)`},
		{"heartbeat zero", enabled("heartbeat_period", "0"), `config: appproxy.heartbeat_period: must be positive`},
		{"reconcile zero", enabled("reconcile_interval", "0s"), `config: appproxy.reconcile_interval: must be positive`},
		{"health zero", enabled("health_check_interval", "0"), `config: appproxy.health_check_interval: must be positive`},
		{"route concurrency", enabled("route_max_concurrent", "-1"), `config: appproxy.route_max_concurrent: must not be negative, got -1`},
		{"tls without cert or key", enabled("tls_listen", "true"), "config: appproxy.tls_cert: required when appproxy.tls_listen is true\n" +
			"config: appproxy.tls_key: required when appproxy.tls_listen is true"},
		{"tls without key", loadCase{file: validAppProxyYAML, env: map[string]string{"APPPROXY_TLS_LISTEN": "1", "APPPROXY_TLS_CERT": cert}}, `config: appproxy.tls_key: required when appproxy.tls_listen is true`},
		{"tls key missing file", loadCase{file: validAppProxyYAML, env: map[string]string{"APPPROXY_TLS_LISTEN": "on", "APPPROXY_TLS_CERT": cert, "APPPROXY_TLS_KEY": filepath.Join(dir, "nope.pem")}}, `config: appproxy.tls_key: stat ` + filepath.Join(dir, "nope.pem") + `: no such file or directory`},
		{"tls ok", loadCase{file: validAppProxyYAML, env: map[string]string{"APPPROXY_TLS_LISTEN": "yes", "APPPROXY_TLS_CERT": cert, "APPPROXY_TLS_KEY": cert}}, ""},
		{"tls with the lean server", loadCase{file: validAppProxyYAML + "http_server: lean\n", env: map[string]string{"APPPROXY_TLS_LISTEN": "yes", "APPPROXY_TLS_CERT": cert, "APPPROXY_TLS_KEY": cert}}, `config: http_server: lean serves plain HTTP/1.1 only; appproxy.tls_listen needs net/http`},
		{"tls with net/http", loadCase{file: validAppProxyYAML + "http_server: net/http\n", env: map[string]string{"APPPROXY_TLS_LISTEN": "yes", "APPPROXY_TLS_CERT": cert, "APPPROXY_TLS_KEY": cert}}, ""},
		{"lean without worker mode's tls", loadCase{file: "http_server: lean\nappproxy: {tls_listen: true, tls_cert: " + cert + ", tls_key: " + cert + "}\n"}, ""},
		{"unset variable", file("appproxy:\n  api_secret: ${NO_SUCH_VAR}\n"), `config: appproxy.api_secret: environment variable NO_SUCH_VAR is not set`},
		{"unset variable in list", file("backends:\n  - url: http://a\n    models: [x, '${NOPE}']\n"), `config: backends[0].models[1]: environment variable NOPE is not set`},
		{"unterminated variable", file("admin_token: 'a${B'"), `config: admin_token: unterminated "${"`},
		{"bad variable", file("admin_token: '${B:-x}'"), `config: admin_token: invalid variable reference "${B:-x}" (want ${NAME})`},
		{"unknown flag", loadCase{args: []string{"--listn=x"}}, `config: flag provided but not defined: -listn (see --help)`},
		{"stray argument", loadCase{args: []string{"--require-api-keys", "false"}}, `config: unexpected argument "false" (boolean flags take --flag=false; see --help)`},
		{"yaml syntax", file("listen: [\n"), "config: "},
		{"missing file", loadCase{env: map[string]string{envConfigFile: filepath.Join(dir, "none.yaml")}}, `config: read config file: open ` + filepath.Join(dir, "none.yaml") + `: no such file or directory`},

		// Every problem at once, one line each, in the order of the settings table whichever
		// layer set the value and whichever check found it.
		{"three at once", loadCase{file: "log_level: verbose\nqueue_timeout: abc\n", args: []string{"--listen=localhost"}},
			"config: listen: invalid address \"localhost\" (want host:port)\n" +
				"config: queue_timeout: invalid duration \"abc\" (want e.g. 30s, 5m or a number of seconds)\n" +
				"config: log_level: unknown level \"verbose\" (want debug, info, warn or error)"},
		{"every unset variable", file("admin_token: ${NO_ADMIN}\nworker_secret: ${NO_WORKER}\nappproxy:\n  enabled: true\n  api_secret: ${NO_API}\n" +
			"  coordinator_url: http://c:1\n  jwt_secret: j\n  hostname: h\n  wildcard_domain: .m.example\n  redis_url: redis://r:6379\n"),
			"config: worker_secret: environment variable NO_WORKER is not set\n" +
				"config: admin_token: environment variable NO_ADMIN is not set\n" +
				"config: appproxy.api_secret: environment variable NO_API is not set"},
		{"a bad value is named once", file("max_body_bytes: lots\nbreaker_cooldown: soon\n"),
			"config: max_body_bytes: invalid integer \"lots\"\nconfig: breaker_cooldown: invalid duration \"soon\" (want e.g. 30s, 5m or a number of seconds)"},
		{"every bad backend field", file("backends: [{url: 'ftp://a', weight: 0}, {name: b, dialects: [gemini]}]"),
			"config: backends[0].url: invalid URL \"ftp://a\" (want http:// or https://)\n" +
				"config: backends[0].weight: must be positive, got 0\n" +
				"config: backends[1].url: required\n" +
				"config: backends[1].dialects: unknown API family \"gemini\" (want openai, anthropic, responses or auto)"},
		{"flag errors stop at once", loadCase{args: []string{"--listn=x", "--queue-timeout=abc"}}, `config: flag provided but not defined: -listn (see --help)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tc.lc.load(t)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			msg := err.Error()
			for _, line := range strings.Split(msg, "\n") {
				if !strings.HasPrefix(line, "config: ") {
					t.Errorf("error line %q does not start with \"config: \"", line)
				}
			}
			if tc.want == "config: " {
				if !strings.HasPrefix(msg, tc.want) {
					t.Errorf("error %q, want prefix %q", msg, tc.want)
				}
				return
			}
			if msg != tc.want {
				t.Errorf("error\n got %s\nwant %s", msg, tc.want)
			}
			if strings.Contains(msg, "sk-") {
				t.Errorf("error leaks an api_key: %s", msg)
			}
			for _, secret := range []string{"pw", "12345", "api-s", "jwt-s"} {
				if strings.Contains(strings.ReplaceAll(msg, "xxxxx", ""), ":"+secret+"@") || strings.HasSuffix(msg, secret) {
					t.Errorf("error leaks %q: %s", secret, msg)
				}
			}
		})
	}
}

func TestUnknownKeyWarnings(t *testing.T) {
	_, warns, err := loadCase{file: `
max_queue_length: 5
worker_secret: s
appproxy:
  enabled: false
  heartbeat: 5s
backends:
  - url: https://a:1
    wieght: 2
    api_key: k
    apikey: k
zzz: 1
fallbacks:
  m: [n]
fallback:
  m: [n]
breaker_failure: 3
affinity_tll: 1m
prefix_min_matches: 0.5
`}.load(t)
	if err != nil {
		t.Fatal(err)
	}
	wantParts := []string{
		`unknown key "max_queue_length" ignored (did you mean "max_queue_len"?)`,
		`unknown key "zzz" ignored`,
		`unknown key "appproxy.heartbeat" ignored`,
		`unknown key "backends[0].wieght" ignored (did you mean "weight"?)`,
		`unknown key "backends[0].apikey" ignored (did you mean "api_key"?)`,
		`unknown key "fallback" ignored (did you mean "fallbacks"?)`,
		`unknown key "breaker_failure" ignored (did you mean "breaker_failures"?)`,
		`unknown key "affinity_tll" ignored (did you mean "affinity_ttl"?)`,
		`unknown key "prefix_min_matches" ignored (did you mean "prefix_min_match"?)`,
	}
	for _, part := range wantParts {
		if !slices.ContainsFunc(warns, func(w string) bool { return strings.Contains(w, part) }) {
			t.Errorf("no warning containing %q in %q", part, warns)
		}
	}
	if len(warns) != len(wantParts) {
		t.Errorf("got %d warnings, want %d: %q", len(warns), len(wantParts), warns)
	}
}

func TestUnknownKeyWarningSurvivesError(t *testing.T) {
	_, _, err := loadCase{file: validAppProxyYAML + "  api_secert: x\n"}.load(t)
	if err != nil {
		t.Fatalf("unexpected error %v", err)
	}
	_, warns, err := loadCase{file: strings.Replace(validAppProxyYAML, "api_secret:", "api_secert:", 1)}.load(t)
	if err == nil || !strings.Contains(err.Error(), "appproxy.api_secret: required") {
		t.Fatalf("err = %v", err)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], `"appproxy.api_secert" ignored (did you mean "api_secret"?)`) {
		t.Errorf("warnings %q", warns)
	}
}

// TestUnknownEnvWarnings: a set MODELRELAY_* or APPPROXY_* variable that names no setting is
// warned about like an unknown file key, with a suggestion; variables the file interpolates,
// unprefixed ones and ones the caller's getenv does not see are not.
func TestUnknownEnvWarnings(t *testing.T) {
	env := map[string]string{
		"MODELRELAY_ADMIN_TOKN":              "a", // a typo of MODELRELAY_ADMIN_TOKEN
		"APPPROXY_API_SECRT":                 "b", // of APPPROXY_API_SECRET
		"MODELRELAY_WORKER_SECRET":           "c", // a prefixed WORKER_SECRET
		"MODELRELAY_SOMETHING_ELSE_ENTIRELY": "d",
		"MODELRELAY_FILE_SECRET":             "e", // interpolated by the file below
		"MODELRELAY_ADMIN_TOKEN":             "f",
		"MODELRELAY_PPROF":                   "127.0.0.1:0",
		"APPPROXY_HOSTNAME":                  "h",
		"WORKER_SECERT":                      "g", // unprefixed: other programs' names
	}
	names := append(environ(env), "MODELRELAY_NOT_SEEN=1") // getenv has no value for it
	_, warns, err := loadCase{}.loadWith(t, env, names, "worker_secret: ${MODELRELAY_FILE_SECRET}\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`config: environment: unknown variable "APPPROXY_API_SECRT" ignored (did you mean "APPPROXY_API_SECRET"?)`,
		`config: environment: unknown variable "MODELRELAY_ADMIN_TOKN" ignored (did you mean "MODELRELAY_ADMIN_TOKEN"?)`,
		`config: environment: unknown variable "MODELRELAY_SOMETHING_ELSE_ENTIRELY" ignored`,
		`config: environment: unknown variable "MODELRELAY_WORKER_SECRET" ignored (did you mean "WORKER_SECRET"?)`,
	}
	// The appproxy keys set while appproxy.enabled is false are warned about after these.
	if len(warns) < len(want) || !slices.Equal(warns[:len(want)], want) {
		t.Errorf("warnings\n got %q\nwant %q first", warns, want)
	}

	// The warning comes even when the configuration is refused: the typo often explains it.
	env = map[string]string{"MODELRELAY_DEM": "true", "MODELRELAY_DEMO": "maybe"}
	_, warns, err = loadConfig(nil, func(k string) string { return env[k] }, environ(env))
	if err == nil || len(warns) != 1 || !strings.Contains(warns[0], `"MODELRELAY_DEM" ignored (did you mean "MODELRELAY_DEMO"?)`) {
		t.Errorf("err %v, warnings %q", err, warns)
	}

	// LoadConfig takes the names from the process environment, the values from getenv.
	t.Setenv("MODELRELAY_REQUIRE_API_KEY", "true")
	if _, warns, _ := LoadConfig(nil, os.Getenv, &bytes.Buffer{}); !slices.ContainsFunc(warns, func(w string) bool {
		return strings.Contains(w, `"MODELRELAY_REQUIRE_API_KEY" ignored (did you mean "MODELRELAY_REQUIRE_API_KEYS"?)`)
	}) {
		t.Errorf("LoadConfig with os.Getenv: warnings %q", warns)
	}
	if _, warns, _ := LoadConfig(nil, func(string) string { return "" }, &bytes.Buffer{}); slices.ContainsFunc(warns, func(w string) bool {
		return strings.Contains(w, "MODELRELAY_REQUIRE_API_KEY")
	}) {
		t.Errorf("a variable getenv does not see was warned about: %q", warns)
	}
}

// loadWith loads file (if any) with getenv reading env and the names in environ.
func (lc loadCase) loadWith(t *testing.T, env map[string]string, environ []string, file string) (Config, []string, error) {
	t.Helper()
	args := lc.args
	if file != "" {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"--config", path}, args...)
	}
	return loadConfig(args, func(k string) string { return env[k] }, environ)
}

// TestConfigProblemsPrintedAtOnce: the process prints every problem, each on its own line
// naming its key, and exits 1.
func TestConfigProblemsPrintedAtOnce(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"--listen=localhost", "--queue-timeout=abc", "--log-level=verbose"},
		func(string) string { return "" }, &stdout, &stderr)
	if code != 1 || stdout.Len() != 0 {
		t.Fatalf("exit %d, stdout %q", code, stdout.String())
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	want := []string{"listen: ", "queue_timeout: ", "log_level: "}
	if len(lines) != len(want) {
		t.Fatalf("stderr %q, want %d lines", stderr.String(), len(want))
	}
	for i, key := range want {
		if !strings.HasPrefix(lines[i], "modelrelay-server: config: "+key) {
			t.Errorf("line %d %q does not name %s", i+1, lines[i], key)
		}
	}
}

// TestConfiguredLoggerWritesReadableDurations: durations appear as Go duration text in both
// formats (slog's JSON handler would write nanoseconds), inside groups too.
func TestConfiguredLoggerWritesReadableDurations(t *testing.T) {
	var buf bytes.Buffer
	newLogger(Config{LogFormat: "json", LogLevel: "info"}, &buf).Info("drained",
		"took", 1500*time.Millisecond, slog.Group("queue", slog.Duration("wait", 2*time.Minute)), "n", 3)
	var line struct {
		Took  any `json:"took"`
		Queue struct {
			Wait any `json:"wait"`
		} `json:"queue"`
		N any `json:"n"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	if line.Took != "1.5s" || line.Queue.Wait != "2m0s" || line.N != 3.0 {
		t.Errorf("JSON line %s: took %v, queue.wait %v, n %v", buf.String(), line.Took, line.Queue.Wait, line.N)
	}

	buf.Reset()
	newLogger(Config{LogFormat: "text", LogLevel: "info"}, &buf).Info("drained", "took", 1500*time.Millisecond)
	if !strings.Contains(buf.String(), " took=1.5s") {
		t.Errorf("text line %q", buf.String())
	}
}

func TestOperatorWarnings(t *testing.T) {
	cases := []struct {
		name string
		lc   loadCase
		want []string // substrings, one per expected warning
	}{
		{"heartbeat at coordinator timeout", loadCase{file: validAppProxyYAML, env: map[string]string{"APPPROXY_HEARTBEAT_PERIOD": "30"}},
			[]string{"appproxy.heartbeat_period: 30s is not below the coordinator's 30s timeout"}},
		{"heartbeat below timeout", loadCase{file: validAppProxyYAML, env: map[string]string{"APPPROXY_HEARTBEAT_PERIOD": "29.9"}}, nil},
		{"appproxy keys while disabled", loadCase{env: map[string]string{"WORKER_SECRET": "s", "APPPROXY_API_SECRET": "x"}, file: "appproxy:\n  hostname: h\n"},
			[]string{"appproxy.api_secret, appproxy.hostname set but appproxy.enabled is false"}},
		{"nothing can serve", loadCase{}, []string{"no worker secret is set, so relay workers cannot join: set --worker-secret or WORKER_SECRET"}},
		{"backends can serve", loadCase{file: "backends: [{url: 'http://a:1'}]"}, nil},
		{"api keys", loadCase{args: []string{"--require-api-keys", "--worker-secret=s"}}, nil},
		{"workers may join with keys", loadCase{env: map[string]string{"DATABASE_URL": "postgres://db/relay"}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, warns := mustLoad(t, tc.lc)
			if len(warns) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", warns, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(warns[i], w) || strings.Contains(warns[i], "\n") {
					t.Errorf("warning %q does not contain %q", warns[i], w)
				}
			}
		})
	}
}

// TestTLSTakesNetHTTP: with worker mode's TLS listener, http_server left to its default is
// net/http, whatever the default (the lean server has no TLS); asked for lean, it is an error
// (TestValidationErrors).
func TestTLSTakesNetHTTP(t *testing.T) {
	dir := t.TempDir()
	cert := filepath.Join(dir, "cert.pem")
	os.WriteFile(cert, []byte("x"), 0o600)
	cfg, _ := mustLoad(t, loadCase{file: validAppProxyYAML,
		env: map[string]string{"APPPROXY_TLS_LISTEN": "true", "APPPROXY_TLS_CERT": cert, "APPPROXY_TLS_KEY": cert}})
	if cfg.HTTPServer != "net/http" {
		t.Fatalf("http_server = %q under TLS, want net/http", cfg.HTTPServer)
	}
}

func TestHelpAndVersion(t *testing.T) {
	cases := []struct {
		args []string
		want error
	}{
		{[]string{"-h"}, errHelp},
		{[]string{"--help"}, errHelp},
		{[]string{"-help"}, errHelp},
		{[]string{"--listen=x", "--help"}, errHelp},
		{[]string{"--version"}, errVersion},
		{[]string{"--version", "--config=/does/not/exist"}, errVersion},
	}
	for _, tc := range cases {
		var stderr bytes.Buffer
		_, _, err := LoadConfig(tc.args, func(string) string { return "" }, &stderr)
		if !errors.Is(err, tc.want) {
			t.Errorf("%q: err = %v, want %v", tc.args, err, tc.want)
		}
		if stderr.Len() != 0 {
			t.Errorf("%q: wrote to stderr: %q", tc.args, stderr.String())
		}
	}
}

func TestUsageNamesEveryFlag(t *testing.T) {
	text := usageText()
	for _, s := range settings {
		if !strings.Contains(text, "--"+s.flag+" ") || !strings.Contains(text, "env "+s.env+",") {
			t.Errorf("usage misses --%s or env %s", s.flag, s.env)
		}
	}
	for _, s := range []string{"--config FILE", envConfigFile, "--version", "--help", "backends:", "appproxy:", "APPPROXY_"} {
		if !strings.Contains(text, s) {
			t.Errorf("usage misses %q", s)
		}
	}
	for i, line := range strings.Split(text, "\n") {
		if len(line) > 90 {
			t.Errorf("usage line %d is %d columns: %q", i+1, len(line), line)
		}
	}
}

// TestConfigAPIKey: a backend's api_key takes ${ENV}, reaches relay.Backend, and appears in
// no summary, print or error; an http:// URL to another host is warned about.
func TestConfigAPIKey(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	cfg, warns := mustLoad(t, loadCase{
		env: map[string]string{"OPENAI_API_KEY": key, "WORKER_SECRET": "s"},
		file: `
backends:
  - name: cloud
    url: https://api.openai.com
    models: [gpt-4o-mini]
    api_key: ${OPENAI_API_KEY}
  - name: local
    url: http://127.0.0.1:8000
    api_key: "local-${OPENAI_API_KEY}"
  - name: plain
    url: http://10.0.0.5:8000
`})
	if cfg.Backends[0].APIKey != key || cfg.Backends[1].APIKey != "local-"+key || cfg.Backends[2].APIKey != "" {
		t.Fatalf("api keys not expanded: %q %q %q", cfg.Backends[0].APIKey, cfg.Backends[1].APIKey, cfg.Backends[2].APIKey)
	}
	if len(warns) != 0 {
		t.Errorf("unexpected warnings %q", warns)
	}
	opts := relayOptions(cfg, slog.New(slog.DiscardHandler), nil)
	if opts.Backends[0].APIKey != key || opts.Backends[2].APIKey != "" {
		t.Errorf("relay.Backend api keys: %q, %q", opts.Backends[0].APIKey, opts.Backends[2].APIKey)
	}

	var logged bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&logged, nil), slog.NewJSONHandler(&logged, nil)} {
		slog.New(h).Info("config", "config", cfg)
	}
	shown := map[string]string{
		"LogValue":   cfg.LogValue().String(),
		"slog":       logged.String(),
		"%v":         fmt.Sprintf("%v", cfg),
		"%+v":        fmt.Sprintf("%+v", cfg),
		"%#v":        fmt.Sprintf("%#v", cfg),
		"backend %v": fmt.Sprint(cfg.Backends[0]),
	}
	for how, text := range shown {
		if strings.Contains(text, key) || strings.Contains(text, "0123456789abcdef") {
			t.Errorf("%s leaks the api_key: %s", how, text)
		}
	}
	if !strings.Contains(logged.String(), "backends_with_api_key=2") {
		t.Errorf("summary does not count keyed backends: %s", logged.String())
	}
	if !strings.Contains(shown["%+v"], "APIKey:set") || !strings.Contains(shown["%+v"], "APIKey:unset") {
		t.Errorf("%%+v should say set/unset: %s", shown["%+v"])
	}

	_, warns = mustLoad(t, loadCase{env: map[string]string{"K": key}, file: `
backends:
  - {name: remote, url: "http://gpu-box:8000", api_key: "${K}"}
  - {url: "http://localhost:8001", api_key: "${K}"}
  - {url: "http://[::1]:8002", api_key: "${K}"}
`})
	if len(warns) != 1 || !strings.Contains(warns[0], "backends[0].api_key: sent over plain http to remote") || strings.Contains(warns[0], key) {
		t.Errorf("warnings %q, want one about backends[0] over plain http", warns)
	}
}

// TestConfigFallbacks: chains from the file reach relay.Options; model names keep dots and
// slashes; a single string is a one-element chain; an empty list is no chain.
func TestConfigFallbacks(t *testing.T) {
	want := map[string][]string{
		"llama-3-70b":              {"llama-3-8b", "gpt-4o-mini"},
		"meta-llama/Llama-3.1-70B": {"llama-3.1-8b"},
		"a.b.c":                    {"x", "y"},
	}
	cases := []loadCase{
		{name: "c.yaml", file: `
fallbacks:
  llama-3-70b: [llama-3-8b, gpt-4o-mini]
  meta-llama/Llama-3.1-70B: llama-3.1-8b
  a.b.c:
    - x
    - y
  no-chain: []
worker_secret: s
`},
		{name: "c.toml", file: `
worker_secret = "s"
[fallbacks]
llama-3-70b = ["llama-3-8b", "gpt-4o-mini"]
"meta-llama/Llama-3.1-70B" = "llama-3.1-8b"
"a.b.c" = "x, y"
no-chain = []
`},
	}
	for _, lc := range cases {
		t.Run(lc.name, func(t *testing.T) {
			cfg, warns := mustLoad(t, lc)
			if !reflect.DeepEqual(cfg.Fallbacks, want) {
				t.Errorf("fallbacks = %q, want %q", cfg.Fallbacks, want)
			}
			if len(warns) != 0 {
				t.Errorf("fallbacks must not be an unknown key: warnings %q", warns)
			}
			opts := relayOptions(cfg, slog.New(slog.DiscardHandler), nil)
			if !reflect.DeepEqual(opts.Fallbacks, want) {
				t.Errorf("relay.Options.Fallbacks = %q", opts.Fallbacks)
			}
		})
	}
	cfg, _ := mustLoad(t, loadCase{env: map[string]string{"ALT": "gpt-4o"}, file: "fallbacks: {m: ['${ALT}']}\n"})
	if !slices.Equal(cfg.Fallbacks["m"], []string{"gpt-4o"}) {
		t.Errorf("fallbacks with ${ENV}: %q", cfg.Fallbacks)
	}
	if cfg, _ := mustLoad(t, loadCase{}); cfg.Fallbacks != nil {
		t.Errorf("no file: fallbacks = %q, want nil", cfg.Fallbacks)
	}
}

// TestConfigWiresRelayOptions: the failover settings reach relay.Options.
func TestConfigWiresRelayOptions(t *testing.T) {
	cfg, _ := mustLoad(t, loadCase{args: []string{"--worker-grace=0", "--breaker-failures=2", "--slow-start=0"},
		env: map[string]string{"BREAKER_COOLDOWN": "1.5", "WORKER_SECRET": "s"}, file: "breaker_max_cooldown: 2m\n"})
	opts := relayOptions(cfg, slog.New(slog.DiscardHandler), nil)
	if opts.WorkerGrace >= 0 {
		t.Errorf("WorkerGrace = %v, want negative (relay: no grace)", opts.WorkerGrace)
	}
	if opts.SlowStart >= 0 {
		t.Errorf("SlowStart = %v, want negative (relay: no slow start)", opts.SlowStart)
	}
	if want := (relay.BreakerOptions{Failures: 2, Cooldown: 1500 * time.Millisecond, MaxCooldown: 2 * time.Minute}); opts.Breaker != want {
		t.Errorf("Breaker = %+v, want %+v", opts.Breaker, want)
	}
	def, _ := mustLoad(t, loadCase{})
	opts = relayOptions(def, slog.New(slog.DiscardHandler), nil)
	if want := (relay.BreakerOptions{Failures: 5, Cooldown: 5 * time.Second, MaxCooldown: time.Minute}); opts.Breaker != want || opts.WorkerGrace != 10*time.Second ||
		opts.SlowStart != 30*time.Second {
		t.Errorf("defaults: Breaker = %+v, WorkerGrace = %v, SlowStart = %v", opts.Breaker, opts.WorkerGrace, opts.SlowStart)
	}
	if !opts.AccessLog {
		t.Error("defaults: AccessLog off, want on")
	}
	off, _ := mustLoad(t, loadCase{args: []string{"--access-log=false"}})
	if relayOptions(off, slog.New(slog.DiscardHandler), nil).AccessLog {
		t.Error("--access-log=false: AccessLog still on")
	}
}

// TestConfigWiresScheduling: the scheduling settings reach relay.Options.Scheduling; an
// affinity_slack nobody set travels as 0 (the relay's default: a quarter of each target's
// max_concurrent, at least 2) and a configured 0 as -1 (none).
func TestConfigWiresScheduling(t *testing.T) {
	def, _ := mustLoad(t, loadCase{})
	want := relay.Scheduling{CacheAware: true, AffinityTTL: 5 * time.Minute, AffinitySlack: 0,
		PrefixMinMatch: 0.3, PrefixCacheEntries: 16384, PriorityAging: 10 * time.Second, MaxClientPriority: "high"}
	if got := relayOptions(def, slog.New(slog.DiscardHandler), nil).Scheduling; got != want {
		t.Errorf("defaults: Scheduling = %+v, want %+v", got, want)
	}

	cfg, _ := mustLoad(t, loadCase{args: []string{"--routing=LEAST_LOAD", "--affinity-slack=0"},
		env:  map[string]string{"AFFINITY_TTL": "30", "PREFIX_MIN_MATCH": "0.8", "WORKER_SECRET": "s"},
		file: "prefix_cache_entries: 1024\npriority_aging: 2s\nmax_client_priority: LOW\n"})
	want = relay.Scheduling{CacheAware: false, AffinityTTL: 30 * time.Second, AffinitySlack: -1,
		PrefixMinMatch: 0.8, PrefixCacheEntries: 1024, PriorityAging: 2 * time.Second, MaxClientPriority: "low"}
	if got := relayOptions(cfg, slog.New(slog.DiscardHandler), nil).Scheduling; got != want {
		t.Errorf("Scheduling = %+v, want %+v", got, want)
	}

	cfg, _ = mustLoad(t, loadCase{env: map[string]string{"AFFINITY_SLACK": "7", "ROUTING": "cache_aware"}})
	if got := relayOptions(cfg, slog.New(slog.DiscardHandler), nil).Scheduling; !got.CacheAware || got.AffinitySlack != 7 {
		t.Errorf("Scheduling = %+v, want CacheAware and AffinitySlack 7", got)
	}
}

// TestAffinitySlackDefaultAndOverride: with affinity_slack set nowhere (or set empty) the
// relay gets 0, its default of a quarter of each target's max_concurrent (at least 2); any
// layer that sets it wins, 0 included, which travels as -1 (none: the lowest load only).
func TestAffinitySlackDefaultAndOverride(t *testing.T) {
	cases := []struct {
		name  string
		lc    loadCase
		relay int    // relay.Scheduling.AffinitySlack
		log   string // what the startup line says
	}{
		{"unset", loadCase{}, 0, "affinity_slack=a quarter of max_concurrent, at least 2 "},
		{"empty in the file", loadCase{file: "affinity_slack:\n"}, 0, "at least 2"},
		{"empty in the environment", loadCase{env: map[string]string{"AFFINITY_SLACK": ""}}, 0, "at least 2"},
		{"file 8", loadCase{file: "affinity_slack: 8\n"}, 8, "affinity_slack=8 "},
		{"file 0", loadCase{file: "affinity_slack: 0\n"}, -1, "affinity_slack=0 "},
		{"env 0 over file 8", loadCase{file: "affinity_slack: 8\n", env: map[string]string{"AFFINITY_SLACK": "0"}}, -1, "affinity_slack=0 "},
		{"flag 3 over env 5", loadCase{args: []string{"--affinity-slack=3"}, env: map[string]string{"AFFINITY_SLACK": "5"}}, 3, "affinity_slack=3 "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, _ := mustLoad(t, c.lc)
			if got := relayOptions(cfg, slog.New(slog.DiscardHandler), nil).Scheduling.AffinitySlack; got != c.relay {
				t.Errorf("relay AffinitySlack = %d, want %d", got, c.relay)
			}
			if text := cfg.LogValue().String(); !strings.Contains(text, c.log) {
				t.Errorf("LogValue lacks %s: %s", c.log, text)
			}
		})
	}
}

func TestLogValueHidesSecrets(t *testing.T) {
	cfg, _ := mustLoad(t, loadCase{file: validAppProxyYAML, env: map[string]string{"WORKER_SECRET": "ws-secret", "MODELRELAY_ADMIN_TOKEN": "adm-secret",
		"DATABASE_URL": "postgres://relay:db-secret@db.internal:5432/relay?password=q-secret", "REDIS_URL": "redis://:redis-secret@cache:6379/2"}})
	text := cfg.LogValue().String()
	if !strings.Contains(text, "postgres://db.internal:5432/relay") {
		t.Errorf("LogValue does not name the database: %s", text)
	}
	for _, s := range []string{"ws-secret", "adm-secret", "api-s", "jwt-s", "db-secret", "q-secret", "redis-secret"} {
		if strings.Contains(text, s) {
			t.Errorf("LogValue leaks %q: %s", s, text)
		}
	}
}

func TestRedisSentinel(t *testing.T) {
	if (AppProxyConfig{RedisURL: "redis://h:6379/4"}).RedisSentinel() {
		t.Error("plain URL reported as sentinel")
	}
	if !(AppProxyConfig{RedisURL: "redis://h:26379?master_name=m"}).RedisSentinel() {
		t.Error("master_name URL not reported as sentinel")
	}
}

// FuzzConfigFile feeds arbitrary YAML to the loader: whatever a file holds, the decoder must
// answer with a config or an error of one line per problem, each naming its key, never a
// panic.
func FuzzConfigFile(f *testing.F) {
	f.Add([]byte(validAppProxyYAML))
	f.Add([]byte("backends: [{url: 'http://a:1', models: [x, {y: 1}]}]\n"))
	f.Add([]byte("appproxy: [1, 2]\nqueue_timeout: 1e400\n"))
	f.Add([]byte("trusted_proxies: ['::ffff:0.0.0.0/96']\n1: {2: 3}\n"))
	f.Add([]byte("max_queue_len: 9223372036854775808\nrequest_timeout: -0.0\n"))
	f.Add([]byte("fallbacks: {a: [b, a], 'c\\td': [x, x], 1: 2}\nbackends: [{url: 'http://h', api_key: 'k\\n'}]\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "fuzz.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := LoadConfig([]string{"--config", path}, func(k string) string { return "" }, &bytes.Buffer{})
		if err == nil {
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if key, _, ok := strings.Cut(strings.TrimPrefix(line, "config: "), ": "); !strings.HasPrefix(line, "config: ") || !ok || key == "" {
				t.Errorf("error line %q names no key (whole error %q)", line, err)
			}
		}
	})
}

// TestExampleConfigs keeps every sample in configs/ loadable as shipped: it starts with no
// environment at all, or its header's "# Environment:" line names exactly the variables it
// interpolates, and with those set (to anything) it loads and validates without a warning;
// with none set, the error names each of them. It also keeps the YAML and TOML standalone
// examples equivalent.
func TestExampleConfigs(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "configs", "*.yaml"))
	tomls, _ := filepath.Glob(filepath.Join("..", "..", "configs", "*.toml"))
	paths = append(paths, tomls...)
	if len(paths) < 3 {
		t.Fatalf("found only %q in configs/", paths)
	}
	loaded := map[string]Config{}
	for _, path := range paths {
		name := filepath.Base(path)
		header := headerVariables(t, path)

		var p problems
		file, err := readConfigFile(path, func(string) string { return "set" }, &p)
		if err != nil || p.err() != nil {
			t.Fatalf("%s: %v %v", name, err, p.err())
		}
		if !slices.Equal(header, file.vars) {
			t.Errorf("%s: the header's \"# Environment:\" line names %q, the file interpolates %q", name, header, file.vars)
		}

		env := map[string]string{}
		for _, v := range header {
			env[v] = "dummy-" + strings.ToLower(v)
		}
		cfg, warns, err := loadConfig([]string{"--config", path}, func(k string) string { return env[k] }, environ(env))
		if err != nil || len(warns) != 0 {
			t.Errorf("%s with %q set: err %v, warnings %q", name, header, err, warns)
			continue
		}
		cfg.ConfigFile = ""
		loaded[name] = cfg

		if len(header) == 0 {
			continue
		}
		_, _, err = loadConfig([]string{"--config", path}, func(string) string { return "" }, nil)
		var lines []string
		if err != nil {
			lines = strings.Split(err.Error(), "\n")
		}
		if len(lines) != len(header) {
			t.Errorf("%s with nothing set: want one line per variable %q, got %v", name, header, err)
		}
		for _, v := range header {
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasSuffix(l, "environment variable "+v+" is not set") }) {
				t.Errorf("%s with nothing set: %s is not named in %v", name, v, err)
			}
		}
	}
	if !reflect.DeepEqual(loaded["standalone.yaml"], loaded["standalone.toml"]) {
		t.Errorf("standalone examples differ:\nyaml %+v\ntoml %+v", loaded["standalone.yaml"], loaded["standalone.toml"])
	}
	if a := loaded["appproxy.yaml"].AppProxy; !a.Enabled || a.APISecret == "" || a.JWTSecret == "" || a.APISecret == a.JWTSecret {
		t.Errorf("appproxy example: %+v", a)
	}
}

// headerVariables reads the names on the "# Environment:" line of the file's leading comment
// block, sorted; none when there is no such line.
func headerVariables(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			break // the header ends at the first line that is not a comment
		}
		if rest, ok := strings.CutPrefix(line, "# Environment:"); ok {
			names = append(names, strings.FieldsFunc(rest, func(r rune) bool { return r == ',' || r == ' ' })...)
		}
	}
	slices.Sort(names)
	return names
}

// environ renders env as os.Environ does.
func environ(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// A model's entry marks it a reasoning model; an unknown key in it is warned about.
func TestModelsReasoning(t *testing.T) {
	cfg, warns := mustLoad(t, loadCase{file: "models:\n  \"gpt-oss-20b\": {reasoning: true, cache: default}\n  llama: {reasonning: true}\n"})
	if m := cfg.Models["gpt-oss-20b"]; !m.Reasoning || m.Cache != "default" {
		t.Errorf("gpt-oss-20b: %+v", m)
	}
	if cfg.Models["llama"].Reasoning {
		t.Error("a misspelled key made llama a reasoning model")
	}
	if !strings.Contains(warns[0], `models.llama.reasonning`) || !strings.Contains(warns[0], `did you mean "reasoning"`) {
		t.Errorf("warnings %q", warns)
	}
	if _, _, err := (loadCase{file: "models: {m: {reasoning: maybe}}\n"}).load(t); err == nil || !strings.Contains(err.Error(), "models.m.reasoning") {
		t.Errorf("a reasoning that is no boolean: %v", err)
	}
}
