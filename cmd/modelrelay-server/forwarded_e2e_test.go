package main

// Headers that name the client, made up by the client, never reach a model server: on every
// path (static backend, relay worker daemon, circuit replica inference and pass-through, the
// aggregation host) they are dropped and X-Forwarded-* are set from the address the relay
// vouches for.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	workerBinOnce sync.Once
	workerBin     string
	workerBinErr  error
)

// workerBinary builds the real modelrelay-worker once per test run.
func workerBinary(t testing.TB) string {
	t.Helper()
	serverBinary(t) // creates binaryDir, removed by TestMain
	workerBinOnce.Do(func() {
		workerBin = filepath.Join(binaryDir, "modelrelay-worker")
		out, err := exec.Command("go", "build", "-o", workerBin, "modelrelay/cmd/modelrelay-worker").CombinedOutput()
		if err != nil {
			workerBinErr = fmt.Errorf("go build worker: %v\n%s", err, out)
		}
	})
	if workerBinErr != nil {
		t.Fatal(workerBinErr)
	}
	return workerBin
}

// startWorkerDaemon runs the real worker daemon against the relay at addr, forwarding to backend.
func startWorkerDaemon(t testing.TB, addr, secret, backend string, models ...string) {
	t.Helper()
	cmd := exec.Command(workerBinary(t), "--proxy-url", "http://"+addr, "--worker-secret", secret,
		"--backend-url", backend, "--models", strings.Join(models, ","))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("worker daemon output:\n%s", out.tail(4000))
		}
	})
}

func writeConfig(t testing.TB, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestE2EClientMadeForwardingHeadersNeverReachTheModelServer(t *testing.T) {
	t.Parallel()
	static := newReplica(t, "static", "static-m")
	behindWorker := newReplica(t, "worker", "worker-m")
	circuitRep := newReplica(t, "circuit", "circuit-m")
	c := newCircuit("fwd", route{port: circuitRep.port()})
	c.public = true
	config := writeConfig(t, fmt.Sprintf("worker_secret: fwd-secret\nbackends:\n  - name: static\n    url: http://%s\n    models: [static-m]\n", static.addr))
	e := startE2E(t, e2eOptions{circuits: jsonList(c.json()), env: map[string]string{"MODELRELAY_CONFIG": config}})
	startWorkerDaemon(t, e.addr, "fwd-secret", "http://"+behindWorker.addr, "worker-m")
	eventually(t, 15*time.Second, "worker model served", func() (bool, string) {
		st, _, body := e.chat("", "worker-m", nil)
		return st == 200, fmt.Sprintf("%d %s", st, body)
	})

	forged := http.Header{
		"Forwarded":         {"for=6.6.6.6;proto=https;host=evil.example"},
		"X-Forwarded-For":   {"6.6.6.6"},
		"X-Forwarded-Host":  {"evil.example"},
		"X-Forwarded-Proto": {"https"},
		"X-Forwarded-Port":  {"6666"},
		"X-Real-Ip":         {"6.6.6.6"},
		"True-Client-Ip":    {"6.6.6.6"},
		"X-Client-Ip":       {"6.6.6.6"},
	}
	cases := []struct {
		name       string
		rep        *replica
		method     string
		host, path string
		model      string
		wantHost   string
	}{
		{"static backend", static, "POST", "", "/v1/chat/completions", "static-m", e.addr},
		{"relay worker", behindWorker, "POST", "", "/v1/chat/completions", "worker-m", e.addr},
		{"circuit inference", circuitRep, "POST", circuitHost("fwd"), "/v1/chat/completions", "any", circuitHost("fwd")},
		{"circuit pass-through", circuitRep, "POST", circuitHost("fwd"), "/tokenize", "", circuitHost("fwd")},
		{"aggregation host", circuitRep, "POST", e2eAggHost, "/v1/chat/completions", "circuit-m", e2eAggHost},
	}
	for _, tc := range cases {
		before := len(tc.rep.requests())
		st, _, body := e.do(tc.method, tc.host, tc.path, withJSON(forged), chatBody(tc.model, false))
		if st/100 != 2 {
			t.Errorf("%s: %d %s", tc.name, st, body)
			continue
		}
		seen := tc.rep.requests()[before:]
		if len(seen) != 1 {
			t.Errorf("%s: the replica saw %d requests", tc.name, len(seen))
			continue
		}
		h := seen[0].Header
		for name, values := range h {
			for _, v := range values {
				if strings.Contains(v, "6.6.6.6") || strings.Contains(v, "evil.example") || strings.Contains(v, "6666") {
					t.Errorf("%s: the model server got %s: %s", tc.name, name, v)
				}
			}
		}
		for _, name := range []string{"Forwarded", "X-Real-Ip", "True-Client-Ip", "X-Client-Ip", "X-Forwarded-Port"} {
			if _, ok := h[name]; ok {
				t.Errorf("%s: %s reached the model server", tc.name, name)
			}
		}
		if got := h.Get("X-Forwarded-For"); got != "127.0.0.1" {
			t.Errorf("%s: X-Forwarded-For %q, want the vouched peer 127.0.0.1", tc.name, got)
		}
		if got := h.Get("X-Forwarded-Proto"); got != "http" {
			t.Errorf("%s: X-Forwarded-Proto %q", tc.name, got)
		}
		if got := h.Get("X-Forwarded-Host"); got != tc.wantHost {
			t.Errorf("%s: X-Forwarded-Host %q, want %q", tc.name, got, tc.wantHost)
		}
	}
}

// A 40 MiB non-streamed answer crosses the worker daemon in one frame: the daemon's limit and
// the server's agree (64 MiB by default on both sides).
func TestE2EFortyMiBAnswerThroughTheWorkerDaemon(t *testing.T) {
	answer := `{"id":"big","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("x", 40<<20) + `"},"finish_reason":"stop"}]}`
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, `{"object":"list","data":[{"id":"big-m","object":"model"}]}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	defer backend.Close()
	config := writeConfig(t, "worker_secret: big-secret\n")
	e, _ := startBinaryEnv(t, map[string]string{"MODELRELAY_CONFIG": config})
	startWorkerDaemon(t, e.addr, "big-secret", backend.URL, "big-m")
	eventually(t, 15*time.Second, "worker registered", func() (bool, string) {
		st, _, body := e.do("GET", "", "/v1/models", nil, nil)
		return st == 200 && strings.Contains(string(body), "big-m"), string(body)
	})
	st, _, body := e.chat("", "big-m", nil)
	if st != http.StatusOK || string(body) != answer {
		t.Fatalf("40 MiB answer: status %d, %d bytes (want %d)", st, len(body), len(answer))
	}
}
