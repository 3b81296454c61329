package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"modelrelay/relay"
	"modelrelay/relay/daemon"
)

// backendCall is what the fake backend saw.
type backendCall struct {
	path   string
	body   string
	header http.Header
}

func recordingBackend(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) (string, chan backendCall) {
	calls := make(chan backendCall, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls <- backendCall{r.URL.Path, string(b), r.Header.Clone()}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, calls
}

func TestE2ENonStreamingChat(t *testing.T) {
	backend, calls := recordingBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Backend", "yes")
		io.WriteString(w, `{"id":"c1","choices":[{"message":{"content":"héllo ☃"}}]}`)
	})
	rs := startRelay(t, relay.Options{}, nil)
	startDaemon(t, rs.url(), backend, nil)
	rs.waitWorkers(t, 1)

	body := `{"model":"m1","messages":[{"role":"user","content":"hi <&> \"there\" ü"}]}`
	resp := post(t, t.Context(), rs.url()+"/v1/chat/completions", body, http.Header{"Authorization": {"Bearer k"}})
	got := readAll(t, resp)
	if resp.StatusCode != 200 || got != `{"id":"c1","choices":[{"message":{"content":"héllo ☃"}}]}` ||
		resp.Header.Get("X-Backend") != "yes" {
		t.Fatalf("client got %d %q %v", resp.StatusCode, got, resp.Header)
	}
	call := <-calls
	if call.path != "/v1/chat/completions" || call.body != body || call.header.Get("Authorization") != "Bearer k" {
		t.Errorf("backend saw %+v", call)
	}
}

func TestE2EStreamingChat(t *testing.T) {
	events := []string{"data: {\"c\":\"h\xc3", "\xa9\"}\n\n", "data: {\"c\":\"\xf0\x9f\x98", "\x80\"}\n\n", "data: [DONE]\n\n"}
	backend, _ := recordingBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			io.WriteString(w, e)
			w.(http.Flusher).Flush()
			time.Sleep(5 * time.Millisecond) // encourage separate reads; correctness does not depend on it
		}
	})
	rs := startRelay(t, relay.Options{}, nil)
	startDaemon(t, rs.url(), backend, nil)
	rs.waitWorkers(t, 1)

	resp := post(t, t.Context(), rs.url()+"/v1/chat/completions", `{"model":"m1","stream":true}`, nil)
	got := readAll(t, resp)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("client got %d %v", resp.StatusCode, resp.Header)
	}
	if want := strings.Join(events, ""); got != want || !utf8.ValidString(got) {
		t.Errorf("stream %q, want %q", got, want)
	}
}

func TestE2EAnthropicHeadersReachBackend(t *testing.T) {
	backend, calls := recordingBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"type":"message"}`)
	})
	rs := startRelay(t, relay.Options{}, nil)
	startDaemon(t, rs.url(), backend, nil)
	rs.waitWorkers(t, 1)
	h := http.Header{"X-Api-Key": {"sk-ant"}, "Anthropic-Version": {"2023-06-01"},
		"Anthropic-Beta": {"tools-2024-04-04"}}
	resp := post(t, t.Context(), rs.url()+"/v1/messages", `{"model":"m1","max_tokens":5}`, h)
	if got := readAll(t, resp); resp.StatusCode != 200 || got != `{"type":"message"}` {
		t.Fatalf("client got %d %q", resp.StatusCode, got)
	}
	call := <-calls
	if call.path != "/v1/messages" {
		t.Errorf("path %q", call.path)
	}
	for k, v := range h {
		if call.header.Get(k) != v[0] {
			t.Errorf("backend %s = %q, want %q", k, call.header.Get(k), v[0])
		}
	}
	if call.header.Get("Accept-Encoding") != "" {
		t.Errorf("backend asked for encoding %q", call.header.Get("Accept-Encoding"))
	}
}

func TestE2EBackendErrorsKeepStatusAndHeaders(t *testing.T) {
	for _, tc := range []struct {
		status    int
		streaming bool
	}{{400, false}, {404, false}, {429, true}, {500, false}, {503, true}} {
		t.Run(fmt.Sprintf("%d-stream-%v", tc.status, tc.streaming), func(t *testing.T) {
			backend, _ := recordingBackend(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-Request-Id", "abc")
				w.Header().Set("Retry-After", "9")
				w.WriteHeader(tc.status)
				fmt.Fprintf(w, `{"error":{"message":"backend says %d"}}`, tc.status)
			})
			rs := startRelay(t, relay.Options{}, nil)
			startDaemon(t, rs.url(), backend, nil)
			rs.waitWorkers(t, 1)
			body := fmt.Sprintf(`{"model":"m1","stream":%v}`, tc.streaming)
			resp := post(t, t.Context(), rs.url()+"/v1/chat/completions", body, nil)
			got := readAll(t, resp)
			if resp.StatusCode != tc.status || got != fmt.Sprintf(`{"error":{"message":"backend says %d"}}`, tc.status) ||
				resp.Header.Get("X-Request-Id") != "abc" || resp.Header.Get("Retry-After") != "9" ||
				resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("client got %d %q %v", resp.StatusCode, got, resp.Header)
			}
		})
	}
}

// blocking is a backend that holds each request until its client goes away.
type blocking struct {
	url     string
	arrived chan string
	gone    chan string
}

func blockingBackend(t *testing.T) *blocking {
	b := &blocking{arrived: make(chan string, 16), gone: make(chan string, 16)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/completions" { // the fast path
			io.WriteString(w, `{"ok":true}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		b.arrived <- string(body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: first\n\n")
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
		b.gone <- string(body)
	}))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

