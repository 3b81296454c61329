package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
	"github.com/redis/go-redis/v9"
)

// Config is the server's effective configuration after flags, environment, config file and
// defaults have been merged (in that order of precedence) and validated.
type Config struct {
	Listen                 string
	WorkerSecret           string // "" = relay workers cannot join
	Provider               string
	MaxQueueLen            int           // 0 = unbounded
	QueueTimeout           time.Duration // 0 = none
	RequestTimeout         time.Duration // 0 = none
	DrainTimeout           time.Duration
	LogLevel               string // debug, info, warn or error
	LogFormat              string // text or json
	AdminToken             string // "" = admin routes answer 403
	RequireAPIKeys         bool   // reserved
	MaxBodyBytes           int64
	MaxModelsPerWorker     int
	MaxStreamBytes         int64
	RequireProtocolVersion bool
	TrustedProxies         []netip.Prefix // masked; bare IPs became /32 or /128
	Backends               []BackendConfig
	AppProxy               AppProxyConfig
	ConfigFile             string // the file that was read, "" if none
}

// BackendConfig is one static upstream from the `backends:` list.
type BackendConfig struct {
	Name          string // defaults to the URL's host:port
	URL           string
	Models        []string // empty = discover from GET /v1/models
	Weight        float64  // > 0, default 1
	MaxConcurrent int      // 0 = no cap
}

// AppProxyConfig is the `appproxy:` section (appproxy.md section 6).
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

// setting ties a top-level file key to its flag and environment variable (relay.md section 5).
type setting struct {
	key, flag, env string
	boolean        bool
}

var settings = []setting{
	{key: "listen", flag: "listen", env: "LISTEN_ADDR"},
	{key: "worker_secret", flag: "worker-secret", env: "WORKER_SECRET"},
	{key: "provider", flag: "provider", env: "PROVIDER_NAME"},
	{key: "max_queue_len", flag: "max-queue-len", env: "MAX_QUEUE_LEN"},
	{key: "queue_timeout", flag: "queue-timeout", env: "QUEUE_TIMEOUT_SECS"},
	{key: "request_timeout", flag: "request-timeout", env: "REQUEST_TIMEOUT_SECS"},
	{key: "drain_timeout", flag: "drain-timeout", env: "DRAIN_TIMEOUT_SECS"},
	{key: "log_level", flag: "log-level", env: "LOG_LEVEL"},
	{key: "log_format", flag: "log-format", env: "LOG_FORMAT"},
	{key: "admin_token", flag: "admin-token", env: "MODELRELAY_ADMIN_TOKEN"},
	{key: "require_api_keys", flag: "require-api-keys", env: "MODELRELAY_REQUIRE_API_KEYS", boolean: true},
	{key: "max_body_bytes", flag: "max-body-bytes", env: "MAX_BODY_BYTES"},
	{key: "max_models_per_worker", flag: "max-models-per-worker", env: "MAX_MODELS_PER_WORKER"},
	{key: "max_stream_bytes", flag: "max-stream-bytes", env: "MAX_STREAM_BYTES"},
	{key: "require_protocol_version", flag: "require-protocol-version", env: "REQUIRE_PROTOCOL_VERSION", boolean: true},
	{key: "trusted_proxies", flag: "trusted-proxies", env: "TRUSTED_PROXIES"},
}

// appProxyKeys are the keys of the `appproxy:` section; each is also APPPROXY_<KEY>.
var appProxyKeys = []string{
	"enabled", "coordinator_url", "api_secret", "jwt_secret", "redis_url", "events_enabled",
	"authority", "hostname", "api_port", "wildcard_domain", "wildcard_traffic_port",
	"tls_listen", "tls_cert", "tls_key", "tls_advertised", "aggregation_hosts",
	"heartbeat_period", "reconcile_interval", "route_max_concurrent", "health_check_interval",
	"live_markers",
}

var backendKeys = []string{"name", "url", "models", "weight", "max_concurrent"}

// coordinatorTimeout is how long the coordinator waits for a heartbeat before marking a
// worker LOST (appproxy.md section 1).
const coordinatorTimeout = 30 * time.Second

func defaultValues() map[string]any {
	return map[string]any{
		"listen":                         "127.0.0.1:8080",
		"provider":                       "local",
		"max_queue_len":                  100,
		"queue_timeout":                  30 * time.Second,
		"request_timeout":                300 * time.Second,
		"drain_timeout":                  30 * time.Second,
		"log_level":                      "info",
		"log_format":                     "text",
		"require_api_keys":               false,
		"max_body_bytes":                 int64(32 << 20),
		"max_models_per_worker":          256,
		"max_stream_bytes":               int64(10 << 30),
		"require_protocol_version":       false,
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
	}
}

