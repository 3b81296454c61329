package main

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"modelrelay/relay"
	"modelrelay/relay/keys"
)

// applyDerivedDefaults fills the defaults that depend on other values or on the host.
// explicit holds the flattened keys that a file, the environment or a flag set.
func (c *Config) applyDerivedDefaults(explicit map[string]bool) {
	if c.tlsListen() && !explicit["http_server"] {
		c.HTTPServer = "net/http" // the lean server has no TLS: a default never makes it an error
	}
	for i := range c.Backends {
		if c.Backends[i].Name == "" {
			if u, err := url.Parse(c.Backends[i].URL); err == nil {
				c.Backends[i].Name = u.Host
			}
		}
	}
	if c.AppProxy.Authority == "" {
		if h, err := os.Hostname(); err == nil {
			c.AppProxy.Authority = h
		}
	}
	if c.AppProxy.APIPort == 0 {
		if _, port, err := net.SplitHostPort(c.Listen); err == nil {
			c.AppProxy.APIPort, _ = strconv.Atoi(port)
		}
	}
}

// validate records in p every value that is out of range or inconsistent with another.
func (c Config) validate(p *problems) {
	if err := checkHostPort(c.Listen); err != nil {
		p.add("listen", "%v", err)
	}
	if c.Provider == "" {
		p.add("provider", "must not be empty")
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel) {
		p.add("log_level", "unknown level %q (want debug, info, warn or error)", c.LogLevel)
	}
	if !slices.Contains([]string{"text", "json"}, c.LogFormat) {
		p.add("log_format", "unknown format %q (want text or json)", c.LogFormat)
	}
	if !slices.Contains(httpServers, c.HTTPServer) {
		p.add("http_server", "unknown server %q (want net/http or lean)", c.HTTPServer)
	} else if c.HTTPServer == "lean" && c.tlsListen() {
		p.add("http_server", "lean serves plain HTTP/1.1 only; appproxy.tls_listen needs net/http")
	}
	for _, limit := range []struct {
		key string
		n   int64
	}{
		{"max_body_bytes", c.MaxBodyBytes},
		{"max_models_per_worker", int64(c.MaxModelsPerWorker)},
		{"max_stream_bytes", c.MaxStreamBytes},
		{"body_budget_bytes", c.BodyBudgetBytes},
		{"max_frame_bytes", c.MaxFrameBytes},
		{"body_read_timeout", int64(c.BodyReadTimeout)},
		{"responses_ttl", int64(c.ResponsesTTL)},
		{"responses_store_max_bytes", c.ResponsesStoreMaxBytes},
	} {
		if limit.n == 0 {
			p.add(limit.key, "must be positive")
		}
	}
	if c.DefaultMaxTokens <= 0 {
		p.add("default_max_tokens", "must be positive, got %d", c.DefaultMaxTokens)
	}
	if c.BodyMinRate < 0 {
		p.add("body_min_rate", "must not be negative, got %d", c.BodyMinRate)
	}
	if c.BodyBudgetBytes < c.MaxBodyBytes {
		p.add("body_budget_bytes", "must be at least max_body_bytes (%d), got %d", c.MaxBodyBytes, c.BodyBudgetBytes)
	}
	if c.BreakerFailures < 1 {
		p.add("breaker_failures", "must be at least 1, got %d", c.BreakerFailures)
	}
	if c.BreakerCooldown == 0 {
		p.add("breaker_cooldown", "must be positive")
	}
	if c.BreakerMaxCooldown < c.BreakerCooldown {
		p.add("breaker_max_cooldown", "must be at least breaker_cooldown (%s), got %s", c.BreakerCooldown, c.BreakerMaxCooldown)
	}
	c.validateScheduling(p)
	c.validateKeys(p)
	c.validateCache(p)
	checkBackends(c.Backends, p)
	validateFallbacks(c.Fallbacks, p)
	c.AppProxy.validate(p)
}

