package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"modelrelay/protocol"
	"modelrelay/relay"
)

// waitLimit bounds every wait for something the server should do promptly.
const waitLimit = 20 * time.Second // a hang guard, not a speed claim: -race on 2 busy cores is slow

// quietTimings keeps the protocol clocks out of the way of tests that do not exercise them:
// no ping, no heartbeat close, no keep-known expiry during a test.
func quietTimings() relay.Timings {
	return relay.Timings{HeartbeatInterval: time.Hour, HeartbeatTimeout: time.Hour, RegisterTimeout: 5 * time.Second,
		CancelGrace: time.Hour, AuthFailureStep: 10 * time.Millisecond, KeepKnown: time.Hour}
}

// liveWorker is a relay worker whose frames are read by a pump goroutine, so a test can wait
// on several workers at once and on the close frame without racing the reader.
type liveWorker struct {
	t      *testing.T
	conn   *websocket.Conn
	ack    protocol.RegisterAck
	rawAck []byte
	frames chan protocol.Message // every frame but ping
	pings  chan protocol.Ping
	closed chan struct{} // closed when the pump stops
	code   int           // close code, valid after closed (0 = no close frame)
	text   string
	err    error
}

// regFrame builds a register frame from fields; nil values are left out.
func regFrame(fields map[string]any) string {
	m := map[string]any{"type": "register"}
	for k, v := range fields {
		if v != nil {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// reg is a register frame with the current protocol version.
func reg(name string, models []string, maxConcurrent int) string {
	return regFrame(map[string]any{"worker_name": name, "models": models, "max_concurrent": maxConcurrent,
		"protocol_version": protocol.Version})
}

// regLoad is reg with a current_load.
func regLoad(name string, models []string, maxConcurrent, load int) string {
	return regFrame(map[string]any{"worker_name": name, "models": models, "max_concurrent": maxConcurrent,
		"protocol_version": protocol.Version, "current_load": load})
}

// dialWorker opens a worker connection with the shared secret for provider local.
func dialWorker(t *testing.T, ts *httptest.Server) *websocket.Conn {
	t.Helper()
	return dialRaw(t, ts, "?provider=local", secretHeader())
}

// joinNoWait registers a worker and reads its ack, without waiting to see it in the pool.
func joinNoWait(t *testing.T, ts *httptest.Server, register string) *liveWorker {
	t.Helper()
	conn := dialWorker(t, ts)
	if err := conn.WriteMessage(websocket.TextMessage, []byte(register)); err != nil {
		t.Fatalf("send register: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(waitLimit))
	_, data, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("read register_ack: %v", err)
	}
	conn.SetReadDeadline(time.Time{})
	msg, err := protocol.DecodeServerMessage(data)
	if err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	ack, ok := msg.(protocol.RegisterAck)
	if !ok {
		t.Fatalf("expected register_ack, got %s", data)
	}
	w := &liveWorker{t: t, conn: conn, ack: ack, rawAck: data, frames: make(chan protocol.Message, 256),
		pings: make(chan protocol.Ping, 256), closed: make(chan struct{})}
	go w.pump()
	return w
}

// join registers a worker and waits until /health lists it, so requests sent next can be
// routed to it (the ack alone does not promise that; see TestRequestRightAfterAckIsRouted).
func join(t *testing.T, ts *httptest.Server, register string) *liveWorker {
	t.Helper()
	w := joinNoWait(t, ts, register)
	eventually(t, w.ack.WorkerID+" in /health", func() bool { return healthHasWorker(t, ts, w.ack.WorkerID) })
	return w
}

func (w *liveWorker) pump() {
	defer close(w.closed)
	for {
		_, data, err := w.conn.ReadMessage()
		if err != nil {
			if ce, ok := err.(*websocket.CloseError); ok {
				w.code, w.text = ce.Code, ce.Text
			}
			w.err = err
			return
		}
		msg, err := protocol.DecodeServerMessage(data)
		if err != nil {
			w.err = fmt.Errorf("decode %s: %w", data, err)
			return
		}
		if p, ok := msg.(protocol.Ping); ok {
			select {
			case w.pings <- p:
			default:
			}
			continue
		}
		w.frames <- msg
	}
}

// next waits for the next non-ping frame.
func (w *liveWorker) next() protocol.Message {
	w.t.Helper()
	select {
	case m := <-w.frames:
		return m
	case <-w.closed:
		select {
		case m := <-w.frames:
			return m
		default:
		}
		w.t.Fatalf("%s: connection ended (close %d %q, %v) while waiting for a frame", w.ack.WorkerID, w.code, w.text, w.err)
	case <-time.After(waitLimit):
		w.t.Fatalf("%s: no frame within %v", w.ack.WorkerID, waitLimit)
	}
	return nil
}

func (w *liveWorker) request() protocol.Request {
	w.t.Helper()
	m := w.next()
	r, ok := m.(protocol.Request)
	if !ok {
		w.t.Fatalf("%s: expected request, got %#v", w.ack.WorkerID, m)
	}
	return r
}

func (w *liveWorker) cancel() protocol.Cancel {
	w.t.Helper()
	m := w.next()
	c, ok := m.(protocol.Cancel)
	if !ok {
		w.t.Fatalf("%s: expected cancel, got %#v", w.ack.WorkerID, m)
	}
	return c
}

// closeFrame waits for the server's close frame; frames before it are returned too.
func (w *liveWorker) closeFrame() (code int, text string, before []protocol.Message) {
	w.t.Helper()
	select {
	case <-w.closed:
	case <-time.After(waitLimit):
		w.t.Fatalf("%s: not closed within %v", w.ack.WorkerID, waitLimit)
	}
	for {
		select {
		case m := <-w.frames:
			before = append(before, m)
		default:
			return w.code, w.text, before
		}
	}
}

func (w *liveWorker) send(m protocol.Message) {
	w.t.Helper()
	b, err := protocol.Marshal(m)
	if err != nil {
		w.t.Fatal(err)
	}
	w.sendRaw(websocket.TextMessage, b)
}

func (w *liveWorker) sendRaw(kind int, data []byte) {
	w.t.Helper()
	w.conn.SetWriteDeadline(time.Now().Add(waitLimit))
	if err := w.conn.WriteMessage(kind, data); err != nil {
		w.t.Fatalf("%s: write: %v", w.ack.WorkerID, err)
	}
}

func (w *liveWorker) chunk(id, chunk string) {
	w.t.Helper()
	w.send(protocol.ResponseChunk{RequestID: id, Chunk: chunk})
}

func (w *liveWorker) complete(id string, status int, headers protocol.Headers, body string) {
	w.t.Helper()
	w.send(protocol.ResponseComplete{RequestID: id, StatusCode: uint16(status), Headers: headers, Body: &body})
}

// vanish drops the TCP connection without a close frame: a crashed worker.
func (w *liveWorker) vanish() {
	w.conn.UnderlyingConn().Close()
	<-w.closed
}

// result is a finished HTTP call.
type result struct {
	resp *http.Response
	body []byte
	err  error
}

// goCall runs an HTTP request in the background and reads the whole answer.
func goCall(ctx context.Context, method, url, body string, header http.Header) <-chan result {
	out := make(chan result, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		if err != nil {
			out <- result{err: err}
			return
		}
		if header != nil {
			req.Header = header.Clone()
		}
		if req.Header.Get("Content-Type") == "" && method == http.MethodPost {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- result{resp: resp, body: b, err: err}
	}()
	return out
}

// goPost posts body to path in the background.
func goPost(ts *httptest.Server, path, body string) <-chan result {
	return goCall(context.Background(), http.MethodPost, ts.URL+path, body, nil)
}

// goStream posts and hands back the response as soon as its headers arrive.
func goStream(ctx context.Context, ts *httptest.Server, path, body string) <-chan result {
	out := make(chan result, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+path, strings.NewReader(body))
		if err != nil {
			out <- result{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		out <- result{resp: resp, err: err}
	}()
	return out
}

// wait returns the call's result or fails the test.
func wait(t *testing.T, c <-chan result) result {
	t.Helper()
	select {
	case r := <-c:
		if r.err != nil {
			t.Fatalf("http call: %v", r.err)
		}
		return r
	case <-time.After(waitLimit):
		t.Fatalf("http call not answered within %v", waitLimit)
	}
	return result{}
}

// getJSON fetches path (with an admin bearer token when token != "") and decodes the body.
func getJSON(t *testing.T, ts *httptest.Server, path, token string) (int, map[string]any) {
	t.Helper()
	return callJSON(t, ts, http.MethodGet, path, token, "")
}

func callJSON(t *testing.T, ts *httptest.Server, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	r := wait(t, goCall(context.Background(), method, ts.URL+path, body, h))
	var v map[string]any
	if len(r.body) > 0 {
		if err := json.Unmarshal(r.body, &v); err != nil {
			t.Fatalf("%s %s: body %q is not a JSON object: %v", method, path, r.body, err)
		}
	}
	return r.resp.StatusCode, v
}

func healthHasWorker(t *testing.T, ts *httptest.Server, id string) bool {
	t.Helper()
	_, h := getJSON(t, ts, "/health", "")
	workers, _ := h["workers"].([]any)
	for _, w := range workers {
		if m, ok := w.(map[string]any); ok && m["id"] == id {
			return true
		}
	}
	return false
}

func queueDepth(t *testing.T, ts *httptest.Server) int {
	t.Helper()
	_, h := getJSON(t, ts, "/health", "")
	n, _ := h["queue_depth"].(float64)
	return int(n)
}

func waitQueueDepth(t *testing.T, ts *httptest.Server, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("queue depth %d", n), func() bool { return queueDepth(t, ts) == n })
}

// healthWorker returns the /health entry of worker id, or nil.
func healthWorker(t *testing.T, ts *httptest.Server, id string) map[string]any {
	t.Helper()
	_, h := getJSON(t, ts, "/health", "")
	workers, _ := h["workers"].([]any)
	for _, w := range workers {
		if m, ok := w.(map[string]any); ok && m["id"] == id {
			return m
		}
	}
	return nil
}

// route is one API family: the path used for it and how its errors look.
type route struct {
	name      string
	path      string
	anthropic bool
}

var routes = []route{
	{"openai", "/v1/chat/completions", false},
	{"anthropic", "/v1/messages", true},
}

// wantErrorType is the error type clients of each dialect read for each status the relay
// answers itself, written out independently of the relay's table.
func (r route) wantErrorType(status int) string {
	if r.anthropic {
		switch status {
		case 400, 413:
			return "invalid_request_error"
		case 404:
			return "not_found_error"
		case 429:
			return "rate_limit_error"
		case 503:
			return "overloaded_error"
		}
		return "api_error"
	}
	switch status {
	case 400, 404, 413:
		return "invalid_request_error"
	case 429:
		return "rate_limit_error"
	case 502:
		return "upstream_error"
	case 503:
		return "server_error"
	case 504:
		return "timeout_error"
	}
	return "?"
}

// wantErrorCode is the OpenAI code the relay gives a status ("" = none).
func wantErrorCode(status int) string {
	switch status {
	case 404:
		return "model_not_found"
	case 429:
		return "queue_full"
	}
	return ""
}

// checkError asserts a relay-generated error: status, JSON shape of the route's dialect, type,
// code, message (exact unless message is "" ), and Retry-After (whole seconds, 1..60) exactly
// on 429 and 503.
func checkError(t *testing.T, rt route, r result, status int, message string) {
	t.Helper()
	if r.resp.StatusCode != status {
		t.Fatalf("%s: status %d, want %d; body %s", rt.name, r.resp.StatusCode, status, r.body)
	}
	if ct := r.resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: content-type %q, want application/json", rt.name, ct)
	}
	ra := r.resp.Header.Get("Retry-After")
	if status == 429 || status == 503 {
		if n, err := strconv.Atoi(ra); err != nil || n < 1 || n > 60 {
			t.Errorf("%s: Retry-After %q on %d, want 1..60", rt.name, ra, status)
		}
	} else if ra != "" {
		t.Errorf("%s: Retry-After %q on %d, want none", rt.name, ra, status)
	}
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("%s: body %q is not JSON: %v", rt.name, r.body, err)
	}
	e, _ := v["error"].(map[string]any)
	if e == nil {
		t.Fatalf("%s: body %s has no error object", rt.name, r.body)
	}
	if rt.anthropic && v["type"] != "error" {
		t.Errorf("%s: top-level type %v, want \"error\" in %s", rt.name, v["type"], r.body)
	}
	if !rt.anthropic && len(v) != 1 {
		t.Errorf("%s: body %s has fields besides error", rt.name, r.body)
	}
	if e["type"] != rt.wantErrorType(status) {
		t.Errorf("%s: error type %v, want %s (body %s)", rt.name, e["type"], rt.wantErrorType(status), r.body)
	}
	msg, _ := e["message"].(string)
	if message != "" && msg != message {
		t.Errorf("%s: message %q, want %q", rt.name, msg, message)
	}
	if message == "" && msg == "" {
		t.Errorf("%s: empty error message in %s", rt.name, r.body)
	}
	if !rt.anthropic {
		if want := wantErrorCode(status); want != "" && e["code"] != want {
			t.Errorf("%s: code %v, want %s", rt.name, e["code"], want)
		}
	}
}

// body is a chat body for model with a marker the worker can recognize.
func markedBody(model string, stream bool, marker string) string {
	b, _ := json.Marshal(map[string]any{"model": model, "stream": stream, "max_tokens": 8,
		"messages": []any{map[string]string{"role": "user", "content": marker}}})
	return string(b)
}

// hold connects a worker with capacity 1 for model and occupies it with a request; it returns
// the worker, the held request and the client's pending answer.
func hold(t *testing.T, ts *httptest.Server, path, model string) (*liveWorker, protocol.Request, <-chan result) {
	t.Helper()
	w := join(t, ts, reg("busy", []string{model}, 1))
	c := goPost(ts, path, markedBody(model, false, "held"))
	return w, w.request(), c
}

// readN reads exactly n bytes of a streamed body.
func readN(t *testing.T, r io.Reader, n int) string {
	t.Helper()
	buf := make([]byte, n)
	done := make(chan error, 1)
	go func() { _, err := io.ReadFull(r, buf); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("read %d bytes: %v (got %q)", n, err, buf)
		}
	case <-time.After(waitLimit):
		t.Fatalf("%d bytes did not arrive within %v", n, waitLimit)
	}
	return string(buf)
}

// readAll reads a streamed body to its end.
func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	type res struct {
		b   []byte
		err error
	}
	done := make(chan res, 1)
	go func() { b, err := io.ReadAll(r); done <- res{b, err} }()
	select {
	case x := <-done:
		if x.err != nil {
			t.Fatalf("read to end: %v (got %q)", x.err, x.b)
		}
		return string(x.b)
	case <-time.After(waitLimit):
		t.Fatalf("stream did not end within %v", waitLimit)
	}
	return ""
}

// checkStreamError asserts that rest is exactly one SSE error event in the route's dialect
// (with message, unless message is "").
func checkStreamError(t *testing.T, rt route, rest, message string) {
	t.Helper()
	prefix := "data: "
	if rt.anthropic {
		prefix = "event: error\ndata: "
	}
	if !strings.HasPrefix(rest, prefix) || !strings.HasSuffix(rest, "\n\n") || strings.Count(rest, "\n\n") != 1 {
		t.Fatalf("%s: tail of stream %q is not one SSE error event", rt.name, rest)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(rest, prefix), "\n\n")), &v); err != nil {
		t.Fatalf("%s: error event %q: %v", rt.name, rest, err)
	}
	e, _ := v["error"].(map[string]any)
	if e == nil {
		t.Fatalf("%s: error event %q has no error object", rt.name, rest)
	}
	if rt.anthropic {
		if v["type"] != "error" || e["type"] != "api_error" {
			t.Fatalf("anthropic error event %q, want type error / api_error", rest)
		}
	} else if e["type"] != "upstream_error" {
		t.Fatalf("openai error event %q, want type upstream_error", rest)
	} else if c, _ := e["code"].(string); c == "" {
		t.Fatalf("openai error event %q has no code", rest)
	}
	if m, _ := e["message"].(string); (message != "" && m != message) || m == "" {
		t.Fatalf("%s: error event message %q, want %q", rt.name, m, message)
	}
}

