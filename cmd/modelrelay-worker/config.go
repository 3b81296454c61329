package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

// option is one setting, reachable as a flag, an environment variable and a file key (the
// flag name in snake_case), in that order of precedence. section, usage and shown are its
// --help entry: usage lines are at most 57 columns, shown is the default as --help says it
// ("" = def, or none when def is empty).
type option struct {
	section, flag, env, def, meta string
	usage                         []string
	shown                         string
}

func (o option) key() string { return strings.ReplaceAll(o.flag, "-", "_") }

// options mirror the Rust modelrelay-worker's flags and environment names, in --help order.
var options = []option{
	{section: "Relay", flag: "proxy-url", env: "PROXY_URL", def: "http://127.0.0.1:8080", meta: "URLS",
		usage: []string{"base URL of the relay server (http, https, ws or wss);", "a comma list keeps a session to each of several relays"}},
	{section: "Relay", flag: "worker-secret", env: "WORKER_SECRET", meta: "SECRET",
		usage: []string{"secret shared with the relay for this provider (required)"}},
	{section: "Relay", flag: "provider", env: "PROVIDER_NAME", def: "local", meta: "NAME",
		usage: []string{"provider (pool) to join on the relay"}},
	{section: "Relay", flag: "worker-name", env: "WORKER_NAME", def: "worker", meta: "NAME",
		usage: []string{"name this worker reports to the relay"}},
	{section: "Relay", flag: "max-frame-bytes", env: "MAX_FRAME_BYTES", def: "67108864", meta: "N", shown: "67108864 (64 MiB)",
		usage: []string{"largest frame sent to the relay (a non-streamed answer", "travels in one); must not exceed the relay's", "--max-frame-bytes"}},
	{section: "Backend", flag: "backend-url", env: "BACKEND_URL", def: "http://127.0.0.1:8000", meta: "URL",
		usage: []string{"base URL of the local model backend"}},
	{section: "Backend", flag: "models", env: "MODELS", def: "default", meta: "LIST", shown: `one model named "default"`,
		usage: []string{"models served; * = ask the backend's GET /v1/models"}},
	{section: "Backend", flag: "max-concurrency", env: "MAX_CONCURRENCY", def: "1", meta: "N",
		usage: []string{"requests forwarded to the backend at once (shared by", "every relay)"}},
	{section: "Shutdown", flag: "drain-timeout", env: "DRAIN_TIMEOUT_SECS", def: "30", meta: "DURATION", shown: "30s",
		usage: []string{"on SIGTERM, how long in-flight requests may finish"}},
	{section: "Logging", flag: "log-level", env: "LOG_LEVEL", def: "info", meta: "LEVEL",
		usage: []string{"debug, info, warn or error"}},
	{section: "Logging", flag: "log-format", env: "LOG_FORMAT", def: "text", meta: "FORMAT",
		usage: []string{"text or json"}},
}

// settings is the resolved configuration.
type settings struct {
	ProxyURL       string
	WorkerSecret   string
	Provider       string
	WorkerName     string
	Models         []string
	MaxConcurrency int
	MaxFrameBytes  int64
	BackendURL     string
	DrainTimeout   time.Duration
	LogLevel       slog.Level
	LogFormat      string   // text or json
	UnknownKeys    []string // file keys we do not know, to warn about once logging is up
}

// errHelp and errVersion are not failures: the caller prints and exits 0.
var (
	errHelp    = errors.New("help requested")
	errVersion = errors.New("version requested")
)

// usageError is a command-line syntax error (exit status 2, like package flag).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }

// load resolves the settings: flag > environment > --config TOML file > default.
func load(args []string, lookupEnv func(string) (string, bool)) (settings, error) {
	fs := flag.NewFlagSet("modelrelay-worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, o := range options {
		fs.String(o.flag, o.def, strings.Join(o.usage, " "))
	}
	configPath := fs.String("config", "", "TOML file with any of the settings above")
	version := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return settings{}, errHelp
		}
		return settings{}, usageError{err}
	}
	if fs.NArg() > 0 {
		return settings{}, usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if *version {
		return settings{}, errVersion
	}

	k := koanf.New(".")
	defaults := map[string]any{}
	for _, o := range options {
		defaults[o.key()] = o.def
	}
	_ = k.Load(confmap.Provider(defaults, "."), nil) // a flat map of strings cannot fail
	var unknown []string
	if *configPath != "" {
		var err error
		if unknown, err = loadFile(k, *configPath); err != nil {
			return settings{}, err
		}
	}
	env := map[string]any{}
	for _, o := range options {
		if v, ok := lookupEnv(o.env); ok && v != "" {
			env[o.key()] = v
		}
	}
	_ = k.Load(confmap.Provider(env, "."), nil)
	set := map[string]any{}
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "config" && f.Name != "version" {
			set[strings.ReplaceAll(f.Name, "-", "_")] = f.Value.String()
		}
	})
	_ = k.Load(confmap.Provider(set, "."), nil)

	s, err := resolve(k)
	s.UnknownKeys = unknown
	return s, err
}

