package main

// Fallback and back-pressure from outside: fallback chains, per-target breakers, Retry-After
// from the estimated wait, max_latency_ms admission and failing fast — through the real server
// binary (and, for circuits, the real server in AppProxy mode) on short configured times, with
// fake model servers that record what reached them and when.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// relayProc is the real binary on a YAML config, and everything it logged.
type relayProc struct {
	addr string
	logs *lockedBuffer
	pid  int
}

// startRelay runs the binary on config (extra environment in env) at debug log level.
func startRelay(t testing.TB, config string, env map[string]string) *relayProc {
	t.Helper()
	extra := map[string]string{"MODELRELAY_CONFIG": writeConfig(t, config)}
	maps.Copy(extra, env)
	e := &e2eEnv{t: t}
	cmd, logs, _ := startBinary(t, e, extra)
	return &relayProc{addr: e.addr, logs: logs, pid: cmd.Process.Pid}
}

// fbClient is shared by every request of these tests; it must carry 50 at once.
var fbClient = &http.Client{Timeout: 60 * time.Second,
	Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}}

// relayAnswer is one answer of the relay, as a client saw it.
type relayAnswer struct {
	status  int
	header  http.Header
	body    []byte
	elapsed time.Duration
	err     error
}

func (a relayAnswer) String() string {
	if a.err != nil {
		return fmt.Sprintf("error %v after %s", a.err, a.elapsed.Round(time.Millisecond))
	}
	return fmt.Sprintf("%d after %s, model=%q from=%q retry-after=%q: %.400s", a.status, a.elapsed.Round(time.Millisecond),
		a.header.Get("X-Modelrelay-Model"), a.header.Get("X-Modelrelay-Fallback-From"), a.header.Get("Retry-After"), a.body)
}

// retryAfter is the answer's Retry-After in seconds (-1 when absent or not a whole number).
func (a relayAnswer) retryAfter() int {
	n, err := strconv.Atoi(a.header.Get("Retry-After"))
	if err != nil {
		return -1
	}
	return n
}

// sendTo posts body to path (Host host, "" = the relay's own address). It never fails the
// test: it runs on any goroutine.
func sendTo(addr, host, path string, header http.Header, body string) relayAnswer {
	return sendWithin(time.Minute, addr, host, path, header, body)
}

// sendWithin is sendTo giving up after limit: for requests that must be answered at once, so
// that one wrongly queued ends as a failure instead of blocking the test.
func sendWithin(limit time.Duration, addr, host, path string, header http.Header, body string) relayAnswer {
	return sendReader(limit, addr, host, path, header, strings.NewReader(body))
}

// sendReader is sendWithin with the body read from body as the request goes.
func sendReader(limit time.Duration, addr, host, path string, header http.Header, body io.Reader) relayAnswer {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, body)
	if err != nil {
		return relayAnswer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	if host != "" {
		req.Host = host
	}
	resp, err := fbClient.Do(req)
	if err != nil {
		return relayAnswer{err: err, elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return relayAnswer{status: resp.StatusCode, header: resp.Header, body: b, elapsed: time.Since(start), err: err}
}

func (r *relayProc) send(path string, header http.Header, body string) relayAnswer {
	return sendTo(r.addr, "", path, header, body)
}

// quick is chat for a request that must be answered at once (the relay must not queue it).
func (r *relayProc) quick(model string, extra ...string) relayAnswer {
	return sendWithin(8*time.Second, r.addr, "", "/v1/chat/completions", nil, chatJSON(model, extra...))
}

// chat sends an OpenAI chat completion for model; extra are more top-level members
// (`"stream":true`, `"x_pool_options":{…}`).
func (r *relayProc) chat(model string, extra ...string) relayAnswer {
	return r.send("/v1/chat/completions", nil, chatJSON(model, extra...))
}

// chatJSON is a chat body with a few members besides the model, so a test can see that a
// rewritten body kept them.
func chatJSON(model string, extra ...string) string {
	members := append([]string{fmt.Sprintf(`"model":%q`, model), `"temperature":0.25`,
		`"messages":[{"role":"user","content":"hi there"}]`}, extra...)
	return "{" + strings.Join(members, ",") + "}"
}

// getFrom fetches path (with the admin token) and returns status and body.
func getFrom(t testing.TB, addr, path string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+e2eAdmin)
	resp, err := fbClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// queued is the total queue depth /admin/stats reports.
func queued(t testing.TB, addr string) int {
	t.Helper()
	_, b := getFrom(t, addr, "/admin/stats")
	var s struct {
		QueueDepth map[string]int `json:"queue_depth"`
	}
	json.Unmarshal(b, &s)
	n := 0
	for _, d := range s.QueueDepth {
		n += d
	}
	return n
}

// waitQueued waits until n requests wait in the relay's queues.
func waitQueued(t testing.TB, addr string, n int) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%d queued", n), func() (bool, string) {
		got := queued(t, addr)
		return got == n, fmt.Sprintf("%d queued", got)
	})
}

// breakerMetric reads modelrelay_target_breaker_state for target from /metrics (-1 = absent).
func breakerMetric(t testing.TB, addr, target string) float64 {
	t.Helper()
	_, b := getFrom(t, addr, "/metrics")
	return breakerValue(b, target)
}

// breakerState is breakerMetric for any goroutine (-1 also when /metrics does not answer).
func breakerState(addr, target string) float64 {
	resp, err := fbClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return breakerValue(b, target)
}