// modelIDs lists /v1/models ids.
func modelIDs(t *testing.T, ts *httptest.Server) []string {
	t.Helper()
	_, v := getJSON(t, ts, "/v1/models", "")
	var ids []string
	data, _ := v["data"].([]any)
	for _, d := range data {
		if m, ok := d.(map[string]any); ok {
			id, _ := m["id"].(string)
			ids = append(ids, id)
		}
	}
	return ids
}

// adminWorkerLoad is worker id's reported_load from /admin/workers (token "tok").
func adminWorkerLoad(t *testing.T, ts *httptest.Server, id string) int {
	t.Helper()
	m := adminWorker(t, ts, "tok", id)
	if m == nil {
		return -1
	}
	n, _ := m["reported_load"].(float64)
	return int(n)
}

func waitTimer() <-chan time.Time { return time.After(waitLimit) }

// waitInQueue waits until the queue holds n requests, failing at once if c is answered instead.
func waitInQueue(t *testing.T, ts *httptest.Server, n int, c <-chan result) <-chan result {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for queueDepth(t, ts) != n {
		select {
		case r := <-c:
			if r.err != nil {
				t.Fatalf("http call: %v", r.err)
			}
			t.Fatalf("answered %d %s instead of waiting in the queue", r.resp.StatusCode, r.body)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue depth never reached %d", n)
		}
	}
	return c
}