// validateKeys checks the client API key settings.
func (c Config) validateKeys(p *problems) {
	if c.KeyCacheTTL == 0 || c.KeyCacheTTL > keys.MaxCacheTTL {
		p.add("key_cache_ttl", "must be above 0 and at most %s (how late a revocation may take effect), got %s",
			keys.MaxCacheTTL, c.KeyCacheTTL)
	}
	if c.UsageMaxPending < 1 {
		p.add("usage_max_pending", "must be at least 1, got %d", c.UsageMaxPending)
	}
	if c.RedisURL != "" {
		if _, err := redis.ParseURL(c.RedisURL); err != nil {
			p.add("redis_url", "%v", err)
		}
	}
	if c.DatabaseURL != "" {
		u, err := url.Parse(c.DatabaseURL)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			p.add("database_url", "must be a postgres:// or postgresql:// URL")
		}
	}
}

// validateCache checks the response cache's settings; its store must be reachable only when
// it is enabled.
func (c Config) validateCache(p *problems) {
	if c.Cache.TTL == 0 {
		p.add("cache.ttl", "must be positive")
	}
	if c.Cache.MaxBytes < minCacheBytes {
		p.add("cache.max_bytes", "must be at least %d (1 MiB), got %d", minCacheBytes, c.Cache.MaxBytes)
	}
	if !slices.Contains(cacheStores, c.Cache.Store) {
		p.add("cache.store", "unknown store %q (want memory or redis)", c.Cache.Store)
	} else if c.Cache.Enabled && c.Cache.Store == "redis" && c.RedisURL == "" {
		p.add("cache.store", "redis needs redis_url")
	}
}

// validateScheduling checks the placement and queue-order keys. Negative durations and
// integers were already refused by the decoder; affinity_slack needs nothing more (any
// value from 0 up is a slack).
func (c Config) validateScheduling(p *problems) {
	if !slices.Contains(routingPolicies, c.Routing) {
		p.add("routing", "unknown policy %q (want least_load or cache_aware)", c.Routing)
	}
	if c.AffinityTTL == 0 {
		p.add("affinity_ttl", "must be positive")
	}
	if c.PrefixMinMatch <= 0 || c.PrefixMinMatch > 1 {
		p.add("prefix_min_match", "must be greater than 0 and at most 1, got %v", c.PrefixMinMatch)
	}
	if c.PrefixCacheEntries < 1 {
		p.add("prefix_cache_entries", "must be at least 1, got %d", c.PrefixCacheEntries)
	}
	if c.PrefixCacheEntries > maxPrefixCacheEntries {
		p.add("prefix_cache_entries", "must be at most %d, got %d", maxPrefixCacheEntries, c.PrefixCacheEntries)
	}
	if c.PriorityAging == 0 {
		p.add("priority_aging", "must be positive")
	}
	if !slices.Contains(priorityClasses, c.MaxClientPriority) {
		p.add("max_client_priority", "unknown class %q (want high, normal or low)", c.MaxClientPriority)
	}
}

// tlsListen reports whether the listener serves TLS: worker mode with appproxy.tls_listen.
func (c Config) tlsListen() bool { return c.AppProxy.Enabled && c.AppProxy.TLSListen }

// checkHostPort wants host:port with a numeric port; the host may be empty (all interfaces).
func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("invalid address %q (want host:port)", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("invalid port in %q", addr)
	}
	return nil
}

func checkBackends(backends []BackendConfig, p *problems) {
	names := map[string]int{}
	for i, b := range backends {
		key := func(field string) string { return fmt.Sprintf("backends[%d].%s", i, field) }
		if err := checkHTTPURL(b.URL); err != nil {
			p.add(key("url"), "%v", err)
		}
		if prev, dup := names[b.Name]; dup {
			p.add(key("name"), "%q is already used by backends[%d]", b.Name, prev)
		} else {
			names[b.Name] = i
		}
		if b.Weight <= 0 {
			p.add(key("weight"), "must be positive, got %v", b.Weight)
		}
		if _, err := parseDialects(b.Dialects); err != nil {
			p.add(key("dialects"), "%v", err)
		}
		if err := checkAPIKey(b.APIKey); err != nil {
			p.add(key("api_key"), "%v", err)
		}
	}
}

