package daemon_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"modelrelay/relay"
	"modelrelay/relay/daemon"
)

// logSink is a log the daemon writes while the test reads it.
type logSink struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *logSink) count(parts ...string) int {
	n := 0
	for _, line := range strings.Split(s.String(), "\n") {
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

// A wrong worker secret is one ERROR with what to check, however many attempts follow (backed
// off, at DEBUG), whether the relay refuses it at the handshake (401/403, the Rust relay) or
// right after with close 1008 (this relay).
func TestRefusedSecretIsOneError(t *testing.T) {
	rust := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "invalid worker secret", http.StatusUnauthorized)
	}))
	t.Cleanup(rust.Close)
	ours := startRelay(t, relay.Options{Timings: relay.Timings{AuthFailureStep: time.Millisecond}}, nil)
	for name, url := range map[string]string{"handshake 401": rust.URL, "close 1008": ours.url()} {
		t.Run(name, func(t *testing.T) {
			logs := &logSink{}
			startDaemon(t, url, "http://127.0.0.1:1", func(c *daemon.Config) {
				c.WorkerSecret = "wrong"
				c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				c.BackoffMin, c.BackoffMax, c.MaxJitter = time.Millisecond, 2*time.Millisecond, -1
			})
			deadline := time.Now().Add(wait)
			for logs.count("refused the worker secret again") < 3 {
				if time.Now().After(deadline) {
					t.Fatalf("no repeated attempts:\n%s", logs)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if n := logs.count("level=ERROR", "the relay refused the worker secret: check --worker-secret / WORKER_SECRET and the relay's worker_secret"); n != 1 {
				t.Errorf("%d ERROR lines with the hint, want 1:\n%s", n, logs)
			}
			if n := logs.count("level=WARN") + logs.count("level=INFO"); n != 0 {
				t.Errorf("%d WARN or INFO lines for a refused secret, want none:\n%s", n, logs)
			}
		})
	}
}
