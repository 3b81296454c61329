package appproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelrelay/appproxy"
	"modelrelay/appproxy/appproxytest"
	"modelrelay/protocol"
)

const (
	testSecret    = "s3cret-api-token"
	testAuthority = "worker-1"
)

// recorder is the fake Apply: it remembers every circuit set it was given.
type recorder struct {
	mu    sync.Mutex
	calls [][]protocol.Circuit
	fail  error
}

func (r *recorder) Apply(_ context.Context, cs []protocol.Circuit) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, cs)
	return r.fail
}

func (r *recorder) setFail(err error) {
	r.mu.Lock()
	r.fail = err
	r.mu.Unlock()
}

func (r *recorder) Calls() [][]protocol.Circuit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Last is the most recent set, nil if none yet.
func (r *recorder) Last() []protocol.Circuit {
	calls := r.Calls()
	if len(calls) == 0 {
		return nil
	}
	return calls[len(calls)-1]
}

func has(cs []protocol.Circuit, id string) bool {
	return slices.ContainsFunc(cs, func(c protocol.Circuit) bool { return c.ID == id })
}

func find(cs []protocol.Circuit, id string) (protocol.Circuit, bool) {
	i := slices.IndexFunc(cs, func(c protocol.Circuit) bool { return c.ID == id })
	if i < 0 {
		return protocol.Circuit{}, false
	}
	return cs[i], true
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type harness struct {
	t         *testing.T
	coord     *appproxytest.Coordinator
	redisAddr string
	stopRedis func()
	apply     *recorder
	worker    *appproxy.Worker
	logs      *syncBuffer
	cancel    context.CancelFunc
	done      chan error
}

type option func(*appproxy.Config, *harness)

func withResync(d time.Duration) option {
	return func(c *appproxy.Config, _ *harness) { c.ReconcileInterval = d }
}

func withHeartbeat(d time.Duration) option {
	return func(c *appproxy.Config, _ *harness) { c.HeartbeatPeriod = d }
}

func withSecret(s string) option {
	return func(c *appproxy.Config, h *harness) {
		coord, err := appproxy.NewCoordinator(c.Coordinator.BaseURL(), s, nil)
		if err != nil {
			h.t.Fatal(err)
		}
		c.Coordinator = coord
	}
}

// newHarness starts Redis, the coordinator double, and prepares (not starts) a worker.
func newHarness(t *testing.T, opts ...option) *harness {
	t.Helper()
	h := &harness{t: t, apply: &recorder{}, logs: &syncBuffer{}}
	h.redisAddr, h.stopRedis = appproxytest.StartRedis(t)
	h.coord = appproxytest.NewCoordinator(testSecret, h.redisAddr)
	t.Cleanup(func() { h.coord.Close() })
	srv := httptest.NewServer(h.coord)
	t.Cleanup(srv.Close)
	coord, err := appproxy.NewCoordinator(srv.URL, testSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: h.redisAddr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	cfg := appproxy.Config{
		Registration: protocol.NewInferenceRegistration(testAuthority, "router.example.com", 10201,
			false, true, ".models.example.com", 443),
		Coordinator:       coord,
		Events:            rdb,
		Apply:             h.apply.Apply,
		HeartbeatPeriod:   100 * time.Millisecond,
		ReconcileInterval: time.Hour, // tests that need resync ask for it
		MinBackoff:        20 * time.Millisecond,
		MaxBackoff:        200 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, o := range opts {
		o(&cfg, h)
	}
	h.worker, err = appproxy.NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker log:\n%s", h.logs.String())
		}
	})
	return h
}

// start runs the worker until the test ends.
func (h *harness) start() *harness {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.worker.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			h.t.Error("worker did not stop")
		}
	})
	return h
}

// stop cancels the worker and returns Run's result.
func (h *harness) stop() error {
	h.cancel()
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("worker did not stop")
		return nil
	}
}

// eventually polls cond until it holds or 20 s pass.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ready waits for registration, subscription and the first pull.
func (h *harness) ready() {
	h.t.Helper()
	h.eventually("registered and subscribed", func() bool {
		s := h.worker.Status()
		return s.Registered && s.EventsConnected && len(h.apply.Calls()) > 0
	})
}

func (h *harness) requests(method string) []appproxytest.Request {
	var out []appproxytest.Request
	for _, r := range h.coord.Requests() {
		if r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// circuitJSON is a serveable inference circuit; extra whitespace checks the verbatim echo.
func circuitJSON(id, subdomain, appMode string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"id": "%s", "app": "", "protocol": "http",
 "worker": "a6c7a0d4-1f0e-4d51-8f8e-2b9c6f0b7e21", "app_mode": "%s", "frontend_mode": "wildcard",
 "envs": {}, "arguments": null, "open_to_public": false, "allowed_client_ips": null, "port": null,
 "subdomain": "%s", "user_id": null, "endpoint_id": null, "runtime_variant": "vllm",
 "route_info": [], "session_ids": [], "created_at": "2026-08-20T01:02:03Z", "updated_at": "2026-08-20T01:02:03Z"}`,
		id, appMode, subdomain))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// closeWatch returns every ack published before now: Pub/Sub keeps order, so once a marker
// published now is seen, everything before it has been too.
func (h *harness) closeWatch(w *appproxytest.AckWatch) []*appproxytest.Ack {
	h.t.Helper()
	marker, err := protocol.EncodeAck("test-marker", `[{"id":"marker"}]`)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.coord.Publish(ctx(h.t), marker); err != nil {
		h.t.Fatal(err)
	}
	if _, err := w.Wait(ctx(h.t), "marker"); err != nil {
		h.t.Fatal(err)
	}
	return w.Close()
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// quietRedis drops go-redis' own log lines: tests that kill Redis on purpose would fill the
// output with dial errors.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{})
	os.Exit(m.Run())
}
