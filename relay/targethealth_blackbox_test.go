package relay_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modelrelay/relay"
)

// A static backend that goes unhealthy is told once: one WARN when its breaker opens, however
// many trials fail after, and one INFO when it is back. /health, /admin/stats and
// modelrelay_target_healthy show it down meanwhile.
func TestUnhealthyTargetIsToldOnce(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	be := newBackend(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"error":"out of memory"}`)
			return
		}
		io.WriteString(w, `{"ok":true}`)
	})
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// A short cool-down, so trials come one after another; no probes (Run is not called).
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Logger: log, AdminToken: adminToken, SlowStart: -1,
		Backends: []relay.Backend{{Name: "gpu-a", URL: be.URL, Models: []string{"m"}}},
		Breaker:  relay.BreakerOptions{Failures: 1, Cooldown: time.Millisecond, MaxCooldown: time.Millisecond}})
	askOnce := func() int { return wait(t, goPost(ts, "/v1/chat/completions", chatBody("m", false))).resp.StatusCode }

	eventually(t, "two failed trials after the breaker opened", func() bool {
		askOnce()
		return countLines(logs.String(), "target still unhealthy", "target=gpu-a") >= 2
	})
	if n := countLines(logs.String(), "level=WARN", "target=gpu-a"); n != 1 {
		t.Fatalf("%d WARN lines for an outage, want 1:\n%s", n, logs)
	}
	if n := countLines(logs.String(), "level=WARN", "target unhealthy: breaker opened", "target=gpu-a", "pool=local"); n != 1 {
		t.Fatalf("no WARN that names the pool and the target:\n%s", logs)
	}
	checkTargetHealth(t, ts, "gpu-a", false)

	failing.Store(false)
	eventually(t, "a request served once the backend recovered", func() bool { return askOnce() == http.StatusOK })
	for range 3 {
		askOnce()
	}
	if n := countLines(logs.String(), "level=INFO", "target healthy again", "target=gpu-a"); n != 1 {
		t.Fatalf("%d INFO lines for the recovery, want 1:\n%s", n, logs)
	}
	if n := countLines(logs.String(), "level=WARN", "target=gpu-a"); n != 1 {
		t.Fatalf("%d WARN lines after the recovery, want still 1:\n%s", n, logs)
	}
	checkTargetHealth(t, ts, "gpu-a", true)

	// A second outage is told again.
	failing.Store(true)
	askOnce()
	if n := countLines(logs.String(), "level=WARN", "target unhealthy", "target=gpu-a"); n != 2 {
		t.Fatalf("%d WARN lines after a second outage, want 2:\n%s", n, logs)
	}
	checkTargetHealth(t, ts, "gpu-a", false)
}

// checkTargetHealth asserts what /health, /admin/stats and /metrics say about target's health.
func checkTargetHealth(t *testing.T, ts *httptest.Server, target string, healthy bool) {
	t.Helper()
	for _, path := range []string{"/health", "/admin/stats"} {
		_, body := getJSON(t, ts, path, adminToken)
		found := false
		pools, _ := body["pools"].(map[string]any)
		local, _ := pools["local"].(map[string]any)
		targets, _ := local["targets"].([]any)
		for _, x := range targets {
			tg, _ := x.(map[string]any)
			if tg["id"] != target {
				continue
			}
			found = true
			if tg["healthy"] != healthy {
				t.Errorf("%s: target %s healthy=%v, want %v (%v)", path, target, tg["healthy"], healthy, tg)
			}
			if breaker := tg["breaker"]; (breaker == "closed") != healthy {
				t.Errorf("%s: target %s breaker %v while healthy=%v", path, target, breaker, healthy)
			}
		}
		if !found {
			t.Errorf("%s: no target %s in pools.local: %v", path, target, body["pools"])
		}
	}
	want := `modelrelay_target_healthy{pool="local",target="` + target + `"} 0`
	if healthy {
		want = strings.TrimSuffix(want, "0") + "1"
	}
	if _, metrics := getText(t, ts, "/metrics"); !strings.Contains(metrics, want+"\n") {
		t.Errorf("/metrics has no %q:\n%s", want, grepLines(metrics, "modelrelay_target_healthy"))
	}
}

// countLines counts the lines of text that contain every one of parts.
func countLines(text string, parts ...string) int {
	n := 0
	for _, line := range strings.Split(text, "\n") {
		all := line != ""
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}
