package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"modelrelay/protocol"
	"modelrelay/reconcile"
	"modelrelay/relay"
	"modelrelay/relay/admin"
	"modelrelay/relay/api"
)

// The status page in a real headless Chromium against a real relay on loopback: sign-in
// through the form, the tables filled from the admin API, the page following a relay worker
// that joins and leaves, rates from /metrics. Screenshots go to $MODELRELAY_TEST_ARTIFACTS
// (or a folder under the system temporary directory), named in the test log.

const (
	adminToken   = "ui-test-admin-token"
	workerSecret = "ui-test-worker-secret"
	// waitLimit bounds every wait for the page: a hang guard, not a speed claim (-race on two
	// busy cores, a browser starting).
	waitLimit = 45 * time.Second
)

// chromiumNames are the binaries tried, in order, on PATH.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range chromiumNames {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Fatalf("no Chromium on PATH (looked for %s): `make deps` installs the Debian package chromium",
		strings.Join(chromiumNames, ", "))
	return ""
}

// newBrowser starts a headless Chromium for the test and stops it at its end.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(findChromium(t)),
		chromedp.NoSandbox, // tests run as root in containers, where Chromium's sandbox cannot start
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1000),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	// The first Run starts the browser and lives as long as its context: no timeout on it.
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return browser
}

// page is one browser tab. Script errors and console.error calls on it fail the test.
type page struct {
	t        *testing.T
	ctx      context.Context
	mu       sync.Mutex
	problems []string
}

func openPage(t *testing.T, browser context.Context, url string) *page {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser)
	p := &page{t: t, ctx: tab}
	t.Cleanup(func() {
		cancel()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, problem := range p.problems {
			t.Errorf("page script: %s", problem)
		}
	})
	if err := chromedp.Listen(tab, p.watch); err != nil {
		t.Fatalf("listen to the tab: %v", err)
	}
	if err := chromedp.Do(tab, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return p
}

// watch runs on the tab's reader goroutine: it only records.
func (p *page) watch(ev any) {
	var problem string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		problem = (&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error()
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError {
			return
		}
		var args []string
		for _, a := range ev.Args {
			args = append(args, string(a.Value)+a.Description)
		}
		problem = "console.error: " + strings.Join(args, " ")
	default:
		return
	}
	p.mu.Lock()
	p.problems = append(p.problems, problem)
	p.mu.Unlock()
}

// do runs browser actions, failing the test on an error.
func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitLimit)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v\npage text:\n%s", what, err, p.text())
	}
}

// waitFor waits until the JavaScript expression is true in the page.
func (p *page) waitFor(what, expr string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitLimit)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool]("!!("+expr+")",
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(waitLimit)))
	if err != nil {
		p.t.Fatalf("the page never showed %s: %v\npage text:\n%s", what, err, p.text())
	}
}

// eval returns the value of a JavaScript expression in the page.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitLimit)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text is what the page shows, for failure messages.
func (p *page) text() string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText"))
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	return s
}

// signIn types a token into the form and submits it as a user would.
func (p *page) signIn(token string) {
	p.t.Helper()
	p.waitFor("the sign-in form", `!document.getElementById('login-section').hidden`)
	p.do("sign in",
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)),
	)
}

// row is the text of each cell of the first row matching a CSS selector, or nil.
func (p *page) row(selector string) []string {
	p.t.Helper()
	sel, _ := json.Marshal(selector)
	return eval[[]string](p, fmt.Sprintf(`(() => {
		const row = document.querySelector(%s);
		return row ? [...row.cells].map((c) => c.textContent) : null;
	})()`, sel))
}

// routes is the text of each route of a circuit.
func (p *page) routes(circuit string) []string {
	p.t.Helper()
	sel, _ := json.Marshal(fmt.Sprintf(`#circuits tr[data-circuit=%q] li`, circuit))
	return eval[[]string](p, fmt.Sprintf(`[...document.querySelectorAll(%s)].map((li) => li.textContent)`, sel))
}

func (p *page) screenshot(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitLimit)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("MODELRELAY_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "modelrelay-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s", path)
}

// startRelay serves a relay on loopback with its background loops running and the operator's
// surface (this page, the admin API) mounted.
func startRelay(t *testing.T, opts relay.Options) (*relay.Server, *admin.Surface, *httptest.Server) {
	t.Helper()
	opts.Timings = relay.Timings{HeartbeatInterval: time.Hour, HeartbeatTimeout: time.Hour,
		AuthFailureStep: 10 * time.Millisecond, KeepKnown: time.Hour}
	srv, err := relay.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(ctx) }()
	ops := admin.Mount(srv)
	ts := httptest.NewServer(api.Handler(srv))
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
		cancel()
		<-done
	})
	return srv, ops, ts
}

