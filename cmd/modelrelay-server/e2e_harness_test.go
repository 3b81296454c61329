package main

// End-to-end harness: a private redis-server, the appproxytest coordinator on httptest, and the
// real server (serve) in-process on a loopback port, reached through its own HTTP surface.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"modelrelay/appproxy/appproxytest"
)

const (
	e2eSecret    = "e2e-api-secret"
	e2eJWTSecret = "some_jwt_secret" // the fixture token's key
	e2eAdmin     = "e2e-admin-token"
	e2eDomain    = ".models.test"
	e2eApex      = "models.test"
	e2eAggHost   = "ai.test"
)

// e2eOptions shapes one environment.
type e2eOptions struct {
	env        map[string]string // extra/overriding environment for LoadConfig
	authority  string            // default "modelrelay-e2e"
	coordFail  int               // coordinator answers this status from the start (0 = healthy)
	onRegister func(c *appproxytest.Coordinator, authority string)
	circuits   []json.RawMessage // assigned (silently) before the server starts
	noWait     bool              // do not wait for registration and /readyz
}

// e2eEnv is one running system.
type e2eEnv struct {
	t         testing.TB
	authority string
	redisAddr string
	stopRedis func()
	coord     *appproxytest.Coordinator
	coordURL  string
	addr      string // the relay, 127.0.0.1:port
	logs      *lockedBuffer
	client    *http.Client
	stop      func() error
}

// lockedBuffer collects the server's log for failure reports.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) tail(n int) string {
	s := l.String()
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// baseEnv is the environment every e2e server gets; short timings keep the suite fast. An
// environment without a coordinator runs the server standalone.
func (e *e2eEnv) baseEnv(listen string) map[string]string {
	env := map[string]string{
		"LISTEN_ADDR":            listen,
		"LOG_LEVEL":              "debug",
		"DRAIN_TIMEOUT_SECS":     "2",
		"MODELRELAY_ADMIN_TOKEN": e2eAdmin,
	}
	if e.coordURL == "" {
		return env
	}
	for k, v := range map[string]string{
		"APPPROXY_ENABLED":               "true",
		"APPPROXY_COORDINATOR_URL":       e.coordURL,
		"APPPROXY_API_SECRET":            e2eSecret,
		"APPPROXY_JWT_SECRET":            e2eJWTSecret,
		"APPPROXY_REDIS_URL":             "redis://" + e.redisAddr + "/4",
		"APPPROXY_AUTHORITY":             e.authority,
		"APPPROXY_HOSTNAME":              "router.models.test",
		"APPPROXY_WILDCARD_DOMAIN":       e2eDomain,
		"APPPROXY_AGGREGATION_HOSTS":     e2eAggHost,
		"APPPROXY_HEARTBEAT_PERIOD":      "200ms",
		"APPPROXY_RECONCILE_INTERVAL":    "300ms",
		"APPPROXY_HEALTH_CHECK_INTERVAL": "200ms",
	} {
		env[k] = v
	}
	return env
}

// startE2E brings up Redis, the coordinator and the server, and waits until the server is
// registered and ready (unless opts.noWait).
func startE2E(t testing.TB, opts e2eOptions) *e2eEnv {
	t.Helper()
	e := &e2eEnv{t: t, authority: opts.authority, logs: &lockedBuffer{}}
	if e.authority == "" {
		e.authority = "modelrelay-e2e"
	}
	e.redisAddr, e.stopRedis = appproxytest.StartRedis(t)
	e.coord = appproxytest.NewCoordinator(e2eSecret, e.redisAddr)
	t.Cleanup(func() { e.coord.Close() })
	if opts.coordFail != 0 {
		e.coord.FailWith(opts.coordFail)
	}
	if opts.onRegister != nil {
		e.coord.OnRegister(func(a string) { opts.onRegister(e.coord, a) })
	}
	for _, c := range opts.circuits {
		if _, err := e.coord.AddCircuit(e.authority, c); err != nil {
			t.Fatalf("assign circuit: %v", err)
		}
	}
	cs := httptest.NewServer(e.coord)
	t.Cleanup(cs.Close)
	e.coordURL = cs.URL
	// The timeout only turns a test mistake (a request stuck on a held replica) into a failure.
	e.client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}}
	t.Cleanup(e.client.CloseIdleConnections)

	e.startServer(opts.env)
	t.Cleanup(func() {
		if err := e.stop(); err != nil {
			t.Errorf("serve returned %v", err)
		}
		if t.Failed() {
			t.Logf("server log (tail):\n%s", e.logs.tail(12000))
		}
	})
	if !opts.noWait {
		e.waitReady()
	}
	return e
}

