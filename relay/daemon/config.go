package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"modelrelay/protocol"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Config describes one worker daemon. Zero durations take the defaults below.
type Config struct {
	ProxyURL       string   // relay server base URL (http, https, ws or wss); a comma list attaches to several
	Provider       string   // provider to register under; "" = "local"
	WorkerSecret   string   // sent as x-worker-secret; required
	WorkerName     string   // "" = "worker"
	Models         []string // "*" = discover from the backend's /v1/models
	MaxConcurrency int      // requests served at once; < 1 = 1
	BackendURL     string   // base URL the endpoint paths are appended to
	// MaxFrameBytes is the largest frame sent to the server: a non-streamed answer travels in
	// one. It must not exceed the server's max_frame_bytes (both default to 64 MiB).
	MaxFrameBytes int64

	Logger *slog.Logger // nil = slog.Default()

	// Tuning knobs; the defaults are the protocol's and only tests change them.
	IdleTimeout    time.Duration // reconnect after this long without a frame from the server (90 s)
	BackoffMin     time.Duration // first reconnect delay (1 s)
	BackoffMax     time.Duration // reconnect delay cap (30 s)
	GracefulDelay  time.Duration // wait after the server closed the session with 1000 (2 s)
	MaxJitter      time.Duration // random extra delay added to every reconnect wait (500 ms; < 0 = none)
	StableSession  time.Duration // a session that lasted longer resets the backoff (90 s)
	WriteTimeout   time.Duration // deadline for one frame write (10 s)
	DialTimeout    time.Duration // WebSocket handshake and backend connect timeout (10 s)
	DiscoveryLimit time.Duration // deadline for GET /v1/models (10 s)
}

const (
	defaultProvider   = "local"
	defaultWorkerName = "worker"
)

// withDefaults returns a copy of c with every zero field filled in.
func (c Config) withDefaults() Config {
	setDur := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Provider == "" {
		c.Provider = defaultProvider
	}
	if c.WorkerName == "" {
		c.WorkerName = defaultWorkerName
	}
	c.MaxConcurrency = max(1, min(c.MaxConcurrency, math.MaxUint32))
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = protocol.DefaultMaxFrameBytes
	}
	setDur(&c.IdleTimeout, 90*time.Second)
	setDur(&c.BackoffMin, time.Second)
	setDur(&c.BackoffMax, 30*time.Second)
	setDur(&c.GracefulDelay, 2*time.Second)
	if c.MaxJitter == 0 {
		c.MaxJitter = 500 * time.Millisecond
	}
	setDur(&c.StableSession, 90*time.Second)
	setDur(&c.WriteTimeout, 10*time.Second)
	setDur(&c.DialTimeout, 10*time.Second)
	setDur(&c.DiscoveryLimit, 10*time.Second)
	// The server cleans too, but a clean list keeps the wildcard check and the logs honest.
	c.Models = protocol.CleanModels(c.Models)
	return c
}

// validate reports the first thing that makes c unusable, as one line.
func (c Config) validate() error {
	if c.WorkerSecret == "" {
		return errors.New("worker secret is required")
	}
	if _, err := connectURLs(c.ProxyURL, c.Provider); err != nil {
		return err
	}
	u, err := url.Parse(c.BackendURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("backend url %q must be an absolute http or https URL", c.BackendURL)
	}
	return nil
}

// hasWildcard reports whether models asks for discovery from the backend.
func hasWildcard(models []string) bool {
	for _, m := range models {
		if m == "*" {
			return true
		}
	}
	return false
}

// connectURLs turns a comma list of relay base URLs into their worker endpoints, refusing an
// empty list and the same relay twice (two sessions to one server would register twice).
func connectURLs(proxyURLs, provider string) ([]string, error) {
	var out []string
	for _, raw := range strings.Split(proxyURLs, ",") {
		if strings.TrimSpace(raw) == "" && strings.Contains(proxyURLs, ",") {
			continue // a trailing comma
		}
		u, err := ConnectURL(raw, provider)
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, u) {
			return nil, fmt.Errorf("proxy url %q is listed twice", strings.TrimSpace(raw))
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("proxy url %q names no relay", proxyURLs)
	}
	return out, nil
}

// ConnectURL turns a relay server base URL into the worker endpoint: trailing slashes trimmed,
// http becomes ws and https becomes wss, then /v1/worker/connect?provider=<escaped provider>.
func ConnectURL(proxyURL, provider string) (string, error) {
	base := strings.TrimRight(strings.TrimSpace(proxyURL), "/")
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("proxy url %q: %w", proxyURL, err)
	}
	scheme := strings.ToLower(u.Scheme)
	rest := base[len(u.Scheme):] // "://host…", keeping the caller's spelling of the rest
	switch scheme {
	case "http":
		scheme = "ws"
	case "https":
		scheme = "wss"
	case "ws", "wss":
	default:
		return "", fmt.Errorf("proxy url %q must use http, https, ws or wss", proxyURL)
	}
	if u.Host == "" {
		return "", fmt.Errorf("proxy url %q has no host", proxyURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("proxy url %q must not carry a query or fragment", proxyURL)
	}
	if provider == "" {
		provider = defaultProvider
	}
	return scheme + rest + "/v1/worker/connect?provider=" + url.QueryEscape(provider), nil
}
