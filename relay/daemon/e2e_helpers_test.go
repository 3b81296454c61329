package daemon_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"modelrelay/relay"
	"modelrelay/relay/api"
	"modelrelay/relay/daemon"
)

const (
	secret = "e2e-secret"
	wait   = 15 * time.Second // failure deadline, not a timing assertion
)

func quietLog() *slog.Logger {
	if os.Getenv("E2E_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// relayServer is the real relay server on a loopback port.
type relayServer struct {
	srv  *relay.Server
	http *httptest.Server
	stop context.CancelFunc
	done chan struct{}
}

func startRelay(t testing.TB, opts relay.Options, listener net.Listener) *relayServer {
	t.Helper()
	if opts.WorkerSecret == "" {
		opts.WorkerSecret = secret
	}
	opts.Logger = quietLog()
	srv, err := relay.New(opts)
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	ts := httptest.NewUnstartedServer(api.Handler(srv))
	if listener != nil {
		ts.Listener.Close()
		ts.Listener = listener
	}
	ts.Start()
	ctx, cancel := context.WithCancel(context.Background())
	r := &relayServer{srv: srv, http: ts, stop: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); srv.Run(ctx) }()
	t.Cleanup(r.shutdown)
	return r
}

// shutdown stops the server; safe to call twice.
func (r *relayServer) shutdown() {
	select {
	case <-r.done:
		return
	default:
	}
	r.srv.Close()
	r.http.CloseClientConnections()
	r.http.Close()
	r.stop()
	<-r.done
}

func (r *relayServer) url() string { return r.http.URL }

type health struct {
	WorkersConnected int `json:"workers_connected"`
	Workers          []struct {
		ID         string   `json:"id"`
		Models     []string `json:"models"`
		InFlight   int      `json:"in_flight"`
		IsDraining bool     `json:"is_draining"`
	} `json:"workers"`
}

func (r *relayServer) health(t testing.TB) health {
	t.Helper()
	resp, err := http.Get(r.url() + "/health")
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	defer resp.Body.Close()
	var h health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("health: %v", err)
	}
	return h
}

// waitFor polls the server's /health until cond holds.
func (r *relayServer) waitFor(t testing.TB, what string, cond func(health) bool) health {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		h := r.health(t)
		if cond(h) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; health %+v", what, h)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *relayServer) waitWorkers(t testing.TB, n int) health {
	t.Helper()
	return r.waitFor(t, "workers", func(h health) bool { return h.WorkersConnected == n })
}

// startDaemon runs an in-process worker daemon against the server.
func startDaemon(t testing.TB, proxyURL, backendURL string, edit func(*daemon.Config)) (*daemon.Daemon, context.CancelFunc) {
	t.Helper()
	cfg := daemon.Config{
		ProxyURL: proxyURL, WorkerSecret: secret, WorkerName: "e2e", Models: []string{"m1"},
		MaxConcurrency: 4, BackendURL: backendURL, Logger: quietLog(),
	}
	if edit != nil {
		edit(&cfg)
	}
	d, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return d, stop
}

// post sends a client request to the relay.
func post(t testing.TB, ctx context.Context, url, body string, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp
}

func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	return string(b)
}

func hasModel(h health, m string) bool {
	for _, w := range h.Workers {
		if slices.Contains(w.Models, m) {
			return true
		}
	}
	return false
}
