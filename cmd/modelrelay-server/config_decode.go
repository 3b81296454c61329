package main

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/v2"

	"modelrelay/relay/keys"
)

// decoder converts merged koanf values into typed fields. A value that does not decode is
// recorded in p and left at its zero value, and decoding goes on, so that every bad key is
// named at once.
type decoder struct {
	get func(key string) any
	p   *problems
}

func (d *decoder) fail(key, format string, args ...any) { d.p.add(key, format, args...) }

// shown renders a rejected value; strings are quoted so blanks and typos are visible.
func shown(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// str never echoes the value: string keys include secrets.
func (d *decoder) str(key string) string {
	switch v := d.get(key).(type) {
	case nil:
		return ""
	case string:
		return strings.TrimSpace(v)
	default:
		d.fail(key, "must be a string (quote the value)")
		return ""
	}
}

func (d *decoder) boolean(key string) bool {
	switch v := d.get(key).(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "1", "t", "true", "yes", "y", "on":
			return true
		case "0", "f", "false", "no", "n", "off":
			return false
		}
	}
	d.fail(key, "invalid boolean %s (want true or false)", shown(d.get(key)))
	return false
}

func (d *decoder) int64(key string) int64 {
	v := d.get(key)
	n, ok := toInt64(v)
	if !ok {
		d.fail(key, "invalid integer %s", shown(v))
		return 0
	}
	if n < 0 {
		d.fail(key, "must not be negative, got %d", n)
		return 0
	}
	return n
}

func (d *decoder) int(key string) int {
	n := d.int64(key)
	if n > math.MaxInt32 {
		d.fail(key, "too large: %d", n)
		return 0
	}
	return int(n)
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case nil:
		return 0, true
	case int:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		return int64(x), x <= math.MaxInt64
	case float64:
		return int64(x), x == math.Trunc(x) && math.Abs(x) < 1<<63
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// optionalInt is int for a key whose default is not a number (it depends on something else):
// nil when no layer sets it, so that 0 stays a value of its own.
func (d *decoder) optionalInt(key string) *int {
	if d.get(key) == nil {
		return nil
	}
	n := d.int(key)
	return &n
}

func (d *decoder) float(key string) float64 {
	v := d.get(key)
	var f float64
	var err error
	switch x := v.(type) {
	case nil:
		return 0
	case float64:
		f = x
	case string:
		f, err = strconv.ParseFloat(strings.TrimSpace(x), 64)
	default:
		n, ok := toInt64(x)
		if !ok {
			err = errors.New("not a number")
		}
		f = float64(n)
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		d.fail(key, "invalid number %s", shown(v))
		return 0
	}
	return f
}

// duration accepts Go duration text ("1m30s") or a number of seconds (30, 2.5, "30").
func (d *decoder) duration(key string) time.Duration {
	v := d.get(key)
	secs := math.NaN()
	var dur time.Duration
	switch x := v.(type) {
	case nil:
		return 0
	case time.Duration:
		dur = x
	case float64:
		secs = x
	case string:
		s := strings.TrimSpace(x)
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			secs = f
		} else if parsed, err := time.ParseDuration(s); err == nil {
			dur = parsed
		} else {
			d.fail(key, "invalid duration %s (want e.g. 30s, 5m or a number of seconds)", shown(v))
			return 0
		}
	default:
		n, ok := toInt64(x)
		if !ok {
			d.fail(key, "invalid duration %s", shown(v))
			return 0
		}
		secs = float64(n)
	}
	if !math.IsNaN(secs) {
		if math.IsInf(secs, 0) || math.Abs(secs) > math.MaxInt64/float64(time.Second) {
			d.fail(key, "invalid duration %s", shown(v))
			return 0
		}
		dur = time.Duration(math.Round(secs * float64(time.Second)))
	}
	if dur < 0 {
		d.fail(key, "must not be negative, got %s", shown(v))
		return 0
	}
	return dur
}