// LoadConfig builds the configuration from command-line args (without the program name),
// the environment and the config file. Warnings are returned even when err is non-nil: an
// unknown (misspelled) key often explains the error, so print them first. err is errHelp or
// errVersion when the caller should print that and exit 0; otherwise it is one line. Nothing
// is written to stderr today (flag errors come back in err, ending in "see --help"); it is
// part of the signature so that the caller's wiring need not change if that ever changes.
func LoadConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, []string, error) {
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
	var warnings []string
	explicit := map[string]bool{}
	if configPath != "" {
		fileMap, fileWarnings, err := readConfigFile(configPath, getenv)
		warnings = append(warnings, fileWarnings...)
		if err != nil {
			return Config{}, warnings, err
		}
		markExplicit(explicit, "", fileMap)
		if err := k.Load(confmap.Provider(fileMap, ""), nil); err != nil {
			return Config{}, warnings, fmt.Errorf("config: %s: %w", configPath, err)
		}
	}
	for _, layer := range []map[string]any{envValues(getenv), flags} {
		for key := range layer {
			explicit[key] = true
		}
		if err := k.Load(confmap.Provider(layer, "."), nil); err != nil {
			return Config{}, warnings, fmt.Errorf("config: %w", err)
		}
	}

	cfg, err := decodeConfig(k)
	if err != nil {
		return Config{}, warnings, err
	}
	cfg.ConfigFile = configPath
	cfg.applyDerivedDefaults()
	if err := cfg.validate(); err != nil {
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

// envValues reads the environment. An empty variable counts as unset, as most shells and
// orchestrators cannot tell the two apart.
func envValues(getenv func(string) string) map[string]any {
	out := map[string]any{}
	for _, s := range settings {
		if v := getenv(s.env); v != "" {
			out[s.key] = v
		}
	}
	for _, key := range appProxyKeys {
		if v := getenv("APPPROXY_" + strings.ToUpper(key)); v != "" {
			out["appproxy."+key] = v
		}
	}
	return out
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

// readConfigFile parses the file (TOML for *.toml, YAML otherwise), expands ${ENV_VAR} in
// values, drops nulls (an empty value means "use the default") and reports unknown keys.
func readConfigFile(path string, getenv func(string) string) (map[string]any, []string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: read config file: %w", err)
	}
	var parser koanf.Parser = yaml.Parser()
	if strings.EqualFold(filepath.Ext(path), ".toml") {
		parser = toml.Parser()
	}
	fk := koanf.New(".")
	if err := fk.Load(rawbytes.Provider(b), parser); err != nil {
		return nil, nil, fmt.Errorf("config: %s: %s", path, oneLine(err.Error()))
	}
	raw, err := expandValues("", normalizeMaps(fk.Raw()), getenv)
	if err != nil {
		return nil, nil, err
	}
	m, _ := raw.(map[string]any)
	if err := checkShape(m); err != nil {
		return nil, nil, err
	}
	return m, unknownKeyWarnings(path, m), nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// normalizeMaps turns map[any]any (YAML mappings with non-string keys) into map[string]any
// and drops null values, recursively, so that later stages see one shape.
func normalizeMaps(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e != nil {
				out[k] = normalizeMaps(e)
			}
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e != nil {
				out[fmt.Sprint(k)] = normalizeMaps(e)
			}
		}
		return out
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			out = append(out, normalizeMaps(e))
		}
		return out
	case []map[string]any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			out = append(out, normalizeMaps(e))
		}
		return out
	}
	return v
}

// checkShape rejects sections of the wrong kind before koanf merges them away silently.
func checkShape(m map[string]any) error {
	if v, ok := m["appproxy"]; ok {
		if _, ok := v.(map[string]any); !ok {
			return errors.New("config: appproxy: must be a mapping")
		}
	}
	if v, ok := m["backends"]; ok {
		list, ok := v.([]any)
		if !ok {
			return errors.New("config: backends: must be a list")
		}
		for i, e := range list {
			if _, ok := e.(map[string]any); !ok {
				return fmt.Errorf("config: backends[%d]: must be a mapping", i)
			}
		}
	}
	return nil
}

// expandValues replaces ${NAME} in every string value (never in keys). path names the value
// in error messages.
func expandValues(path string, v any, getenv func(string) string) (any, error) {
	join := func(key string) string {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	switch x := v.(type) {
	case string:
		s, err := expandString(x, getenv)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", path, err)
		}
		return s, nil
	case map[string]any:
		for _, key := range sortedKeys(x) { // sorted: the same file always names the same key
			out, err := expandValues(join(key), x[key], getenv)
			if err != nil {
				return nil, err
			}
			x[key] = out
		}
	case []any:
		for i, e := range x {
			out, err := expandValues(fmt.Sprintf("%s[%d]", path, i), e, getenv)
			if err != nil {
				return nil, err
			}
			x[i] = out
		}
	}
	return v, nil
}