func breakerValue(b []byte, target string) float64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "modelrelay_target_breaker_state{") || !strings.Contains(line, `target="`+target+`"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err == nil {
			return v
		}
	}
	return -1
}

// poolState is what /admin/stats or /health says of a pool: its estimated wait and its
// targets' breakers.
type poolState struct {
	EstimatedWaitMS *float64 `json:"estimated_wait_ms"`
	Targets         []struct {
		ID      string `json:"id"`
		Breaker string `json:"breaker"`
	} `json:"targets"`
}

// breakerIn returns the breaker state path reports for target id, and whether every pool
// listed carries an estimated wait ("" when the target is not listed).
func breakerIn(t testing.TB, addr, path, id string) (state string, withWait bool, raw string) {
	t.Helper()
	_, b := getFrom(t, addr, path)
	var doc struct {
		Pools map[string]poolState `json:"pools"`
	}
	json.Unmarshal(b, &doc)
	withWait = len(doc.Pools) > 0
	for _, p := range doc.Pools {
		if p.EstimatedWaitMS == nil || *p.EstimatedWaitMS < 0 {
			withWait = false
		}
		for _, tg := range p.Targets {
			if tg.ID == id {
				state = tg.Breaker
			}
		}
	}
	return state, withWait, string(b)
}

// checkServed asserts a 200 served by fake as model served, moved from `from` ("" = not moved).
func checkServed(t testing.TB, label string, a relayAnswer, fake *flaky, served, from string) {
	t.Helper()
	if a.err != nil || a.status != 200 {
		t.Errorf("%s: %s", label, a)
		return
	}
	if got := a.header.Get("X-Modelrelay-Model"); got != served {
		t.Errorf("%s: x-modelrelay-model %q, want %q", label, got, served)
	}
	if got, ok := a.header["X-Modelrelay-Fallback-From"]; from == "" && ok {
		t.Errorf("%s: x-modelrelay-fallback-from %q on an answer that did not move", label, got)
	} else if from != "" && a.header.Get("X-Modelrelay-Fallback-From") != from {
		t.Errorf("%s: x-modelrelay-fallback-from %q, want %q", label, a.header.Get("X-Modelrelay-Fallback-From"), from)
	}
	if fake != nil && a.header.Get("X-Fake") != fake.name {
		t.Errorf("%s: answered by %q, want %s", label, a.header.Get("X-Fake"), fake.name)
	}
}

// checkBodyAt asserts what a target received: the model it serves, no x_pool_options, and the
// client's other members unchanged.
func checkBodyAt(t testing.TB, label string, c flakyCall, model string) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal(c.Raw, &got); err != nil {
		t.Errorf("%s: the target got a body that is not JSON: %s", label, c.Raw)
		return
	}
	if got["model"] != model {
		t.Errorf("%s: the target got model %v, want %q", label, got["model"], model)
	}
	if bytes.Contains(c.Raw, []byte("x_pool_options")) {
		t.Errorf("%s: x_pool_options reached the target: %s", label, c.Raw)
	}
	if got["temperature"] != 0.25 || fmt.Sprint(got["messages"]) != "[map[content:hi there role:user]]" {
		t.Errorf("%s: the client's other members changed on the way: %s", label, c.Raw)
	}
}

// backendYAML is one entry of backends:.
func backendYAML(name, url string, models ...string) string {
	return fmt.Sprintf("  - name: %s\n    url: %s\n    models: [%s]\n", name, url, strings.Join(models, ", "))
}

func TestE2EFallbackWhenNoPoolServesTheModel(t *testing.T) {
	t.Parallel()
	alt := newFlaky(t, "alt")
	r := startRelay(t, "fallbacks:\n  ghost-m: [alt-m]\nbackends:\n"+backendYAML("alt", alt.url, "alt-m"), nil)

	a := r.chat("ghost-m", `"x_pool_options":{"priority":"high"}`)
	checkServed(t, "unknown model with a chain", a, alt, "alt-m", "ghost-m")
	if c, ok := alt.lastCall(); ok {
		checkBodyAt(t, "unknown model with a chain", c, "alt-m")
	}
	// The alternate asked for itself does not move.
	checkServed(t, "the alternate itself", r.chat("alt-m"), alt, "alt-m", "")
	if a := r.chat("ghost-without-chain"); a.status != 404 {
		t.Errorf("an unknown model without a chain: %s, want 404", a)
	}
}

func TestE2EFallbackWhenEveryTargetIsDown(t *testing.T) {
	t.Parallel()
	alt := newFlaky(t, "alt")
	r := startRelay(t, "queue_timeout: 20s\nappproxy:\n  health_check_interval: 100ms\nfallbacks:\n  down-m: [alt-m]\nbackends:\n"+
		backendYAML("dead1", closedURL(t), "down-m")+backendYAML("dead2", closedURL(t), "down-m")+backendYAML("alt", alt.url, "alt-m"), nil)

	// The first requests may find the dead backends before any probe has; later ones find them
	// known down. Each is the alternate's at once, never a wait for the queue timeout.
	for i := range 6 {
		a := r.quick("down-m")
		checkServed(t, fmt.Sprintf("request %d", i), a, alt, "alt-m", "down-m")
		if a.elapsed > 3*time.Second {
			t.Errorf("request %d took %s: it waited instead of moving on", i, a.elapsed)
		}
		time.Sleep(60 * time.Millisecond) // spread over the probe period, not a synchronization
	}
	a := r.chat("down-m", `"stream":true`)
	checkServed(t, "stream", a, alt, "alt-m", "down-m")
	if !bytes.Contains(a.body, []byte("served by alt")) || !bytes.Contains(a.body, []byte("[DONE]")) {
		t.Errorf("stream from the alternate: %s", a.body)
	}
}

func TestE2EFallbackWhenTheQueueIsFull(t *testing.T) {
	t.Parallel()
	busy, alt := newFlaky(t, "busy"), newFlaky(t, "alt")
	r := startRelay(t, "max_queue_len: 1\nqueue_timeout: 20s\nfallbacks:\n  busy-m: [alt-m]\nbackends:\n"+
		backendYAML("busy", busy.url, "busy-m")+"    max_concurrent: 1\n"+backendYAML("alt", alt.url, "alt-m"), nil)

	entered, release := busy.holdCalls()
	defer release()
	results := make(chan relayAnswer, 2)
	go func() { results <- r.chat("busy-m") }()
	<-entered
	go func() { results <- r.chat("busy-m") }()
	waitQueued(t, r.addr, 1)

	a := r.quick("busy-m")
	checkServed(t, "queue full", a, alt, "alt-m", "busy-m")
	if a.elapsed > 3*time.Second {
		t.Errorf("queue full: answered after %s", a.elapsed)
	}
	if n := busy.count(); n != 1 {
		t.Errorf("the busy target saw %d requests, want only the one it holds", n)
	}
	release()
	for i := range 2 {
		checkServed(t, fmt.Sprintf("queued request %d", i), <-results, busy, "busy-m", "")
	}
}

func TestE2EFallbackWhenTheWaitExceedsMaxLatency(t *testing.T) {
	t.Parallel()
	busy, alt := newFlaky(t, "busy"), newFlaky(t, "alt")
	r := startRelay(t, "queue_timeout: 20s\nfallbacks:\n  busy-m: [alt-m]\nbackends:\n"+
		backendYAML("busy", busy.url, "busy-m")+"    max_concurrent: 1\n"+backendYAML("alt", alt.url, "alt-m"), nil)

	entered, release := busy.holdCalls()
	defer release()
	first := make(chan relayAnswer, 1)
	go func() { first <- r.chat("busy-m") }()
	<-entered

	a := r.quick("busy-m", `"x_pool_options":{"max_latency_ms":1}`)
	checkServed(t, "max_latency_ms", a, alt, "alt-m", "busy-m")
	if a.elapsed > 3*time.Second {
		t.Errorf("max_latency_ms: answered after %s", a.elapsed)
	}
	if c, ok := alt.lastCall(); ok {
		checkBodyAt(t, "max_latency_ms", c, "alt-m")
	}
	if n := busy.count(); n != 1 {
		t.Errorf("the busy target saw %d requests, want only the one it holds", n)
	}
	release()
	checkServed(t, "the held request", <-first, busy, "busy-m", "")
}

func TestE2EFallbackAfterErrorAnswers(t *testing.T) {
	t.Parallel()
	e1, e2, busy, alt := newFlaky(t, "e1"), newFlaky(t, "e2"), newFlaky(t, "busy429"), newFlaky(t, "alt")
	picky := newFlaky(t, "picky")
	e1.setStatus(500)
	e2.setStatus(503)
	busy.setStatus(429)
	picky.setStatus(400)
	r := startRelay(t, "breaker_failures: 2\nbreaker_cooldown: 30s\nbreaker_max_cooldown: 60s\n"+
		"fallbacks:\n  err-m: [alt-m]\n  busy-m: [alt-m]\n  picky-m: [alt-m]\nbackends:\n"+
		backendYAML("e1", e1.url, "err-m")+backendYAML("e2", e2.url, "err-m")+
		backendYAML("busy429", busy.url, "busy-m")+backendYAML("picky", picky.url, "picky-m")+
		backendYAML("alt", alt.url, "alt-m"), nil)

	// 5xx: one retry on the pool's other target, then the alternate.
	checkServed(t, "5xx", r.chat("err-m"), alt, "alt-m", "err-m")
	if n1, n2 := e1.count(), e2.count(); n1 != 1 || n2 != 1 {
		t.Errorf("after one request e1 saw %d and e2 %d, want one try each", n1, n2)
	}
	if c, ok := alt.lastCall(); ok {
		checkBodyAt(t, "5xx", c, "alt-m")
	}
	// Their second failures open both breakers (breaker_failures 2): from then on the pool has
	// no target to try and the request goes to the alternate without touching them.
	checkServed(t, "5xx again", r.chat("err-m"), alt, "alt-m", "err-m")
	for i := range 3 {
		a := r.chat("err-m")
		checkServed(t, fmt.Sprintf("breakers open, request %d", i), a, alt, "alt-m", "err-m")
		if a.elapsed > 3*time.Second {
			t.Errorf("breakers open, request %d: %s", i, a)
		}
	}
	if n1, n2 := e1.count(), e2.count(); n1 != 2 || n2 != 2 {
		t.Errorf("after five requests e1 saw %d and e2 %d, want 2 each (then open)", n1, n2)
	}

	// 429: a busy target moves the request on but is no failure: its breaker stays closed
	// and it keeps getting traffic.
	for i := range 4 {
		checkServed(t, fmt.Sprintf("429, request %d", i), r.chat("busy-m"), alt, "alt-m", "busy-m")
	}
	if n := busy.count(); n != 4 {
		t.Errorf("the 429 target saw %d of 4 requests (a 429 must not open its breaker)", n)
	}
	if v := breakerMetric(t, r.addr, "busy429"); v != 0 {
		t.Errorf("breaker of the 429 target: metric %v, want 0 (closed)", v)
	}
	if v := breakerMetric(t, r.addr, "e1"); v != 1 {
		t.Errorf("breaker of e1: metric %v, want 1 (open)", v)
	}

	// Any other 4xx is the answer: relayed as it is, never moved, never a failure.
	altBefore := alt.count()
	for i := range 3 {
		a := r.chat("picky-m")
		if a.status != 400 || a.header.Get("X-Modelrelay-Model") != "picky-m" || a.header.Get("X-Modelrelay-Fallback-From") != "" ||
			!bytes.Contains(a.body, []byte("fake picky answers 400")) {
			t.Errorf("400 from the target, request %d: %s", i, a)
		}
	}
	if n := alt.count() - altBefore; n != 0 {
		t.Errorf("a 400 moved %d requests to the alternate", n)
	}
	if n := picky.count(); n != 3 {
		t.Errorf("the target answering 400 saw %d of 3 requests", n)
	}
}

// A stream that broke after its first byte ends with an error event; it never moves.
func TestE2ENoFallbackAfterTheFirstByte(t *testing.T) {
	t.Parallel()
	cut, alt := newFlaky(t, "cut"), newFlaky(t, "alt")
	cut.cutStream.Store(true)
	r := startRelay(t, "fallbacks:\n  cut-m: [alt-m]\nbackends:\n"+backendYAML("cut", cut.url, "cut-m")+"    dialects: [openai]\n"+
		backendYAML("alt", alt.url, "alt-m"), nil)

	a := r.chat("cut-m", `"stream":true`)
	checkServed(t, "cut stream", a, cut, "cut-m", "")
	events := strings.Split(strings.TrimSpace(string(a.body)), "\n\n")
	if !strings.Contains(events[0], "served by cut") {
		t.Errorf("the first event did not reach the client: %s", a.body)
	}
	if last := events[len(events)-1]; len(events) < 2 || !strings.HasPrefix(last, "data: ") || !strings.Contains(last, `"error"`) {
		t.Errorf("the broken stream does not end with an error event: %q", a.body)
	}
	if bytes.Contains(a.body, []byte("served by alt")) {
		t.Errorf("the alternate's answer was spliced into a started stream: %s", a.body)
	}

	// The same for an Anthropic client (translated stream): an error event, not a silent cut.
	a = r.send("/v1/messages", nil, `{"model":"cut-m","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	checkServed(t, "cut stream, anthropic client", a, cut, "cut-m", "")
	events = strings.Split(strings.TrimSpace(string(a.body)), "\n\n")
	if !strings.HasPrefix(events[0], "event: message_start") || !bytes.Contains(a.body, []byte("served by cut")) {
		t.Errorf("anthropic client: the stream did not start: %s", a.body)
	}
	if last := events[len(events)-1]; !strings.HasPrefix(last, "event: error") || bytes.Contains(a.body, []byte("message_stop")) {
		t.Errorf("anthropic client: the broken stream does not end with an error event: %q", a.body)
	}
	if n := alt.count(); n != 0 {
		t.Errorf("the alternate saw %d requests after the first byte", n)
	}
}

func TestE2EFallbackChainIsWalkedOnce(t *testing.T) {
	t.Parallel()
	fakes := map[string]*flaky{}
	var backends strings.Builder
	for _, name := range []string{"a", "b", "x", "y", "z"} {
		f := newFlaky(t, name)
		if name != "z" {
			f.setStatus(500)
		}
		fakes[name] = f
		backends.WriteString(backendYAML(name, f.url, name+"-m"))
	}
	r := startRelay(t, "queue_timeout: 20s\nbreaker_failures: 100\n"+
		"fallbacks:\n  a-m: [b-m]\n  b-m: [a-m]\n  x-m: [y-m]\n  y-m: [z-m]\n  c-m: [d-m]\n  d-m: [c-m]\nbackends:\n"+
		backends.String()+backendYAML("c", closedURL(t), "c-m")+backendYAML("d", closedURL(t), "d-m"), nil)

	// A -> [B], B -> [A], both failing: an error, each target tried a bounded number of times.
	for _, model := range []string{"a-m", "b-m"} {
		before := fakes["a"].count() + fakes["b"].count()
		a := r.chat(model)
		if a.err != nil || a.status < 400 || a.elapsed > 10*time.Second {
			t.Errorf("%s with its chain looping back: %s, want an error", model, a)
		}
		if n := fakes["a"].count() + fakes["b"].count() - before; n < 2 || n > 4 {
			t.Errorf("%s: the two targets saw %d calls, want each tried once (at most twice)", model, n)
		}
		t.Logf("%s, chain looping back: %s", model, a)
	}
	// A -> [B], B -> [C]: asking A with A and B failing is not served by C.
	a := r.chat("x-m")
	if a.status == 200 || fakes["z"].count() != 0 {
		t.Errorf("x-m was served through y-m's own chain: %s (z saw %d)", a, fakes["z"].count())
	}
	if fakes["x"].count() == 0 || fakes["y"].count() == 0 {
		t.Errorf("x-m did not try its chain: x saw %d, y %d", fakes["x"].count(), fakes["y"].count())
	}
	// Asked directly, y-m does follow its chain.
	checkServed(t, "y-m", r.chat("y-m"), fakes["z"], "z-m", "y-m")
	// Both down (nothing listens): 503 with Retry-After at once.
	a = r.quick("c-m")
	if a.status != 503 || a.retryAfter() < 1 || a.elapsed > 3*time.Second {
		t.Errorf("c-m and d-m both down: %s, want 503 with Retry-After at once", a)
	}
}

func TestE2EFallbackHeadersAndRewrittenBody(t *testing.T) {
	t.Parallel()
	primary, alt, other, dotted := newFlaky(t, "main"), newFlaky(t, "alt"), newFlaky(t, "other"), newFlaky(t, "dotted")
	r := startRelay(t, "breaker_failures: 100\nfallbacks:\n  main-m: [alt-m]\n  qwen2.5-7b: [gpt-4.1-mini]\nbackends:\n"+
		backendYAML("main", primary.url, "main-m")+backendYAML("alt", alt.url, "alt-m")+
		backendYAML("other", other.url, "other-m")+backendYAML("dotted", dotted.url, "gpt-4.1-mini"), nil)

	// Served where asked: the model header, no fallback header, the relay's options gone.
	a := r.chat("main-m", `"x_pool_options":{"priority":"high","fallback_models":["other-m"],"unknown_key":1}`)
	checkServed(t, "served where asked", a, primary, "main-m", "")
	if c, ok := primary.lastCall(); ok {
		checkBodyAt(t, "served where asked", c, "main-m")
	}

	primary.setStatus(500)
	a = r.chat("main-m")
	checkServed(t, "configured chain", a, alt, "alt-m", "main-m")
	if c, ok := alt.lastCall(); ok {
		checkBodyAt(t, "configured chain", c, "alt-m")
	}
	var answer struct{ Model string }
	if json.Unmarshal(a.body, &answer); answer.Model != "alt-m" {
		t.Logf("note: the answer's model is %q", answer.Model)
	}

	// A per-request chain replaces the configured one.
	altBefore := alt.count()
	a = r.chat("main-m", `"x_pool_options":{"fallback_models":["other-m"]}`)
	checkServed(t, "per-request chain", a, other, "other-m", "main-m")
	if c, ok := other.lastCall(); ok {
		checkBodyAt(t, "per-request chain", c, "other-m")
	}
	if alt.count() != altBefore {
		t.Errorf("the configured alternate was tried although the request brought its own chain")
	}
	// An empty one means no fallback for this request.
	altBefore = alt.count()
	a = r.chat("main-m", `"x_pool_options":{"fallback_models":[]}`)
	if a.status == 200 || alt.count() != altBefore || a.header.Get("X-Modelrelay-Fallback-From") != "" {
		t.Errorf("fallback_models [] still moved the request: %s", a)
	}
	// ... also for a model that has none configured.
	a = r.chat("nowhere-m", `"x_pool_options":{"fallback_models":["other-m"]}`)
	checkServed(t, "per-request chain, model unknown", a, other, "other-m", "nowhere-m")

	// Model names with dots are chain keys like any other.
	a = r.chat("qwen2.5-7b")
	checkServed(t, "dotted names", a, dotted, "gpt-4.1-mini", "qwen2.5-7b")
	if c, ok := dotted.lastCall(); ok {
		checkBodyAt(t, "dotted names", c, "gpt-4.1-mini")
	}

	// A stream moves the same way before its first byte.
	a = r.chat("main-m", `"stream":true`, `"x_pool_options":{"priority":"low"}`)
	checkServed(t, "stream", a, alt, "alt-m", "main-m")
	if !bytes.Contains(a.body, []byte("[DONE]")) {
		t.Errorf("stream: %s", a.body)
	}
	if c, ok := alt.lastCall(); ok {
		checkBodyAt(t, "stream", c, "alt-m")
	}
}

// An Anthropic client whose model is down is answered in Anthropic by an OpenAI-only backend.
func TestE2EFallbackAcrossDialects(t *testing.T) {
	t.Parallel()
	cloud := newFakeModel(t, "openai")
	r := startRelay(t, "queue_timeout: 20s\nfallbacks:\n  claude-local: [gpt-cloud]\nbackends:\n"+
		backendYAML("local", closedURL(t), "claude-local")+"    dialects: [anthropic]\n"+
		backendYAML("cloud", cloud.url, "gpt-cloud")+"    dialects: [openai]\n", nil)
	h := http.Header{"X-Api-Key": {"sk-ant-client"}, "Anthropic-Version": {"2023-06-01"}}
	body := `{"model":"claude-local","max_tokens":32,"system":"Be brief.","messages":[{"role":"user","content":"Say hello."}]%s}`

	a := r.send("/v1/messages?beta=true", h, fmt.Sprintf(body, ""))
	if a.status != 200 || a.header.Get("X-Modelrelay-Model") != "gpt-cloud" || a.header.Get("X-Modelrelay-Fallback-From") != "claude-local" ||
		a.header.Get("X-Modelrelay-Translated") != "anthropic->openai" {
		t.Fatalf("anthropic client, model down: %s %v", a, a.header)
	}
	var msg struct {
		Type    string
		Role    string
		Content []struct{ Type, Text string }
	}
	if err := json.Unmarshal(a.body, &msg); err != nil || msg.Type != "message" || msg.Role != "assistant" ||
		len(msg.Content) != 1 || msg.Content[0].Text != "Hello from the openai-only fake." {
		t.Errorf("not an Anthropic message: %s", a.body)
	}
	calls := cloud.callsTo("/v1/chat/completions")
	if len(calls) != 1 || calls[0].Body["model"] != "gpt-cloud" {
		t.Fatalf("the OpenAI backend got %d chat calls: %v", len(calls), calls)
	}
	if first := calls[0].Body["messages"].([]any)[0].(map[string]any); first["role"] != "system" {
		t.Errorf("the fallback request was not translated: %v", calls[0].Body)
	}
	if n := len(cloud.callsTo("/v1/messages")); n != 0 {
		t.Errorf("an OpenAI-only backend got %d /v1/messages calls", n)
	}

	a = r.send("/v1/messages", h, fmt.Sprintf(body, `,"stream":true`))
	var types []string
	var text strings.Builder
	for _, line := range strings.Split(string(a.body), "\n") {
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			types = append(types, ev)
		}
		var ev struct{ Delta struct{ Text string } }
		if data, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(data), &ev) == nil {
			text.WriteString(ev.Delta.Text)
		}
	}
	want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if a.status != 200 || a.header.Get("X-Modelrelay-Fallback-From") != "claude-local" || len(types) < len(want) ||
		types[0] != want[0] || types[len(types)-1] != "message_stop" || text.String() != "Hello from the openai-only fake." {
		t.Errorf("anthropic stream, model down: %s events %v, text %q", a, types, text.String())
	}
}