// fakeUpstream is a static backend: every chat completion answers "hello" and uses 5 input
// and 7 output tokens.
func fakeUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"static-model","object":"model"}]}`)
		case "/v1/chat/completions":
			io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"static-model",`+
				`"choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],`+
				`"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

func call(t *testing.T, method, url, bearer, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, url, res.StatusCode, out)
	}
	return out
}

func chat(t *testing.T, relayURL, apiKey string) {
	t.Helper()
	call(t, http.MethodPost, relayURL+"/v1/chat/completions", apiKey,
		`{"model":"static-model","messages":[{"role":"user","content":"hi"}]}`)
}

// joinWorker registers a relay worker over the real protocol and returns its connection and
// the id the relay gave it. Closing the connection is the worker going away.
func joinWorker(t *testing.T, relayURL, name string, models []string, maxConcurrent uint32) (*websocket.Conn, string) {
	t.Helper()
	url := "ws" + strings.TrimPrefix(relayURL, "http") + "/v1/worker/connect?provider=local"
	conn, _, err := websocket.DefaultDialer.Dial(url, http.Header{"X-Worker-Secret": {workerSecret}})
	if err != nil {
		t.Fatalf("dial the relay as a worker: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	version := protocol.Version
	frame, err := protocol.Marshal(protocol.Register{WorkerName: name, Models: models, MaxConcurrent: maxConcurrent,
		ProtocolVersion: &version})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
		t.Fatalf("send register: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(waitLimit))
	_, data, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("read register_ack: %v", err)
	}
	msg, err := protocol.DecodeServerMessage(data)
	if err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	ack, ok := msg.(protocol.RegisterAck)
	if !ok {
		t.Fatalf("expected register_ack, got %s", data)
	}
	return conn, ack.WorkerID
}

func wantCells(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s row: got %q, want %q", what, got, want)
	}
}

func TestStatusPageFollowsTheRelay(t *testing.T) {
	browser := newBrowser(t)
	upstream := fakeUpstream(t)
	srv, ops, ts := startRelay(t, relay.Options{AdminToken: adminToken, WorkerSecret: workerSecret, RequireAPIKeys: true,
		Backends: []relay.Backend{{Name: "fake-upstream", URL: upstream.URL, Models: []string{"static-model"}}}})
	// A circuit as AppProxy mode lists it, its routes the local pool's live targets.
	ops.SetCircuitLister(func() any {
		return []reconcile.CircuitView{{ID: "circuit-1", Subdomain: "chat.apps.example", Models: []string{"static-model"},
			Public: true, Routes: srv.PoolMembers("local")}}
	})

	var key struct{ ID, Secret, Prefix string }
	if err := json.Unmarshal(call(t, http.MethodPost, ts.URL+"/admin/keys", adminToken, `{"name":"ui-test-key"}`), &key); err != nil {
		t.Fatal(err)
	}
	chat(t, ts.URL, key.Secret)
	chat(t, ts.URL, key.Secret)
	conn, workerID := joinWorker(t, ts.URL, "gpu-box-1", []string{"worker-model"}, 4)

	p := openPage(t, browser, ts.URL+"/ui") // the bare path leads to the page
	p.signIn("not-the-token")
	p.waitFor("the refusal of a wrong token",
		`document.getElementById('login-message').textContent === 'wrong admin token' &&
		 sessionStorage.getItem('modelrelay.adminToken') === null`)

	p.signIn(adminToken)
	workerRow := fmt.Sprintf(`#targets tr[data-target=%q]`, workerID)
	p.waitFor("the relay worker among the targets", `document.querySelector('`+workerRow+`')`)
	wantCells(t, "worker target", p.row(workerRow), "local", workerID, "worker", "healthy", "—", "0 / 4", "0")
	wantCells(t, "upstream target", p.row(`#targets tr[data-target="fake-upstream"]`),
		"local", "fake-upstream", "upstream", "healthy", "closed", "—", "0")
	// (Its mean service time depends on the machine's speed.)
	wantCells(t, "pool", p.row(`#pools tr[data-pool="local"]`)[:5], "local", "2 of 2", "0", "0", "0 ms")
	wantCells(t, "worker", p.row(fmt.Sprintf(`#workers tr[data-worker=%q]`, workerID)),
		workerID, "gpu-box-1", "local", "worker-model", "0 / 4", "0", "ready")
	keyRow := p.row(fmt.Sprintf(`#keys tr[data-key=%q]`, key.ID))
	if len(keyRow) != 8 {
		t.Fatalf("key row: %q", keyRow)
	}
	wantCells(t, "key", slices.Concat(keyRow[:4], keyRow[5:]), "ui-test-key", key.Prefix, "active", "none", "2", "10", "14")
	if notice := eval[string](p, `document.getElementById('keys-warning').textContent`); notice != "" {
		t.Errorf("keys are required, yet the keys section says %q", notice)
	}
	wantCells(t, "circuit", p.row(`#circuits tr[data-circuit="circuit-1"]`)[:4], "circuit-1", "chat.apps.example", "static-model", "yes")
	wantCells(t, "circuit routes", p.routes("circuit-1"),
		"fake-upstream healthy · 0 in flight · breaker closed", workerID+" healthy · 0 in flight")

	// Rates count from the page's first read of /metrics, which came with the rows above.
	for range 3 {
		chat(t, ts.URL, key.Secret)
	}
	p.waitFor("the new requests and their tokens in the traffic figures",
		`document.querySelector('[data-figure="requests"] dd').textContent === '3' &&
		 document.querySelector('[data-figure="tokens"] dd').textContent === '36'`)
	p.waitFor("a line in the request sparkline",
		`document.querySelector('#sparkline polyline').getAttribute('points').split(' ').length >= 2`)
	p.screenshot("ui-status.png")

	conn.Close()
	p.waitFor("the relay worker gone",
		`!document.querySelector('`+workerRow+`') && !document.querySelector('#workers tr[data-worker]')`)
	wantCells(t, "workers", p.row(`#workers tr`), "No relay workers connected.")
	wantCells(t, "circuit routes", p.routes("circuit-1"), "fake-upstream healthy · 0 in flight · breaker closed")
	wantCells(t, "pool", p.row(`#pools tr[data-pool="local"]`)[:5], "local", "1 of 1", "0", "0", "0 ms")
	p.screenshot("ui-status-worker-gone.png")

	// The token lives in the tab's session storage: a reload needs no new sign-in.
	p.do("reload", chromedp.Reload())
	p.waitFor("the status again after a reload", `document.querySelector('#targets tr[data-target="fake-upstream"]')`)
	if !eval[bool](p, `document.getElementById('login-section').hidden`) {
		t.Error("the sign-in form shows after a reload")
	}

	p.do("sign out", chromedp.Click(chromedp.ID("logout")))
	p.waitFor("the sign-in form after signing out",
		`!document.getElementById('login-section').hidden && document.getElementById('status').hidden &&
		 sessionStorage.getItem('modelrelay.adminToken') === null`)
}