// expandString substitutes ${NAME}; "$${" is a literal "${" and any other "$" is kept, so
// secrets that merely contain a dollar sign survive. An unset or empty variable is an error:
// starting with an empty secret would be worse than not starting.
func expandString(s string, getenv func(string) string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", errors.New(`unterminated "${"`)
		}
		name := s[i+2 : i+end]
		if !isEnvName(name) {
			return "", fmt.Errorf("invalid variable reference %q (want ${NAME})", s[i:i+end+1])
		}
		val := getenv(name)
		if val == "" {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		b.WriteString(val)
		s = s[i+end+1:]
	}
}

func isEnvName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// unknownKeyWarnings names every key the server does not read; misspelled keys otherwise
// vanish without a trace.
func unknownKeyWarnings(path string, m map[string]any) []string {
	top := []string{"appproxy", "backends"}
	for _, s := range settings {
		top = append(top, s.key)
	}
	var warns []string
	warn := func(name, key string, known []string) {
		w := fmt.Sprintf("config: %s: unknown key %q ignored", path, name)
		if guess := closestKey(key, known); guess != "" {
			w += fmt.Sprintf(" (did you mean %q?)", guess)
		}
		warns = append(warns, w)
	}
	for _, key := range sortedKeys(m) {
		if !slices.Contains(top, key) {
			warn(key, key, top)
		}
	}
	if ap, ok := m["appproxy"].(map[string]any); ok {
		for _, key := range sortedKeys(ap) {
			if !slices.Contains(appProxyKeys, key) {
				warn("appproxy."+key, key, appProxyKeys)
			}
		}
	}
	list, _ := m["backends"].([]any)
	for i, e := range list {
		be, _ := e.(map[string]any)
		for _, key := range sortedKeys(be) {
			if !slices.Contains(backendKeys, key) {
				warn(fmt.Sprintf("backends[%d].%s", i, key), key, backendKeys)
			}
		}
	}
	return warns
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// closestKey suggests a known key within a small edit distance of a misspelling.
func closestKey(key string, known []string) string {
	best, bestDist := "", 4
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// decoder converts merged koanf values into typed fields, keeping the first error so that
// the operator sees one line naming one key.
type decoder struct {
	get func(key string) any
	err error
}

func (d *decoder) fail(key, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...))
	}
}

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

func decodeConfig(k *koanf.Koanf) (Config, error) {
	d := &decoder{get: k.Get}
	c := Config{
		Listen:                 d.str("listen"),
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
		MaxBodyBytes:           d.int64("max_body_bytes"),
		MaxModelsPerWorker:     d.int("max_models_per_worker"),
		MaxStreamBytes:         d.int64("max_stream_bytes"),
		RequireProtocolVersion: d.boolean("require_protocol_version"),
		TrustedProxies:         d.prefixes("trusted_proxies"),
		AppProxy:               decodeAppProxy(d),
	}
	if d.err == nil {
		c.Backends = decodeBackends(d, k.Get("backends"))
	}
	return c, d.err
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
		bd := &decoder{get: func(key string) any { return m[strings.TrimPrefix(key, prefix)] }, err: d.err}
		b := BackendConfig{
			Name:          bd.str(prefix + "name"),
			URL:           bd.str(prefix + "url"),
			Models:        bd.list(prefix + "models"),
			Weight:        1,
			MaxConcurrent: bd.int(prefix + "max_concurrent"),
		}
		if _, set := m["weight"]; set {
			b.Weight = bd.float(prefix + "weight")
		}
		d.err = bd.err
		out = append(out, b)
	}
	return out
}