func within(t *testing.T, ch <-chan string, d time.Duration, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s did not happen within %s", what, d)
		return ""
	}
}

func TestE2EClientDisconnectClosesBackendConnection(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream-%v", streaming), func(t *testing.T) {
			b := blockingBackend(t)
			rs := startRelay(t, relay.Options{}, nil)
			startDaemon(t, rs.url(), b.url, nil)
			rs.waitWorkers(t, 1)
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, rs.url()+"/v1/chat/completions",
					strings.NewReader(fmt.Sprintf(`{"model":"m1","stream":%v}`, streaming)))
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				errc <- err
			}()
			within(t, b.arrived, wait, "backend request")
			cancel()
			within(t, b.gone, 5*time.Second, "backend connection close after client disconnect")
			<-errc
		})
	}
}

func TestE2ECancelFreesSlotOfSingleSlotDaemon(t *testing.T) {
	b := blockingBackend(t)
	// The server's own fallback would free the slot after CancelGrace; make that unreachable so
	// only the daemon's 499 can do it.
	rs := startRelay(t, relay.Options{Timings: relay.Timings{CancelGrace: time.Hour}}, nil)
	startDaemon(t, rs.url(), b.url, func(c *daemon.Config) { c.MaxConcurrency = 1 })
	rs.waitWorkers(t, 1)

	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, rs.url()+"/v1/chat/completions",
			strings.NewReader(`{"model":"m1"}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	within(t, b.arrived, wait, "first request at backend")
	cancel()
	within(t, b.gone, wait, "backend abort")
	resp := post(t, t.Context(), rs.url()+"/v1/completions", `{"model":"m1"}`, nil)
	if got := readAll(t, resp); resp.StatusCode != 200 || got != `{"ok":true}` {
		t.Fatalf("second request: %d %q", resp.StatusCode, got)
	}
}

func TestE2EBackendDownIs502AndWorkerStays(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	rs := startRelay(t, relay.Options{}, nil)
	startDaemon(t, rs.url(), dead, nil)
	first := rs.waitWorkers(t, 1)
	for range 2 {
		resp := post(t, t.Context(), rs.url()+"/v1/chat/completions", `{"model":"m1"}`, nil)
		got := readAll(t, resp)
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if resp.StatusCode != 502 || json.Unmarshal([]byte(got), &e) != nil || e.Error.Message == "" {
			t.Fatalf("client got %d %q", resp.StatusCode, got)
		}
	}
	after := rs.waitWorkers(t, 1)
	if after.Workers[0].ID != first.Workers[0].ID {
		t.Errorf("worker re-registered: %s then %s", first.Workers[0].ID, after.Workers[0].ID)
	}
}

func TestE2EWildcardWorkerAdvertisesBackendModels(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, `{"data":[{"id":"llama"},{"id":"qwen"}]}`)
			return
		}
		io.WriteString(w, `{"served":true}`)
	}))
	t.Cleanup(backend.Close)
	rs := startRelay(t, relay.Options{}, nil)
	startDaemon(t, rs.url(), backend.URL, func(c *daemon.Config) { c.Models = []string{"*"} })
	rs.waitFor(t, "discovered models", func(h health) bool { return hasModel(h, "llama") && hasModel(h, "qwen") })
	resp, err := http.Get(rs.url() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); !strings.Contains(got, `"llama"`) || !strings.Contains(got, `"qwen"`) {
		t.Errorf("/v1/models = %s", got)
	}
	r2 := post(t, t.Context(), rs.url()+"/v1/chat/completions", `{"model":"qwen"}`, nil)
	if got := readAll(t, r2); r2.StatusCode != 200 || got != `{"served":true}` {
		t.Errorf("discovered model: %d %q", r2.StatusCode, got)
	}
}

func TestE2EServerRestartReregistersWithin5s(t *testing.T) {
	backend, _ := recordingBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{}`) })
	rs := startRelay(t, relay.Options{}, nil)
	addr := rs.http.Listener.Addr().String()
	startDaemon(t, rs.url(), backend, nil)
	rs.waitWorkers(t, 1)

	rs.shutdown()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("rebind %s: %v", addr, err)
	}
	restarted := time.Now()
	rs2 := startRelay(t, relay.Options{}, l)
	rs2.waitWorkers(t, 1)
	if took := time.Since(restarted); took > 5*time.Second {
		t.Errorf("re-registration took %s", took)
	}
	resp := post(t, t.Context(), rs2.url()+"/v1/chat/completions", `{"model":"m1"}`, nil)
	if got := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("after restart: %d %q", resp.StatusCode, got)
	}
}