// startServer runs serve on a free loopback port, retrying when another process takes the
// port between the probe and the listen.
func (e *e2eEnv) startServer(extra map[string]string) {
	e.t.Helper()
	for attempt := 0; ; attempt++ {
		addr := freeAddr(e.t)
		env := e.baseEnv(addr)
		for k, v := range extra {
			env[k] = v
		}
		cfg, warnings, err := LoadConfig(nil, func(k string) string { return env[k] }, io.Discard)
		if err != nil {
			e.t.Fatalf("LoadConfig: %v (warnings %q)", err, warnings)
		}
		log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serve(ctx, cfg, log) }()
		if err := waitListening(addr, done); err != nil {
			cancel()
			if strings.Contains(err.Error(), "listen on") && attempt < 5 {
				continue
			}
			e.t.Fatalf("server did not start: %v\n%s", err, e.logs.tail(4000))
		}
		e.addr = addr
		var once sync.Once
		var stopErr error
		e.stop = func() error {
			once.Do(func() {
				cancel()
				select {
				case stopErr = <-done:
				case <-time.After(20 * time.Second):
					stopErr = errors.New("serve did not return within 20 s of cancel")
				}
			})
			return stopErr
		}
		return
	}
}

// errServerExited is waitListening's error when the server ended before it listened (and the
// done channel was read).
var errServerExited = errors.New("serve returned early")

// waitListening polls /livez until the server answers or serve returns.
func waitListening(addr string, done <-chan error) error {
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return fmt.Errorf("%w: %v", errServerExited, err)
		default:
		}
		resp, err := c.Get("http://" + addr + "/livez")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(string(b), `"ok"`) {
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("server not listening after 10 s")
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitReady waits for the first registration and /readyz 200.
func (e *e2eEnv) waitReady() {
	e.t.Helper()
	eventually(e.t, 20*time.Second, "registered and ready", func() (bool, string) {
		st, _, body := e.do("GET", "", "/readyz", nil, nil)
		return st == 200 && e.workerID() != "", fmt.Sprintf("readyz %d %s, worker id %q", st, body, e.workerID())
	})
}

// workerID is the id of our current registration, as /health reports it ("" when not registered).
func (e *e2eEnv) workerID() string {
	var h struct {
		AppProxy struct {
			WorkerID   string `json:"worker_id"`
			Registered bool   `json:"registered"`
		} `json:"appproxy"`
	}
	if st, _, body := e.do("GET", "", "/health", nil, nil); st == 200 && json.Unmarshal(body, &h) == nil && h.AppProxy.Registered {
		return h.AppProxy.WorkerID
	}
	return ""
}

// health returns the appproxy object of /health.
func (e *e2eEnv) health() map[string]any {
	e.t.Helper()
	st, _, body := e.do("GET", "", "/health", nil, nil)
	var h map[string]any
	if st != 200 || json.Unmarshal(body, &h) != nil {
		e.t.Fatalf("/health: %d %s", st, body)
	}
	ap, _ := h["appproxy"].(map[string]any)
	return ap
}

// do sends one request to the relay with Host host ("" = the relay's own 127.0.0.1 address).
func (e *e2eEnv) do(method, host, path string, header http.Header, body []byte) (int, http.Header, []byte) {
	e.t.Helper()
	resp, err := e.send(context.Background(), method, host, path, header, body)
	if err != nil {
		e.t.Errorf("%s %s%s: %v", method, host, path, err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Errorf("%s %s%s: read body: %v", method, host, path, err)
	}
	return resp.StatusCode, resp.Header, b
}

// send is do without reading the body (for streams and concurrent use).
func (e *e2eEnv) send(ctx context.Context, method, host, path string, header http.Header, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+e.addr+path, rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if host != "" {
		req.Host = host
	}
	return e.client.Do(req)
}

// chat posts a small chat completion to host (a circuit host or an aggregation host).
func (e *e2eEnv) chat(host, model string, header http.Header) (int, http.Header, []byte) {
	e.t.Helper()
	return e.do("POST", host, "/v1/chat/completions", withJSON(header), chatBody(model, false))
}

func chatBody(model string, stream bool) []byte {
	b, _ := json.Marshal(map[string]any{"model": model, "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": "hi"}}})
	return b
}