// list accepts a YAML/TOML list or one comma-separated string; blanks are skipped.
func (d *decoder) list(key string) []string {
	var items []string
	switch v := d.get(key).(type) {
	case nil:
		return nil
	case string:
		items = strings.Split(v, ",")
	case []any:
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				d.fail(fmt.Sprintf("%s[%d]", key, i), "must be a string")
				return nil
			}
			items = append(items, s)
		}
	default:
		d.fail(key, "must be a list or a comma-separated string")
		return nil
	}
	var out []string
	for _, s := range items {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (d *decoder) prefixes(key string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range d.list(key) {
		p, ok := parsePrefix(s)
		if !ok {
			d.fail(key, "invalid CIDR %q", s)
			return nil
		}
		out = append(out, p)
	}
	return out
}

func (d *decoder) origins(key string) []string {
	var out []string
	for _, s := range d.list(key) {
		o, err := parseOrigin(s)
		if err != nil {
			d.fail(key, "invalid origin %q: %v (want scheme://host[:port], e.g. https://app.example.com)", s, err)
			return nil
		}
		out = append(out, o)
	}
	return out
}

// parseOrigin reads an origin as browsers send it in the Origin header, which is compared
// byte for byte: scheme and host lowercased and a scheme's default port left out (a browser
// sends https://app.example.com for https://APP.example.com:443).
func parseOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Opaque != "":
		return "", errors.New("not a URL")
	case u.Scheme == "" || u.Host == "":
		return "", errors.New("scheme and host required")
	case u.User != nil:
		return "", errors.New("no user name or password")
	case u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", errors.New("no path, query or fragment (not even a trailing slash)")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if _, err := netip.ParseAddr(host); err != nil && !isDNSName(host) {
		return "", fmt.Errorf("invalid host %q", host)
	}
	if strings.Contains(u.Host, ":") && !strings.HasSuffix(u.Host, "]") && port == "" {
		return "", errors.New("empty port")
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("invalid port %q", port)
		}
	}
	scheme := strings.ToLower(u.Scheme)
	if port == map[string]string{"http": "80", "https": "443"}[scheme] {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, nil
}

// parsePrefix accepts a CIDR with host bits or a bare IP; IPv4-mapped IPv6 becomes IPv4 so
// that it matches the unmapped client addresses ingress compares against.
func parsePrefix(s string) (netip.Prefix, bool) {
	if strings.Contains(s, "%") {
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		addr, aerr := netip.ParseAddr(s)
		if aerr != nil {
			return netip.Prefix{}, false
		}
		p = netip.PrefixFrom(addr, addr.BitLen())
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), true
}

// decodeConfig reads every setting, recording the ones that do not decode in p.
func decodeConfig(k *koanf.Koanf, p *problems) Config {
	d := &decoder{get: k.Get, p: p}
	c := Config{
		Listen:                 d.str("listen"),
		HTTPServer:             strings.ToLower(d.str("http_server")),
		WorkerSecret:           d.str("worker_secret"),
		Provider:               d.str("provider"),
		MaxQueueLen:            d.int("max_queue_len"),
		QueueTimeout:           d.duration("queue_timeout"),
		RequestTimeout:         d.duration("request_timeout"),
		DrainTimeout:           d.duration("drain_timeout"),
		LogLevel:               strings.ToLower(d.str("log_level")),
		LogFormat:              strings.ToLower(d.str("log_format")),
		AdminToken:             d.str("admin_token"),
		RequireAPIKeys:         d.boolean("require_api_keys"),
		DatabaseURL:            d.str("database_url"),
		KeyCacheTTL:            d.duration("key_cache_ttl"),
		UsageMaxPending:        d.int("usage_max_pending"),
		RedisURL:               d.str("redis_url"),
		MaxBodyBytes:           d.int64("max_body_bytes"),
		BodyReadTimeout:        d.duration("body_read_timeout"),
		BodyMinRate:            d.int64("body_min_rate"),
		BodyBudgetBytes:        d.int64("body_budget_bytes"),
		MaxModelsPerWorker:     d.int("max_models_per_worker"),
		MaxStreamBytes:         d.int64("max_stream_bytes"),
		MaxFrameBytes:          d.int64("max_frame_bytes"),
		DefaultMaxTokens:       d.int("default_max_tokens"),
		RequireProtocolVersion: d.boolean("require_protocol_version"),
		TrustedProxies:         d.prefixes("trusted_proxies"),
		TrustedOrigins:         d.origins("trusted_origins"),
		WorkerGrace:            d.duration("worker_grace"),
		BreakerFailures:        d.int("breaker_failures"),
		BreakerCooldown:        d.duration("breaker_cooldown"),
		BreakerMaxCooldown:     d.duration("breaker_max_cooldown"),
		SlowStart:              d.duration("slow_start"),
		Routing:                strings.ToLower(d.str("routing")),
		AffinityTTL:            d.duration("affinity_ttl"),
		AffinitySlack:          d.optionalInt("affinity_slack"),
		PrefixMinMatch:         d.float("prefix_min_match"),
		PrefixCacheEntries:     d.int("prefix_cache_entries"),
		PriorityAging:          d.duration("priority_aging"),
		MaxClientPriority:      strings.ToLower(d.str("max_client_priority")),
		AccessLog:              d.boolean("access_log"),
		Demo:                   d.boolean("demo"),
		AppProxy:               decodeAppProxy(d),
		Backends:               decodeBackends(d, k.Get("backends")),
		Fallbacks:              decodeFallbacks(d, k.Get("fallbacks")),
		Models:                 decodeModels(d, k.Get("models")),
		ResponsesTTL:           d.duration("responses_ttl"),
		ResponsesStoreMaxBytes: d.int64("responses_store_max_bytes"),
		Cache: CacheConfig{Enabled: d.boolean("cache.enabled"), TTL: d.duration("cache.ttl"),
			MaxBytes: d.int64("cache.max_bytes"), Store: strings.ToLower(d.str("cache.store"))},
	}
	return c
}