// Cloud backends get their own key in their family's header; the client's never reach them;
// the key is never logged.
func TestE2ECloudKeys(t *testing.T) {
	t.Parallel()
	const openaiKey, anthropicKey = "sk-cloud-openai-5f0e1d2c3b4a", "sk-ant-cloud-9a8b7c6d5e4f"
	const clientBearer, clientXKey = "client-secret-bearer-777", "client-secret-xkey-888"
	oa, an, plain := newFakeModel(t, "openai"), newFakeModel(t, "anthropic"), newFakeModel(t, "openai")
	r := startRelay(t, "fallbacks:\n  gone-m: [claude-cloud]\nbackends:\n"+
		backendYAML("cloud-openai", oa.url, "gpt-cloud")+"    dialects: [openai]\n    api_key: ${FB_OPENAI_KEY}\n"+
		backendYAML("cloud-anthropic", an.url, "claude-cloud")+"    dialects: [anthropic]\n    api_key: ${FB_ANTHROPIC_KEY}\n"+
		backendYAML("plain", plain.url, "plain-m")+"    dialects: [openai]\n",
		map[string]string{"FB_OPENAI_KEY": openaiKey, "FB_ANTHROPIC_KEY": anthropicKey, "LOG_LEVEL": "debug"})

	creds := http.Header{"Authorization": {"Bearer " + clientBearer}, "X-Api-Key": {clientXKey}, "Anthropic-Version": {"2023-06-01"}}
	openaiBody := `{"model":"%s","messages":[{"role":"user","content":"Say hello."}]%s}`
	anthropicBody := `{"model":"%s","max_tokens":16,"messages":[{"role":"user","content":"Say hello."}]%s}`
	cases := []struct {
		label, path, body string
		fake              *fakeModel
		fakePath          string
		anthropic         bool // the backend speaks Anthropic
	}{
		{"openai client, openai cloud", "/v1/chat/completions", fmt.Sprintf(openaiBody, "gpt-cloud", ""), oa, "/v1/chat/completions", false},
		{"openai client, openai cloud, stream", "/v1/chat/completions", fmt.Sprintf(openaiBody, "gpt-cloud", `,"stream":true`), oa, "/v1/chat/completions", false},
		{"anthropic client, openai cloud", "/v1/messages", fmt.Sprintf(anthropicBody, "gpt-cloud", ""), oa, "/v1/chat/completions", false},
		{"anthropic client, anthropic cloud", "/v1/messages", fmt.Sprintf(anthropicBody, "claude-cloud", ""), an, "/v1/messages", true},
		{"openai client, anthropic cloud", "/v1/chat/completions", fmt.Sprintf(openaiBody, "claude-cloud", ""), an, "/v1/messages", true},
		{"openai client, anthropic cloud by fallback", "/v1/chat/completions", fmt.Sprintf(openaiBody, "gone-m", ""), an, "/v1/messages", true},
	}
	for _, tc := range cases {
		header := creds.Clone()
		if !strings.HasPrefix(tc.path, "/v1/messages") {
			header.Del("Anthropic-Version") // an OpenAI client does not send it
		}
		before := len(tc.fake.callsTo(tc.fakePath))
		a := r.send(tc.path, header, tc.body)
		if a.status != 200 {
			t.Errorf("%s: %s", tc.label, a)
			continue
		}
		calls := tc.fake.callsTo(tc.fakePath)
		if len(calls) != before+1 {
			t.Errorf("%s: the backend got %d calls on %s", tc.label, len(calls)-before, tc.fakePath)
			continue
		}
		got := calls[len(calls)-1].Header
		if tc.anthropic {
			if got.Get("X-Api-Key") != anthropicKey || got.Get("Anthropic-Version") == "" || got.Get("Authorization") != "" {
				t.Errorf("%s: x-api-key %q, anthropic-version %q, authorization %q", tc.label,
					got.Get("X-Api-Key"), got.Get("Anthropic-Version"), got.Get("Authorization"))
			}
		} else if got.Get("Authorization") != "Bearer "+openaiKey || got.Get("X-Api-Key") != "" {
			t.Errorf("%s: authorization %q, x-api-key %q", tc.label, got.Get("Authorization"), got.Get("X-Api-Key"))
		}
		for name, values := range got {
			for _, v := range values {
				if strings.Contains(v, clientBearer) || strings.Contains(v, clientXKey) {
					t.Errorf("%s: the client's credential reached the cloud backend as %s", tc.label, name)
				}
			}
		}
	}
	// A backend without a key of its own still gets the client's (no change for local servers).
	if a := r.send("/v1/chat/completions", http.Header{"Authorization": {"Bearer " + clientBearer}}, fmt.Sprintf(openaiBody, "plain-m", "")); a.status != 200 {
		t.Errorf("plain backend: %s", a)
	} else if calls := plain.calls(); calls[len(calls)-1].Header.Get("Authorization") != "Bearer "+clientBearer {
		t.Errorf("plain backend: authorization %q", calls[len(calls)-1].Header.Get("Authorization"))
	}

	for _, path := range []string{"/health", "/admin/stats", "/metrics", "/admin/workers"} {
		if _, b := getFrom(t, r.addr, path); bytes.Contains(b, []byte(openaiKey)) || bytes.Contains(b, []byte(anthropicKey)) {
			t.Errorf("%s shows a backend's api_key", path)
		}
	}
	logs := r.logs.String()
	if !strings.Contains(logs, "level=DEBUG") {
		t.Errorf("the server did not log at debug level; the check below would prove little")
	}
	for _, key := range []string{openaiKey, anthropicKey, openaiKey[len(openaiKey)-12:], anthropicKey[len(anthropicKey)-12:]} {
		if strings.Contains(logs, key) {
			t.Errorf("the server log holds an api_key (%q…)", key[:6])
		}
	}
}