func withJSON(h http.Header) http.Header {
	out := h.Clone()
	if out == nil {
		out = http.Header{}
	}
	out.Set("Content-Type", "application/json")
	return out
}

func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

func circuitHost(sub string) string { return sub + e2eDomain }

// adminCircuits returns /admin/circuits' list.
func (e *e2eEnv) adminCircuits() []map[string]any {
	e.t.Helper()
	st, _, body := e.do("GET", "", "/admin/circuits", bearer(e2eAdmin), nil)
	var out struct {
		Circuits []map[string]any `json:"circuits"`
	}
	if st != 200 || json.Unmarshal(body, &out) != nil {
		e.t.Fatalf("/admin/circuits: %d %s", st, body)
	}
	return out.Circuits
}

// adminCircuit returns the /admin/circuits entry of id (nil when absent).
func (e *e2eEnv) adminCircuit(id string) map[string]any {
	for _, c := range e.adminCircuits() {
		if c["id"] == id {
			return c
		}
	}
	return nil
}

// requestsSince returns the coordinator requests after the first n.
func (e *e2eEnv) requestsSince(n int) []appproxytest.Request {
	all := e.coord.Requests()
	if n > len(all) {
		return nil
	}
	return all[n:]
}

// eventually polls cond until it holds or timeout passes (then the test fails with cond's
// last explanation).
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// problemWant is one refusal ingress answers: its status, problem slug and message.
type problemWant struct {
	status int
	slug   string
	msg    string // exact; a trailing "*" makes it a prefix
}

// checkProblem asserts the exact shape of an ingress refusal: Backend.AI's problem JSON plus
// an OpenAI-style error member.
func checkProblem(t testing.TB, label string, status int, h http.Header, body []byte, want problemWant) {
	t.Helper()
	if status != want.status {
		t.Errorf("%s: status %d, want %d; body %s", label, status, want.status, body)
		return
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q, want application/json", label, ct)
	}
	var p struct {
		Type  *string `json:"type"`
		Title *string `json:"title"`
		Msg   *string `json:"msg"`
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Errorf("%s: body is not JSON: %s", label, body)
		return
	}
	if p.Type == nil || *p.Type != "https://api.backend.ai/probs/"+want.slug {
		t.Errorf("%s: type %v, want https://api.backend.ai/probs/%s; body %s", label, deref(p.Type), want.slug, body)
	}
	if p.Title == nil || *p.Title == "" {
		t.Errorf("%s: no title; body %s", label, body)
	}
	msg := deref(p.Msg)
	if prefix, ok := strings.CutSuffix(want.msg, "*"); ok {
		if !strings.HasPrefix(msg, prefix) {
			t.Errorf("%s: msg %q, want prefix %q", label, msg, prefix)
		}
	} else if msg != want.msg {
		t.Errorf("%s: msg %q, want %q", label, msg, want.msg)
	}
	if p.Error == nil || p.Error.Message == "" || p.Error.Type == "" {
		t.Errorf("%s: no OpenAI-style error member; body %s", label, body)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<absent>"
	}
	return *s
}

func itoa(n int) string { return strconv.Itoa(n) }