func decodeAppProxy(d *decoder) AppProxyConfig {
	key := func(k string) string { return "appproxy." + k }
	hosts := d.list(key("aggregation_hosts"))
	for i := range hosts {
		hosts[i] = strings.TrimSuffix(strings.ToLower(hosts[i]), ".")
	}
	return AppProxyConfig{
		Enabled:             d.boolean(key("enabled")),
		CoordinatorURL:      d.str(key("coordinator_url")),
		APISecret:           d.str(key("api_secret")),
		JWTSecret:           d.str(key("jwt_secret")),
		RedisURL:            d.str(key("redis_url")),
		EventsEnabled:       d.boolean(key("events_enabled")),
		Authority:           d.str(key("authority")),
		Hostname:            d.str(key("hostname")),
		APIPort:             d.int(key("api_port")),
		WildcardDomain:      d.str(key("wildcard_domain")),
		WildcardTrafficPort: d.int(key("wildcard_traffic_port")),
		TLSListen:           d.boolean(key("tls_listen")),
		TLSCert:             d.str(key("tls_cert")),
		TLSKey:              d.str(key("tls_key")),
		TLSAdvertised:       d.boolean(key("tls_advertised")),
		AggregationHosts:    hosts,
		HeartbeatPeriod:     d.duration(key("heartbeat_period")),
		ReconcileInterval:   d.duration(key("reconcile_interval")),
		RouteMaxConcurrent:  d.int(key("route_max_concurrent")),
		HealthCheckInterval: d.duration(key("health_check_interval")),
		LiveMarkers:         d.boolean(key("live_markers")),
		RequireTokenExp:     d.boolean(key("require_token_exp")),
		NodeID:              d.str(key("node_id")),
	}
}

func decodeBackends(d *decoder, v any) []BackendConfig {
	list, ok := v.([]any)
	if v != nil && !ok {
		d.fail("backends", "must be a list")
		return nil
	}
	var out []BackendConfig
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			d.fail(fmt.Sprintf("backends[%d]", i), "must be a mapping")
			return nil
		}
		prefix := fmt.Sprintf("backends[%d].", i)
		bd := &decoder{get: func(key string) any { return m[strings.TrimPrefix(key, prefix)] }, p: d.p}
		b := BackendConfig{
			Name:          bd.str(prefix + "name"),
			URL:           bd.str(prefix + "url"),
			Models:        bd.list(prefix + "models"),
			Weight:        1,
			MaxConcurrent: bd.int(prefix + "max_concurrent"),
			Dialects:      bd.list(prefix + "dialects"),
			APIKey:        bd.str(prefix + "api_key"),
		}
		if _, set := m["weight"]; set {
			b.Weight = bd.float(prefix + "weight")
		}
		out = append(out, b)
	}
	return out
}