// loadFile merges a TOML file into k and returns the keys it does not know.
func loadFile(k *koanf.Koanf, path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	f := koanf.New(".")
	if err := f.Load(rawbytes.Provider(b), toml.Parser()); err != nil {
		return nil, fmt.Errorf("parse config %s: %s", path, oneLine(err))
	}
	var unknown []string
	for _, key := range f.Keys() {
		if !slices.ContainsFunc(options, func(o option) bool { return o.key() == key }) {
			unknown = append(unknown, key)
		}
	}
	if err := k.Merge(f); err != nil {
		return nil, fmt.Errorf("merge config %s: %w", path, err)
	}
	return unknown, nil
}

func resolve(k *koanf.Koanf) (settings, error) {
	var s settings
	var err error
	str := func(key string) string {
		if err != nil {
			return ""
		}
		var v string
		v, err = scalar(k.Get(key), key)
		return strings.TrimSpace(v)
	}
	s.ProxyURL = str("proxy_url")
	s.WorkerSecret = str("worker_secret")
	s.Provider = str("provider")
	s.WorkerName = str("worker_name")
	s.BackendURL = str("backend_url")
	concurrency := str("max_concurrency")
	frame := str("max_frame_bytes")
	drain := str("drain_timeout")
	level := str("log_level")
	format := str("log_format")
	if err != nil {
		return s, err
	}
	if s.Models, err = models(k.Get("models")); err != nil {
		return s, err
	}
	if s.MaxConcurrency, err = parseConcurrency(concurrency); err != nil {
		return s, err
	}
	if s.MaxFrameBytes, err = strconv.ParseInt(frame, 10, 64); err != nil || s.MaxFrameBytes < 1<<20 {
		return s, fmt.Errorf("max-frame-bytes must be a whole number of bytes, at least 1048576, got %q", frame)
	}
	if s.DrainTimeout, err = parseSeconds(drain); err != nil {
		return s, fmt.Errorf("drain-timeout: %w", err)
	}
	if s.LogLevel, err = parseLevel(level); err != nil {
		return s, err
	}
	if s.LogFormat = strings.ToLower(format); s.LogFormat != "text" && s.LogFormat != "json" {
		return s, fmt.Errorf("log-format must be text or json, got %q", format)
	}
	if s.WorkerSecret == "" {
		return s, errors.New("worker secret is required (--worker-secret, WORKER_SECRET, or worker_secret in --config)")
	}
	return s, nil
}

// scalar renders a file, environment or flag value as text; tables and arrays are refused.
func scalar(v any, key string) (string, error) {
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	case int64, float64, bool:
		return fmt.Sprint(t), nil
	}
	return "", fmt.Errorf("%s must be a single value", key)
}

// models accepts a TOML array or a comma list (flags, environment, or a string in the file).
func models(v any) ([]string, error) {
	var raw []string
	switch t := v.(type) {
	case string:
		raw = strings.Split(t, ",")
	case []any:
		for _, m := range t {
			s, ok := m.(string)
			if !ok {
				return nil, errors.New("models must be an array of strings")
			}
			raw = append(raw, s)
		}
	default:
		return nil, errors.New("models must be an array of strings or a comma-separated list")
	}
	out := []string{}
	for _, m := range raw {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out, nil
}

func parseConcurrency(v string) (int, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > math.MaxUint32 {
		return 0, fmt.Errorf("max-concurrency must be a whole number from 1 to %d, got %q", uint32(math.MaxUint32), v)
	}
	return int(n), nil
}

// parseSeconds takes a whole number of seconds (as the Rust flags do) or Go duration text.
func parseSeconds(v string) (time.Duration, error) {
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want seconds or a duration like 45s, got %q", v)
	}
	return d, nil
}

func parseLevel(v string) (slog.Level, error) {
	switch strings.ToLower(v) {
	case "trace", "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log-level must be debug, info, warn or error, got %q", v)
}

// oneLine folds a multi-line parser message (go-toml quotes the offending line) into one.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