func TestE2EFailFastWhenEveryBackendIsDown(t *testing.T) {
	t.Parallel()
	live := newFlaky(t, "live")
	r := startRelay(t, "queue_timeout: 20s\nappproxy:\n  health_check_interval: 100ms\nbackends:\n"+
		backendYAML("dead1", closedURL(t), "dead-m")+backendYAML("dead2", closedURL(t), "dead-m")+backendYAML("live", live.url, "live-m"), nil)

	for i := range 4 {
		a := r.quick("dead-m")
		if a.status != 503 || a.retryAfter() < 1 || a.retryAfter() > 60 || a.elapsed > 3*time.Second {
			t.Errorf("request %d for a model whose every backend is down: %s, want 503 with Retry-After at once", i, a)
		}
		time.Sleep(60 * time.Millisecond) // before and after the first probes; not a synchronization
	}
	a := sendWithin(8*time.Second, r.addr, "", "/v1/messages", nil, `{"model":"dead-m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	if a.status != 503 || a.retryAfter() < 1 || !bytes.Contains(a.body, []byte(`"type":"error"`)) {
		t.Errorf("anthropic route, every backend down: %s", a)
	}
	if a := r.chat("never-seen-m"); a.status != 404 {
		t.Errorf("a model never seen: %s, want 404", a)
	}
	checkServed(t, "the live model", r.chat("live-m"), live, "live-m", "")
}

// relayWorker runs the real worker daemon; stop kills it (the relay sees its connection drop).
func relayWorker(t testing.TB, addr, secret, backend string, models ...string) (stop func()) {
	t.Helper()
	cmd := exec.Command(workerBinary(t), "--proxy-url", "http://"+addr, "--worker-secret", secret,
		"--backend-url", backend, "--models", strings.Join(models, ","))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("worker daemon output:\n%s", out.tail(3000))
		}
	})
	return stop
}

// waitNoWorkers waits until /health counts no relay worker.
func waitNoWorkers(t testing.TB, addr string) {
	t.Helper()
	eventually(t, 10*time.Second, "the worker gone", func() (bool, string) {
		_, b := getFrom(t, addr, "/health")
		var h struct {
			Workers int `json:"workers_connected"`
		}
		json.Unmarshal(b, &h)
		return h.Workers == 0, string(b)
	})
}

func TestE2EWorkerGraceThen503(t *testing.T) {
	t.Parallel()
	backend := newFlaky(t, "behind-worker")
	r := startRelay(t, "worker_secret: grace-secret\nworker_grace: 1s\nqueue_timeout: 20s\nbreaker_failures: 2\n", nil)
	stop := relayWorker(t, r.addr, "grace-secret", backend.url, "wm")
	waitModel(t, r.addr, "wm")
	checkServed(t, "worker present", r.chat("wm"), backend, "wm", "")

	// Relay workers have no breaker (their session reports failure): a worker whose server
	// answers 500 keeps getting every request, well past breaker_failures.
	backend.setStatus(500)
	before := backend.count()
	for range 4 {
		r.chat("wm")
	}
	if n := backend.count() - before; n < 4 {
		t.Errorf("the worker's server saw %d of 4 requests after answering 500 (breaker_failures 2)", n)
	}
	backend.setStatus(0)
	checkServed(t, "worker after its 500s", r.chat("wm"), backend, "wm", "")

	stop()
	waitNoWorkers(t, r.addr)
	a := r.quick("wm")
	if a.status != 503 || a.retryAfter() < 1 || a.elapsed > 5*time.Second {
		t.Errorf("last worker gone, grace 1 s: %s, want 503 with Retry-After within about a second", a)
	}
	if a := r.chat("never-seen-m"); a.status != 404 {
		t.Errorf("a model never seen: %s, want 404", a)
	}
}

func TestE2EWorkerReconnectsWithinGrace(t *testing.T) {
	t.Parallel()
	backend := newFlaky(t, "behind-worker")
	r := startRelay(t, "worker_secret: grace-secret\nworker_grace: 15s\nqueue_timeout: 30s\n", nil)
	stop := relayWorker(t, r.addr, "grace-secret", backend.url, "wm")
	waitModel(t, r.addr, "wm")
	stop()
	waitNoWorkers(t, r.addr)

	result := make(chan relayAnswer, 1)
	go func() { result <- r.chat("wm") }()
	waitQueued(t, r.addr, 1)
	relayWorker(t, r.addr, "grace-secret", backend.url, "wm")
	select {
	case a := <-result:
		checkServed(t, "waiting through a reconnect", a, backend, "wm", "")
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting request was not served after the worker came back")
	}
}

// Breaker: two failures open it; no traffic during a cooldown of 300 ms; then one trial at a
// time (half-open); failed trials double the cooldown up to 1 s; a good trial closes it.
func TestE2EBreakerOpensHalfOpensAndCloses(t *testing.T) {
	t.Parallel()
	bad, good := newFlaky(t, "bad"), newFlaky(t, "good")
	bad.setStatus(500)
	r := startRelay(t, "breaker_failures: 2\nbreaker_cooldown: 300ms\nbreaker_max_cooldown: 1s\nbackends:\n"+
		backendYAML("bad", bad.url, "m")+backendYAML("good", good.url, "m"), nil)
	const cooldown, maxCooldown = 300 * time.Millisecond, time.Second

	var mu sync.Mutex
	var clientErrors []string
	check := func(a relayAnswer) {
		if a.status != 200 || a.header.Get("X-Modelrelay-Model") != "m" {
			mu.Lock()
			clientErrors = append(clientErrors, a.String())
			mu.Unlock()
		}
	}
	ask := func() { check(r.chat("m")) }
	for i := 0; bad.count() < 2 && i < 50; i++ {
		ask()
	}
	calls := bad.calls()
	if len(calls) != 2 {
		t.Fatalf("bad saw %d calls before its breaker should have opened", len(calls))
	}
	if time.Since(calls[1].Answered) < cooldown*3/4 { // else the cooldown may be over already
		if v := breakerMetric(t, r.addr, "bad"); v != 1 {
			t.Errorf("after two failures: breaker metric %v, want 1 (open)", v)
		}
		if state, withWait, raw := breakerIn(t, r.addr, "/admin/stats", "bad"); state != "open" || !withWait {
			t.Errorf("/admin/stats after two failures: breaker %q, estimated wait in every pool %v: %s", state, withWait, raw)
		}
	}

	// Traffic flows on; the first trial is held at the fake while the test looks.
	entered, release := bad.holdCalls()
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	driving := make(chan struct{})
	go func() {
		defer close(driving)
		for ctx.Err() == nil {
			ask()
		}
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no trial request reached the open target")
	}
	if v := breakerMetric(t, r.addr, "bad"); v != 2 {
		t.Errorf("during the trial: breaker metric %v, want 2 (half-open)", v)
	}
	if state, withWait, raw := breakerIn(t, r.addr, "/health", "bad"); state != "half-open" || !withWait {
		t.Errorf("/health during the trial: breaker %q, estimated wait in every pool %v: %s", state, withWait, raw)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		// Bounded: were one of them held as a second trial, it must not hang the test.
		go func() { defer wg.Done(); check(r.quick("m")) }()
	}
	wg.Wait()
	if n := bad.count(); n != 3 {
		t.Errorf("half-open: bad saw %d calls, want 3 (two failures and one trial)", n)
	}
	release() // the trial fails (500): open again, for twice as long
	eventually(t, 5*time.Second, "open again after the failed trial", func() (bool, string) {
		v := breakerMetric(t, r.addr, "bad")
		return v == 1, fmt.Sprint("metric ", v)
	})
	// Two more failed trials (cooldowns 600 ms, then 1 s instead of 1.2 s), then a good one.
	for want := 4; want <= 6; want++ {
		eventually(t, 10*time.Second, fmt.Sprintf("trial %d", want-2), func() (bool, string) {
			n := len(bad.calls())
			return n >= want, fmt.Sprintf("%d calls", n)
		})
	}
	bad.setStatus(0)
	eventually(t, 10*time.Second, "the good trial", func() (bool, string) {
		return len(bad.calls()) >= 7, fmt.Sprintf("%d calls", len(bad.calls()))
	})
	eventually(t, 5*time.Second, "closed after the good trial", func() (bool, string) {
		v := breakerMetric(t, r.addr, "bad")
		return v == 0, fmt.Sprint("metric ", v)
	})
	closedAt := bad.count()
	eventually(t, 5*time.Second, "bad back in rotation", func() (bool, string) {
		return bad.count() >= closedAt+3, fmt.Sprintf("%d calls", bad.count())
	})
	cancel()
	<-driving
	if state, _, raw := breakerIn(t, r.addr, "/admin/stats", "bad"); state != "closed" {
		t.Errorf("/admin/stats after the good trial: breaker %q: %s", state, raw)
	}

	calls = bad.calls()
	wants := []time.Duration{cooldown, 2 * cooldown, maxCooldown, maxCooldown, maxCooldown}
	for i, want := range wants {
		prev, next := calls[i+1], calls[i+2]
		if prev.Answered.IsZero() {
			t.Errorf("call %d was never answered (its client left)", i+2)
			continue
		}
		gap := next.Arrived.Sub(prev.Answered)
		if gap < want {
			t.Errorf("call %d reached the open target %s after call %d failed, want no traffic for %s", i+3, gap.Round(time.Millisecond), i+2, want)
		}
		t.Logf("trial %d: %s after the previous failure (cooldown %s)", i+1, gap.Round(time.Millisecond), want)
	}
	// Unclamped, the fourth cooldown would be 2.4 s; clamped it is 1 s (traffic never stopped).
	if gap := calls[5].Arrived.Sub(calls[4].Answered); gap > 2*time.Second {
		t.Errorf("the fourth cooldown lasted %s: breaker_max_cooldown (1 s) not applied", gap.Round(time.Millisecond))
	}
	if len(clientErrors) > 0 {
		t.Errorf("%d client-visible errors (the pool's good target was free), first: %s", len(clientErrors), clientErrors[0])
	}
}

// Retry-After is the estimated wait: queue ahead × EWMA of service time ÷ capacity.
func TestE2ERetryAfterFollowsTheQueue(t *testing.T) {
	t.Parallel()
	slow := newFlaky(t, "slow")
	r := startRelay(t, "max_queue_len: 10\nqueue_timeout: 30s\nbackends:\n"+backendYAML("slow", slow.url, "m")+"    max_concurrent: 1\n", nil)
	probe := `"x_pool_options":{"max_latency_ms":1}`

	// fill holds the target and queues n requests behind the held one; drain releases them.
	fill := func(n int, each func(k int)) (drain func()) {
		entered, release := slow.holdCalls()
		results := make(chan relayAnswer, n+1)
		go func() { results <- r.chat("m") }()
		<-entered
		if each != nil {
			each(0)
		}
		for k := 1; k <= n; k++ {
			go func() { results <- r.chat("m") }()
			waitQueued(t, r.addr, k)
			if each != nil {
				each(k)
			}
		}
		return func() {
			release()
			for range n + 1 {
				if a := <-results; a.status != 200 {
					t.Errorf("a queued request: %s", a)
				}
			}
		}
	}

	// No request has completed: the mean service time is its initial 1 s.
	var waits []int
	drain := fill(10, func(k int) {
		a := r.quick("m", probe)
		if a.status != 429 || a.retryAfter() < 1 || a.retryAfter() > 60 {
			t.Errorf("max_latency_ms 1 with %d queued: %s, want 429 with Retry-After", k, a)
		}
		waits = append(waits, a.retryAfter())
	})
	full := r.quick("m")
	drain()
	t.Logf("Retry-After with 0..10 queued (mean 1 s): %v; queue full: %s", waits, full.header.Get("Retry-After"))
	if !slices.IsSorted(waits) || waits[10] < 5 || waits[10] <= waits[0] {
		t.Errorf("Retry-After does not grow with the queue: %v", waits)
	}
	if full.status != 429 || full.retryAfter() < 5 {
		t.Errorf("queue of 10 full (mean 1 s): %s, want 429 with Retry-After >= 5", full)
	}

	// Many quick answers bring the mean down: a full queue now means a short wait.
	for range 30 {
		if a := r.chat("m"); a.status != 200 {
			t.Fatalf("quick request: %s", a)
		}
	}
	drain = fill(10, nil)
	full = r.quick("m")
	drain()
	if full.status != 429 || full.retryAfter() < 1 || full.retryAfter() > 2 {
		t.Errorf("queue of 10 full after quick answers: %s, want 429 with Retry-After 1 or 2", full)
	}

	// Answers of a second each bring it back up.
	slow.setDelay(time.Second)
	for range 4 {
		if a := r.chat("m"); a.status != 200 {
			t.Fatalf("slow request: %s", a)
		}
	}
	slow.setDelay(0)
	drain = fill(10, nil)
	full = r.quick("m")
	drain()
	if full.status != 429 || full.retryAfter() < 5 {
		t.Errorf("queue of 10 full after answers of 1 s: %s, want 429 with Retry-After >= 5", full)
	}
}

func TestE2EMaxLatencyRejectsBeforeQueueing(t *testing.T) {
	t.Parallel()
	one := newFlaky(t, "one")
	r := startRelay(t, "queue_timeout: 20s\nbackends:\n"+backendYAML("one", one.url, "m")+"    max_concurrent: 1\n", nil)
	probe := `"x_pool_options":{"max_latency_ms":1}`

	// A free target means no wait at all.
	checkServed(t, "idle pool, max_latency_ms 1", r.chat("m", probe), one, "m", "")
	if c, ok := one.lastCall(); ok {
		checkBodyAt(t, "idle pool", c, "m")
	}

	served := one.count()
	entered, release := one.holdCalls()
	defer release()
	held := make(chan relayAnswer, 2)
	go func() { held <- r.chat("m") }()
	<-entered
	a := r.quick("m", probe)
	if a.status != 429 || a.retryAfter() < 1 || a.elapsed > 2*time.Second {
		t.Errorf("busy pool, max_latency_ms 1: %s, want 429 with Retry-After at once", a)
	}
	var oa struct{ Error struct{ Message string } }
	if json.Unmarshal(a.body, &oa); oa.Error.Message == "" {
		t.Errorf("busy pool, max_latency_ms 1: not an OpenAI error: %s", a.body)
	}
	a = sendWithin(8*time.Second, r.addr, "", "/v1/messages", nil, `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"x_pool_options":{"max_latency_ms":1}}`)
	if a.status != 429 || a.retryAfter() < 1 || !bytes.Contains(a.body, []byte(`"type":"error"`)) {
		t.Errorf("busy pool, anthropic route: %s", a)
	}
	if n := queued(t, r.addr); n != 0 {
		t.Errorf("%d requests queued by max_latency_ms rejections", n)
	}
	if n := one.count() - served; n != 1 {
		t.Errorf("the target saw %d requests, want only the held one", n)
	}
	// A generous bound waits its turn.
	go func() { held <- r.chat("m", `"x_pool_options":{"max_latency_ms":60000}`) }()
	waitQueued(t, r.addr, 1)
	release()
	for range 2 {
		checkServed(t, "after release", <-held, one, "m", "")
	}
}

// A registered circuit with no live replica pins the request to its canonical model, whose
// chain applies after the circuit's own token and address checks; an unknown subdomain never
// falls back.
func TestE2ECircuitDownFallsBackAfterAuth(t *testing.T) {
	t.Parallel()
	static := newFlaky(t, "static")
	rep := newReplica(t, "circ", "circ-model")
	down := newCircuit("down", route{port: mustAtoi(t, strings.Split(freeAddr(t), ":")[1])})
	down.app = "circ-app"
	fenced := newCircuit("fenced", route{port: mustAtoi(t, strings.Split(freeAddr(t), ":")[1])})
	fenced.app, fenced.allowIPs = "circ-app", ptr("10.0.0.0/8")
	wasUp := newCircuit("wasup", route{port: rep.port()})
	wasUp.app, wasUp.public = "other-app", true
	lonely := newCircuit("lonely", route{port: mustAtoi(t, strings.Split(freeAddr(t), ":")[1])})
	lonely.app, lonely.public = "lonely-app", true
	config := writeConfig(t, "fallbacks:\n  circ-app: [static-m]\n  circ-model: [static-m]\nbackends:\n"+backendYAML("static", static.url, "static-m"))
	e := startE2E(t, e2eOptions{circuits: jsonList(down.json(), fenced.json(), wasUp.json(), lonely.json()),
		env: map[string]string{"MODELRELAY_CONFIG": config}})
	circuitChat := func(sub string, h http.Header) relayAnswer {
		return sendTo(e.addr, circuitHost(sub), "/v1/chat/completions", h, chatJSON("whatever-the-client-says"))
	}

	// The live circuit's model is discovered from its replica; then the replica dies.
	eventually(t, 15*time.Second, "circ-model discovered", func() (bool, string) {
		c := e.adminCircuit(wasUp.id)
		models, _ := c["models"].([]any)
		return slices.Contains(models, any("circ-model")), fmt.Sprint(c)
	})
	rep.close()
	for i := range 3 {
		a := circuitChat("wasup", nil)
		checkServed(t, fmt.Sprintf("replica died, request %d", i), a, static, "static-m", "circ-model")
		if c, ok := static.lastCall(); ok {
			checkBodyAt(t, "replica died", c, "static-m")
		}
	}

	// Never discovered: the circuit's app name is its model.
	checkServed(t, "down circuit, valid token", circuitChat("down", bearer(tokenFor(t, down.id))), static, "static-m", "circ-app")

	before := static.count()
	refused := []struct {
		name, host, auth string
		want             problemWant
	}{
		{"no token", "down", "", problemWant{401, "invalid-credentials", "E20006: Authorization header not provided"}},
		{"wrong key", "down", "Bearer " + mintToken(t, jwt.MapClaims{"id": down.id}, "not-the-secret"), problemWant{401, "invalid-credentials", "E20008: Invalid authorization token (*"}},
		{"other circuit's token", "down", "Bearer " + tokenFor(t, fenced.id), problemWant{401, "invalid-credentials", "E20009: Authorization token mismatch"}},
		{"address not allowed", "fenced", "Bearer " + tokenFor(t, fenced.id), problemWant{403, "client-ip-not-allowed", "E20011: Client address not allowed"}},
		{"unknown subdomain", "nope", "", problemWant{400, "generic-bad-request", "E20009: Subdomain nope not registered"}},
	}
	for _, tc := range refused {
		h := http.Header{}
		if tc.auth != "" {
			h.Set("Authorization", tc.auth)
		}
		a := circuitChat(tc.host, h)
		checkProblem(t, tc.name, a.status, a.header, a.body, tc.want)
		if a.header.Get("X-Modelrelay-Fallback-From") != "" {
			t.Errorf("%s: the refusal carries x-modelrelay-fallback-from", tc.name)
		}
	}
	if n := static.count() - before; n != 0 {
		t.Errorf("%d refused requests were served by the fallback", n)
	}

	// No chain for its model: once its replica is known down, 503 with Retry-After at once.
	eventually(t, 10*time.Second, "the lonely circuit's replica known down", func() (bool, string) {
		c := e.adminCircuit(lonely.id)
		routes, _ := c["routes"].([]any)
		r0, _ := routes[0].(map[string]any)
		return r0["healthy"] == false || r0["breaker"] == "open", fmt.Sprint(c)
	})
	a := sendWithin(8*time.Second, e.addr, circuitHost("lonely"), "/v1/chat/completions", nil, chatJSON("lonely-app"))
	if a.status != 503 || a.retryAfter() < 1 || a.elapsed > 3*time.Second {
		t.Errorf("a down circuit without a chain: %s, want 503 with Retry-After at once", a)
	}
}

// Failure injection: one target fails every request, one is slow, one is fine, and the model
// has a chain. 500 requests at concurrency 50: no client sees an error, and once its breaker
// is open the failing target sees at most a handful.
//
// "Once open" is decided causally, not by clocks: each request carries its issue number, and a
// watcher notes how many had been issued when /metrics first showed the breaker open. A
// request issued after that must never reach the failing target (its cool-down outlasts the
// run); requests issued before may, whenever they arrive.
func TestE2EFailureInjection(t *testing.T) {
	t.Parallel()
	failing, slow, fine, small := newFlaky(t, "failing"), newFlaky(t, "slow"), newFlaky(t, "fine"), newFlaky(t, "small")
	failing.setStatus(500)
	slow.setDelay(50 * time.Millisecond)
	r := startRelay(t, "breaker_failures: 5\nbreaker_cooldown: 30s\nbreaker_max_cooldown: 60s\nqueue_timeout: 20s\n"+
		"fallbacks:\n  big: [small]\nbackends:\n"+backendYAML("failing", failing.url, "big")+backendYAML("slow", slow.url, "big")+
		backendYAML("fine", fine.url, "big")+backendYAML("small", small.url, "small"), nil)

	const total, concurrency = 500, 50
	var issued atomic.Int64
	openedAfter := atomic.Int64{} // requests issued when the breaker was first seen open
	openedAfter.Store(-1)
	watching, stopWatching := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watching.Err() == nil {
			if breakerState(r.addr, "failing") == 1 {
				// Read after seeing it open: every later issue number came later still.
				openedAfter.Store(issued.Load())
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	var mu sync.Mutex
	var failures []string
	served := map[string]int{}
	moved := 0
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := issued.Add(1)
				if n > total {
					return
				}
				a := r.chat("big", fmt.Sprintf(`"user":"issue-%d"`, n))
				mu.Lock()
				if a.status != 200 {
					failures = append(failures, a.String())
				} else {
					served[a.header.Get("X-Fake")]++
					if a.header.Get("X-Modelrelay-Fallback-From") == "big" {
						moved++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopWatching()
	<-watched

	calls := failing.calls()
	open := openedAfter.Load()
	afterOpen := 0
	for _, c := range calls {
		var body struct{ User string }
		json.Unmarshal(c.Raw, &body)
		n, err := strconv.ParseInt(strings.TrimPrefix(body.User, "issue-"), 10, 64)
		if err != nil {
			t.Errorf("a call without its issue number: %s", c.Raw)
		}
		if open >= 0 && n > open {
			afterOpen++
		}
	}
	t.Logf("%d requests in %s: served %v, %d by the fallback; the failing target saw %d, %d of them issued after its breaker was seen open (after request %d)",
		total, elapsed.Round(time.Millisecond), served, moved, len(calls), afterOpen, open)
	if len(failures) > 0 {
		t.Errorf("%d client-visible errors, first: %s", len(failures), failures[0])
	}
	if open < 0 {
		t.Errorf("the failing target's breaker was never seen open during the run")
	}
	if afterOpen > 12 {
		t.Errorf("the failing target saw %d requests issued after its breaker opened, want a handful (<= 12)", afterOpen)
	}
	if v := breakerMetric(t, r.addr, "failing"); v != 1 {
		t.Errorf("breaker of the failing target: metric %v, want 1 (open)", v)
	}
}