// checkAPIKey wants the bare key: it goes into a header as is. Never echoes the value.
func checkAPIKey(key string) error {
	if strings.IndexFunc(key, unicode.IsSpace) >= 0 {
		return errors.New(`must be the bare key, without blanks (the relay adds "Bearer " itself)`)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] == 0x7f {
			return errors.New("must not contain control characters")
		}
	}
	return nil
}

// validateFallbacks checks each chain as a whole: it is walked once, so naming its own model
// or one model twice is a mistake. Problems name fallbacks.<model>.
func validateFallbacks(chains map[string][]string, p *problems) {
	for _, model := range slices.Sorted(maps.Keys(chains)) { // the same file always names the same key
		seen := map[string]bool{}
		for _, alt := range chains[model] {
			if alt == model {
				p.add(fallbackKey(model), "the chain lists %s itself", strconv.Quote(model))
			} else if seen[alt] {
				p.add(fallbackKey(model), "%s is listed twice", strconv.Quote(alt))
			}
			seen[alt] = true
		}
	}
}

// parseDialects reads a backend's dialects list: any of openai, anthropic and responses, or
// auto (= empty).
func parseDialects(names []string) ([]relay.Dialect, error) {
	var out []relay.Dialect
	for _, name := range names {
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "openai":
			out = append(out, relay.OpenAI)
		case "anthropic":
			out = append(out, relay.Anthropic)
		case "responses":
			out = append(out, relay.Responses)
		case "auto":
			if len(names) > 1 {
				return nil, errors.New(`"auto" cannot be combined with a family`)
			}
		default:
			return nil, fmt.Errorf("unknown API family %q (want openai, anthropic, responses or auto)", name)
		}
	}
	return out, nil
}

// checkHTTPURL never echoes credentials embedded in the URL.
func checkHTTPURL(raw string) error {
	if raw == "" {
		return errors.New("required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("invalid URL (want http://host:port)")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("invalid URL %q (want http:// or https://)", u.Redacted())
	}
	if u.Hostname() == "" {
		return fmt.Errorf("invalid URL %q (no host)", u.Redacted())
	}
	return nil
}

func checkRedisURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("invalid URL (want redis://host:port/db)")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return fmt.Errorf("invalid URL %q (want redis:// or rediss://)", u.Redacted())
	}
	if u.Hostname() == "" {
		return fmt.Errorf("invalid URL %q (no host)", u.Redacted())
	}
	parse := func(s string) error { _, err := redis.ParseURL(s); return err }
	if u.Query().Has("master_name") {
		parse = func(s string) error { _, err := redis.ParseFailoverURL(s); return err }
	}
	if err := parse(raw); err != nil {
		// go-redis errors name query parameters, never the password.
		return fmt.Errorf("invalid URL %q: %v", u.Redacted(), err)
	}
	return nil
}