// applyDerivedDefaults fills the defaults that depend on other values or on the host.
func (c *Config) applyDerivedDefaults() {
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

func (c Config) validate() error {
	if err := checkHostPort(c.Listen); err != nil {
		return fmt.Errorf("config: listen: %w", err)
	}
	if c.Provider == "" {
		return errors.New("config: provider: must not be empty")
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel) {
		return fmt.Errorf("config: log_level: unknown level %q (want debug, info, warn or error)", c.LogLevel)
	}
	if !slices.Contains([]string{"text", "json"}, c.LogFormat) {
		return fmt.Errorf("config: log_format: unknown format %q (want text or json)", c.LogFormat)
	}
	for _, limit := range []struct {
		key string
		n   int64
	}{
		{"max_body_bytes", c.MaxBodyBytes},
		{"max_models_per_worker", int64(c.MaxModelsPerWorker)},
		{"max_stream_bytes", c.MaxStreamBytes},
	} {
		if limit.n == 0 {
			return fmt.Errorf("config: %s: must be positive", limit.key)
		}
	}
	if err := validateBackends(c.Backends); err != nil {
		return err
	}
	return c.AppProxy.validate()
}

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

func validateBackends(backends []BackendConfig) error {
	names := map[string]int{}
	for i, b := range backends {
		if err := checkHTTPURL(b.URL); err != nil {
			return fmt.Errorf("config: backends[%d].url: %w", i, err)
		}
		if prev, dup := names[b.Name]; dup {
			return fmt.Errorf("config: backends[%d].name: %q is already used by backends[%d]", i, b.Name, prev)
		}
		names[b.Name] = i
		if b.Weight <= 0 {
			return fmt.Errorf("config: backends[%d].weight: must be positive, got %v", i, b.Weight)
		}
	}
	return nil
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
func (a AppProxyConfig) validate() error {
	fail := func(key, format string, args ...any) error {
		return fmt.Errorf("config: appproxy.%s: %s", key, fmt.Sprintf(format, args...))
	}
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
				return fail(r.key, "required when appproxy.enabled is true")
			}
		}
		if a.APIPort == 0 {
			return fail("api_port", "required: the listen port is 0")
		}
	}
	if a.CoordinatorURL != "" {
		if err := checkHTTPURL(a.CoordinatorURL); err != nil {
			return fail("coordinator_url", "%v", err)
		}
	}
	if a.RedisURL != "" {
		if err := checkRedisURL(a.RedisURL); err != nil {
			return fail("redis_url", "%v", err)
		}
	}
	if a.WildcardDomain != "" {
		if !strings.HasPrefix(a.WildcardDomain, ".") {
			return fail("wildcard_domain", "must start with a dot")
		}
		if !isDNSName(a.WildcardDomain[1:]) {
			return fail("wildcard_domain", "invalid domain %q", a.WildcardDomain)
		}
	}
	for _, h := range a.AggregationHosts {
		if _, err := netip.ParseAddr(h); err != nil && !isDNSName(h) {
			return fail("aggregation_hosts", "invalid host %q (want a bare host name, no scheme or port)", h)
		}
	}
	// api_port 0 is allowed while worker mode is off (a listen port of 0 is fine then).
	if a.APIPort > 65535 {
		return fail("api_port", "must be a port number 1-65535, got %d", a.APIPort)
	}
	if a.WildcardTrafficPort == 0 || a.WildcardTrafficPort > 65535 {
		return fail("wildcard_traffic_port", "must be a port number 1-65535, got %d", a.WildcardTrafficPort)
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
			return fail(period.key, "must be positive")
		}
	}
	return a.validateTLS()
}

func (a AppProxyConfig) validateTLS() error {
	if !a.TLSListen {
		return nil
	}
	for _, f := range []struct{ key, path string }{{"tls_cert", a.TLSCert}, {"tls_key", a.TLSKey}} {
		if f.path == "" {
			return fmt.Errorf("config: appproxy.%s: required when appproxy.tls_listen is true", f.key)
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("config: appproxy.%s: %w", f.key, err)
		}
	}
	return nil
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
		if c.WorkerSecret == "" && len(c.Backends) == 0 {
			out = append(out, "no worker secret is set, so relay workers cannot join: set --worker-secret or WORKER_SECRET (or add backends: to the config file)")
		}
	}
	if c.RequireAPIKeys {
		out = append(out, "config: require_api_keys: reserved for client API keys, which are not implemented yet; it has no effect")
	}
	return out
}

// LogValue lets the effective configuration be logged at start-up without its secrets.
func (c Config) LogValue() slog.Value {
	secret := func(s string) string {
		if s == "" {
			return "unset"
		}
		return "set"
	}
	a := c.AppProxy
	return slog.GroupValue(
		slog.String("listen", c.Listen),
		slog.String("provider", c.Provider),
		slog.String("worker_secret", secret(c.WorkerSecret)),
		slog.String("admin_token", secret(c.AdminToken)),
		slog.Int("max_queue_len", c.MaxQueueLen),
		slog.Duration("queue_timeout", c.QueueTimeout),
		slog.Duration("request_timeout", c.RequestTimeout),
		slog.Duration("drain_timeout", c.DrainTimeout),
		slog.Int("backends", len(c.Backends)),
		slog.Int("trusted_proxies", len(c.TrustedProxies)),
		slog.String("config_file", c.ConfigFile),
		slog.Bool("appproxy", a.Enabled),
		slog.String("authority", a.Authority),
		slog.String("wildcard_domain", a.WildcardDomain),
	)
}