// decodeModels reads the `models:` mapping, model -> its settings: cache is default (its
// requests use the response cache unless they say otherwise) or false (they never do);
// reasoning marks a reasoning model (a Responses call's reasoning.effort reaches it).
func decodeModels(d *decoder, v any) map[string]ModelConfig {
	m, ok := v.(map[string]any)
	if v != nil && !ok {
		d.fail("models", "must be a mapping (model: {cache: default, reasoning: true})")
		return nil
	}
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]ModelConfig, len(m))
	for _, model := range sortedKeys(m) { // sorted: the same file always names the same key
		key := "models." + quotedName(model)
		entry, ok := m[model].(map[string]any)
		if !ok {
			d.fail(key, "must be a mapping (cache: default)")
			continue
		}
		md := &decoder{get: func(k string) any { return entry[strings.TrimPrefix(k, key+".")] }, p: d.p}
		c := ModelConfig{Reasoning: md.boolean(key + ".reasoning")}
		switch v := entry["cache"].(type) {
		case nil:
		case bool:
			if v {
				d.fail(key+".cache", "must be default or false")
			} else {
				c.Cache = keys.CacheOff
			}
		case string:
			switch strings.ToLower(strings.TrimSpace(v)) {
			case keys.CacheDefault:
				c.Cache = keys.CacheDefault
			case "false", keys.CacheOff:
				c.Cache = keys.CacheOff
			default:
				d.fail(key+".cache", "must be default or false, got %s", shown(v))
			}
		default:
			d.fail(key+".cache", "must be default or false")
		}
		out[model] = c
	}
	return out
}

// decodeFallbacks reads the `fallbacks:` mapping, model -> alternates in order. A chain may
// be a list or one string (a comma-separated string, like every other list). Checks that
// need the whole chain (itself, duplicates) are in validateFallbacks.
func decodeFallbacks(d *decoder, v any) map[string][]string {
	m, ok := v.(map[string]any)
	if v != nil && !ok {
		d.fail("fallbacks", "must be a mapping (model: [alternate, ...])")
		return nil
	}
	if len(m) == 0 {
		return nil
	}
	out := make(map[string][]string, len(m))
	for _, model := range sortedKeys(m) { // sorted: the same file always names the same key
		if chain, ok := decodeChain(d, model, m[model]); ok && len(chain) > 0 {
			out[model] = chain // an empty list: no chain for this model
		}
	}
	return out
}

// decodeChain reads one model's chain; ok is false when it was recorded as a problem.
func decodeChain(d *decoder, model string, v any) (chain []string, ok bool) {
	key := fallbackKey(model)
	if strings.TrimSpace(model) == "" {
		d.fail("fallbacks", "a model name is empty")
		return nil, false
	}
	if model != strings.TrimSpace(model) {
		d.fail(key, "model name has leading or trailing blanks")
		return nil, false
	}
	var items []any
	switch x := v.(type) {
	case string:
		for _, s := range strings.Split(x, ",") {
			items = append(items, s)
		}
	case []any:
		items = x
	default:
		d.fail(key, "must be a list of model names")
		return nil, false
	}
	chain = make([]string, 0, len(items))
	for i, e := range items {
		s, ok := e.(string)
		if !ok {
			d.fail(fmt.Sprintf("%s[%d]", key, i), "must be a string")
			return nil, false
		}
		if s = strings.TrimSpace(s); s == "" {
			d.fail(fmt.Sprintf("%s[%d]", key, i), "must not be empty")
			return nil, false
		}
		chain = append(chain, s)
	}
	return chain, true
}

// fallbackKey names a chain in messages: fallbacks.<model>.
func fallbackKey(model string) string { return "fallbacks." + quotedName(model) }

// quotedName is a model name as messages show it: quoted when it holds blanks or control
// characters, so the message stays on one line and the name stays visible.
func quotedName(model string) string {
	for _, r := range model {
		if r <= ' ' || r == 0x7f || !strconv.IsPrint(r) {
			return strconv.Quote(model)
		}
	}
	return model
}