// validate checks every value that is set; the settings worker mode cannot start without
// are required only when it is enabled.
func (a AppProxyConfig) validate(p *problems) {
	fail := func(key, format string, args ...any) { p.add("appproxy."+key, format, args...) }
	if a.Enabled {
		required := []struct{ key, val string }{
			{"coordinator_url", a.CoordinatorURL}, {"api_secret", a.APISecret},
			{"jwt_secret", a.JWTSecret}, {"authority", a.Authority}, {"hostname", a.Hostname},
			{"wildcard_domain", a.WildcardDomain},
		}
		if a.EventsEnabled || a.LiveMarkers {
			required = append(required, struct{ key, val string }{"redis_url", a.RedisURL})
		}
		for _, r := range required {
			if r.val == "" {
				fail(r.key, "required when appproxy.enabled is true")
			}
		}
		if a.APIPort == 0 {
			fail("api_port", "required: the listen port is 0")
		}
	}
	if a.CoordinatorURL != "" {
		if err := checkHTTPURL(a.CoordinatorURL); err != nil {
			fail("coordinator_url", "%v", err)
		}
	}
	if a.RedisURL != "" {
		if err := checkRedisURL(a.RedisURL); err != nil {
			fail("redis_url", "%v", err)
		}
	}
	if a.WildcardDomain != "" {
		if !strings.HasPrefix(a.WildcardDomain, ".") {
			fail("wildcard_domain", "must start with a dot")
		} else if !isDNSName(a.WildcardDomain[1:]) {
			fail("wildcard_domain", "invalid domain %q", a.WildcardDomain)
		}
	}
	for _, h := range a.AggregationHosts {
		if _, err := netip.ParseAddr(h); err != nil && !isDNSName(h) {
			fail("aggregation_hosts", "invalid host %q (want a bare host name, no scheme or port)", h)
		}
	}
	// api_port 0 is allowed while worker mode is off (a listen port of 0 is fine then).
	if a.APIPort > 65535 {
		fail("api_port", "must be a port number 1-65535, got %d", a.APIPort)
	}
	if a.WildcardTrafficPort == 0 || a.WildcardTrafficPort > 65535 {
		fail("wildcard_traffic_port", "must be a port number 1-65535, got %d", a.WildcardTrafficPort)
	}
	for _, period := range []struct {
		key string
		d   time.Duration
	}{
		{"heartbeat_period", a.HeartbeatPeriod},
		{"reconcile_interval", a.ReconcileInterval},
		{"health_check_interval", a.HealthCheckInterval},
	} {
		if period.d == 0 {
			fail(period.key, "must be positive")
		}
	}
	a.validateTLS(p)
}

func (a AppProxyConfig) validateTLS(p *problems) {
	if !a.TLSListen {
		return
	}
	for _, f := range []struct{ key, path string }{{"tls_cert", a.TLSCert}, {"tls_key", a.TLSKey}} {
		if f.path == "" {
			p.add("appproxy."+f.key, "required when appproxy.tls_listen is true")
		} else if _, err := os.Stat(f.path); err != nil {
			p.add("appproxy."+f.key, "%v", err)
		}
	}
}

// isDNSName accepts letters, digits and hyphens in labels of 1-63 bytes, 253 bytes in all.
func isDNSName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return false
			}
		}
	}
	return true
}

// warnings flags settings that are valid but probably not what the operator meant.
// explicit holds the flattened keys that a file, the environment or a flag set.
func (c Config) warnings(explicit map[string]bool) []string {
	var out []string
	a := c.AppProxy
	if a.HeartbeatPeriod >= coordinatorTimeout {
		out = append(out, fmt.Sprintf("config: appproxy.heartbeat_period: %s is not below the coordinator's %s timeout; it will mark this worker LOST between heartbeats", a.HeartbeatPeriod, coordinatorTimeout))
	}
	if !c.Cache.Enabled {
		var set []string
		for _, model := range slices.Sorted(maps.Keys(c.Models)) {
			if c.Models[model].Cache != "" {
				set = append(set, "models."+quotedName(model)+".cache")
			}
		}
		if len(set) > 0 {
			out = append(out, fmt.Sprintf("config: %s set but cache.enabled is false; no answer is cached", strings.Join(set, ", ")))
		}
	}
	if !a.Enabled {
		var set []string
		for _, key := range appProxyKeys {
			if key != "enabled" && explicit["appproxy."+key] {
				set = append(set, "appproxy."+key)
			}
		}
		if len(set) > 0 {
			out = append(out, fmt.Sprintf("config: %s set but appproxy.enabled is false; running standalone", strings.Join(set, ", ")))
		}
		if c.WorkerSecret == "" && len(c.Backends) == 0 && c.DatabaseURL == "" && !c.Demo {
			out = append(out, "no worker secret is set, so relay workers cannot join: set --worker-secret or WORKER_SECRET (or add backends: to the config file)")
		}
	}
	for i, b := range c.Backends {
		if b.APIKey != "" && sentInClear(b.URL) {
			out = append(out, fmt.Sprintf("config: backends[%d].api_key: sent over plain http to %s; use https:// for a remote backend", i, b.Name))
		}
	}
	return out
}