// buildWorker compiles the real binary once per test run.
func buildWorker(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "modelrelay-worker")
	cmd := exec.Command("go", "build", "-o", bin, "modelrelay/cmd/modelrelay-worker")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// worker is the real binary running as a child process.
type worker struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed once stderr is drained and Wait returned
	waitErr error         // Wait's result, valid after exited
}

// startBinary runs the worker binary; with E2E_LOG set its log goes to the test log.
func startBinary(t *testing.T, bin string, args ...string) *worker {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "WORKER_SECRET="+secret)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &worker{cmd: cmd, exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if os.Getenv("E2E_LOG") != "" {
				fmt.Fprintln(os.Stderr, "worker:", sc.Text())
			}
		}
		w.waitErr = cmd.Wait() // only after every read from the pipe, as os/exec requires
		close(w.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-w.exited:
		case <-time.After(wait):
			t.Error("worker process did not exit after SIGKILL")
		}
	})
	return w
}

func TestE2ESigkillRequeuesToAnotherDaemon(t *testing.T) {
	bin := buildWorker(t)
	stuck := blockingBackend(t)
	healthy, _ := recordingBackend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"from":"b"}`)
	})
	rs := startRelay(t, relay.Options{}, nil)
	a := startBinary(t, bin, "--proxy-url", rs.url(), "--backend-url", stuck.url, "--models", "m1",
		"--worker-name", "a", "--max-concurrency", "1")
	rs.waitWorkers(t, 1)

	result := make(chan string, 1)
	go func() {
		resp := post(t, context.Background(), rs.url()+"/v1/chat/completions", `{"model":"m1"}`, nil)
		result <- fmt.Sprintf("%d %s", resp.StatusCode, readAll(t, resp))
	}()
	within(t, stuck.arrived, wait, "request at daemon a's backend")
	startDaemon(t, rs.url(), healthy, func(c *daemon.Config) { c.WorkerName = "b" })
	rs.waitWorkers(t, 2)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := within(t, result, wait, "requeued answer"); got != `200 {"from":"b"}` {
		t.Fatalf("client got %s", got)
	}
}

func TestE2ESigtermFinishesInFlightAndExitsZero(t *testing.T) {
	bin := buildWorker(t)
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		io.WriteString(w, `{"done":true}`)
	}))
	t.Cleanup(backend.Close)
	rs := startRelay(t, relay.Options{}, nil)
	w := startBinary(t, bin, "--proxy-url", rs.url(), "--backend-url", backend.URL, "--models", "m1",
		"--drain-timeout", "30")
	rs.waitWorkers(t, 1)

	result := make(chan string, 1)
	go func() {
		resp := post(t, context.Background(), rs.url()+"/v1/chat/completions", `{"model":"m1"}`, nil)
		result <- fmt.Sprintf("%d %s", resp.StatusCode, readAll(t, resp))
	}()
	<-arrived
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The worker tells the server it takes nothing new before the in-flight request ends.
	rs.waitFor(t, "worker advertising no models", func(h health) bool {
		return h.WorkersConnected == 1 && len(h.Workers[0].Models) == 0
	})
	close(release)
	if got := within(t, result, wait, "in-flight answer"); got != `200 {"done":true}` {
		t.Fatalf("client got %s", got)
	}
	select {
	case <-w.exited:
		if w.waitErr != nil {
			t.Fatalf("worker exit: %v", w.waitErr)
		}
	case <-time.After(wait):
		t.Fatal("worker did not exit after draining")
	}
	rs.waitWorkers(t, 0)
}

func TestE2ELargeBodiesTravelIntact(t *testing.T) {
	// Quotes, HTML-special characters, control escapes and multi-byte runes all grow when
	// escaped into a JSON string frame; the bytes must come out as they went in.
	unit := `"q" <a&b> \ é 日本 😀 ` + "\t\n"
	content := strings.Repeat(unit, (3<<20)/len(unit))
	reqBody := `{"model":"m1","messages":[{"role":"user","content":` + mustJSON(t, content) + `}]}`
	respBody := `{"echo":` + mustJSON(t, content) + `}`
	backend, calls := recordingBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, respBody)
	})
	rs := startRelay(t, relay.Options{}, nil)
	startDaemon(t, rs.url(), backend, nil)
	rs.waitWorkers(t, 1)
	resp := post(t, t.Context(), rs.url()+"/v1/chat/completions", reqBody, nil)
	if got := readAll(t, resp); resp.StatusCode != 200 || got != respBody {
		t.Fatalf("client got %d, %d bytes (want %d)", resp.StatusCode, len(got), len(respBody))
	}
	if call := <-calls; call.body != reqBody {
		t.Fatalf("backend got %d bytes, want %d", len(call.body), len(reqBody))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestE2ESingleSlotDaemonServesConcurrentClientsInTurn(t *testing.T) {
	var inFlight, peak atomic.Int32
	backend, _ := recordingBackend(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond) // hold the slot long enough for the others to queue
		io.WriteString(w, `{}`)
	})
	rs := startRelay(t, relay.Options{}, nil)
	startDaemon(t, rs.url(), backend, func(c *daemon.Config) { c.MaxConcurrency = 1 })
	rs.waitWorkers(t, 1)
	results := make(chan int, 5)
	for range cap(results) {
		go func() {
			resp := post(t, context.Background(), rs.url()+"/v1/chat/completions", `{"model":"m1"}`, nil)
			readAll(t, resp)
			results <- resp.StatusCode
		}()
	}
	for range cap(results) {
		if code := <-results; code != 200 {
			t.Errorf("status %d", code)
		}
	}
	if p := peak.Load(); p != 1 {
		t.Errorf("backend saw %d requests at once from a max-concurrency-1 worker", p)
	}
}

func TestE2EHeartbeatKeepsBusyWorkerRegistered(t *testing.T) {
	backend, _ := recordingBackend(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(30 * time.Millisecond) // each request outlasts a heartbeat interval
		io.WriteString(w, `{}`)
	})
	rs := startRelay(t, relay.Options{Timings: relay.Timings{
		HeartbeatInterval: 10 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond}}, nil)
	startDaemon(t, rs.url(), backend, nil)
	first := rs.waitWorkers(t, 1)
	for range 20 { // 600 ms: six heartbeat timeouts' worth
		resp := post(t, t.Context(), rs.url()+"/v1/chat/completions", `{"model":"m1"}`, nil)
		if readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if after := rs.waitWorkers(t, 1); after.Workers[0].ID != first.Workers[0].ID {
		t.Errorf("worker was dropped and re-registered: %s then %s", first.Workers[0].ID, after.Workers[0].ID)
	}
}

func TestE2ERequestTimeoutCancelsBackendCall(t *testing.T) {
	b := blockingBackend(t)
	rs := startRelay(t, relay.Options{RequestTimeout: 300 * time.Millisecond}, nil)
	startDaemon(t, rs.url(), b.url, nil)
	rs.waitWorkers(t, 1)
	resp := post(t, t.Context(), rs.url()+"/v1/chat/completions", `{"model":"m1"}`, nil)
	if got := readAll(t, resp); resp.StatusCode != 504 {
		t.Errorf("client got %d %q", resp.StatusCode, got)
	}
	within(t, b.gone, wait, "backend abort after the request timeout")
}

func TestE2EServerDrainLetsDaemonFinish(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		io.WriteString(w, `{"done":true}`)
	}))
	t.Cleanup(backend.Close)
	rs := startRelay(t, relay.Options{}, nil)
	startDaemon(t, rs.url(), backend.URL, nil)
	rs.waitWorkers(t, 1)
	result := make(chan string, 1)
	go func() {
		resp := post(t, context.Background(), rs.url()+"/v1/chat/completions", `{"model":"m1"}`, nil)
		result <- fmt.Sprintf("%d %s", resp.StatusCode, readAll(t, resp))
	}()
	<-arrived
	drained := make(chan struct{})
	go func() { defer close(drained); rs.srv.Drain(context.Background()) }()
	rs.waitFor(t, "worker draining", func(h health) bool { return h.WorkersConnected == 0 || h.Workers[0].IsDraining })
	close(release)
	if got := within(t, result, wait, "in-flight answer"); got != `200 {"done":true}` {
		t.Fatalf("client got %s", got)
	}
	select {
	case <-drained:
	case <-time.After(wait):
		t.Fatal("server drain did not finish")
	}
}