// While keys are not required the keys section says what a key does there, and a key's
// priority ceiling shows among its limits.
func TestStatusPageKeysNotRequired(t *testing.T) {
	browser := newBrowser(t)
	_, _, ts := startRelay(t, relay.Options{AdminToken: adminToken, WorkerSecret: workerSecret})
	var key struct{ ID, Prefix, Warning string }
	if err := json.Unmarshal(call(t, http.MethodPost, ts.URL+"/admin/keys", adminToken,
		`{"name":"optional-key","priority":"low","max_priority":"normal"}`), &key); err != nil {
		t.Fatal(err)
	}
	const warning = "require_api_keys is off: a key is checked when a client sends it, but requests without a key are still served"
	if key.Warning != warning {
		t.Errorf("POST /admin/keys warning %q, want %q", key.Warning, warning)
	}
	p := openPage(t, browser, ts.URL+"/ui/")
	p.signIn(adminToken)
	keyRow := fmt.Sprintf(`#keys tr[data-key=%q]`, key.ID)
	p.waitFor("the key", `document.querySelector('`+keyRow+`')`)
	wantCells(t, "key", p.row(keyRow)[:4], "optional-key", key.Prefix, "active", "priority low; max priority normal")
	if got := eval[string](p, `document.getElementById('keys-warning').textContent`); got != warning {
		t.Errorf("the keys section says %q, want %q", got, warning)
	}
	p.screenshot("ui-keys-not-required.png")
}

// With no admin token configured there is nothing to sign in with: the page says so.
func TestStatusPageAdminDisabled(t *testing.T) {
	browser := newBrowser(t)
	_, _, ts := startRelay(t, relay.Options{WorkerSecret: workerSecret})
	p := openPage(t, browser, ts.URL+"/ui/")
	p.signIn("anything")
	p.waitFor("that the admin API is disabled",
		`document.getElementById('login-message').textContent === 'admin API is disabled: no admin_token is configured' &&
		 document.getElementById('status').hidden`)
}