// sentInClear reports an http:// URL whose host is not this machine.
func sentInClear(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" {
		return false
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		return !ip.IsLoopback()
	}
	return host != "localhost" && !strings.HasSuffix(host, ".localhost")
}

// LogValue lets the effective configuration be logged at start-up without its secrets
// (secrets appear as "set" or "unset"; backends' api_key values never appear at all).
func (c Config) LogValue() slog.Value {
	secret := secretState
	keyed := 0
	for _, b := range c.Backends {
		if b.APIKey != "" {
			keyed++
		}
	}
	a := c.AppProxy
	return slog.GroupValue(
		slog.String("listen", c.Listen),
		slog.String("http_server", c.HTTPServer),
		slog.String("provider", c.Provider),
		slog.String("worker_secret", secret(c.WorkerSecret)),
		slog.String("admin_token", secret(c.AdminToken)),
		slog.Bool("require_api_keys", c.RequireAPIKeys),
		slog.String("database", urlShown(c.DatabaseURL)),
		slog.Duration("key_cache_ttl", c.KeyCacheTTL),
		slog.String("shared_limits", urlShown(c.RedisURL)),
		slog.Bool("access_log", c.AccessLog),
		slog.Int("max_queue_len", c.MaxQueueLen),
		slog.Duration("queue_timeout", c.QueueTimeout),
		slog.Duration("request_timeout", c.RequestTimeout),
		slog.Duration("drain_timeout", c.DrainTimeout),
		slog.Int("backends", len(c.Backends)),
		slog.Int("backends_with_api_key", keyed),
		slog.Int("fallbacks", len(c.Fallbacks)),
		slog.Duration("worker_grace", c.WorkerGrace),
		slog.Int("breaker_failures", c.BreakerFailures),
		slog.Duration("breaker_cooldown", c.BreakerCooldown),
		slog.Duration("breaker_max_cooldown", c.BreakerMaxCooldown),
		slog.Duration("slow_start", c.SlowStart),
		slog.String("routing", c.Routing),
		slog.Duration("affinity_ttl", c.AffinityTTL),
		slog.String("affinity_slack", slackShown(c.AffinitySlack)),
		slog.Float64("prefix_min_match", c.PrefixMinMatch),
		slog.Int("prefix_cache_entries", c.PrefixCacheEntries),
		slog.Duration("priority_aging", c.PriorityAging),
		slog.String("max_client_priority", c.MaxClientPriority),
		slog.String("cache", cacheShown(c.Cache)),
		slog.Int("trusted_proxies", len(c.TrustedProxies)),
		slog.String("trusted_origins", strings.Join(c.TrustedOrigins, ",")),
		slog.String("config_file", c.ConfigFile),
		slog.Bool("appproxy", a.Enabled),
		slog.String("authority", a.Authority),
		slog.String("wildcard_domain", a.WildcardDomain),
	)
}

// urlShown is a database or Redis URL as logs may show it: scheme, host, port and path,
// never the user's password or the query (which may hold one too).
func urlShown(raw string) string {
	if raw == "" {
		return "in memory"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "set"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

// cacheShown is the response cache as logs show it: off, or its store, size and TTL.
func cacheShown(c CacheConfig) string {
	if !c.Enabled {
		return "off"
	}
	return fmt.Sprintf("%s, %d bytes, ttl %s", c.Store, c.MaxBytes, c.TTL)
}

// slackShown is affinity_slack as logs show it: the number, or the rule that gives it.
func slackShown(slack *int) string {
	if slack == nil {
		return "a quarter of max_concurrent, at least 2"
	}
	return strconv.Itoa(*slack)
}
