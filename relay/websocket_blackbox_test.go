package relay_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"modelrelay/protocol"
	"modelrelay/relay"
)

const (
	authFailed  = "worker authentication failed"
	rateLimited = "worker authentication temporarily rate limited"
	protoError  = "worker registration protocol error"
)

// dialFrom dials the worker endpoint from a chosen loopback source address.
func dialFrom(t *testing.T, ts *httptest.Server, local string, query string, header http.Header) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}).DialContext,
		HandshakeTimeout: waitLimit}
	conn, resp, err := d.Dial(wsURL(ts, query), header)
	if err != nil {
		t.Fatalf("dial from %s: %v", local, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade status %d", resp.StatusCode)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// attempt dials from local and returns how the server closed the connection, or "" reason
// and code 0 when it sent a register_ack (the worker was admitted).
func attempt(t *testing.T, ts *httptest.Server, local, query string, header http.Header) (int, string) {
	t.Helper()
	conn := dialFrom(t, ts, local, query, header)
	conn.WriteMessage(websocket.TextMessage, []byte(reg("w", []string{"m"}, 1)))
	conn.SetReadDeadline(time.Now().Add(waitLimit))
	_, data, err := conn.ReadMessage()
	if err == nil {
		if !strings.Contains(string(data), `"register_ack"`) {
			t.Fatalf("expected register_ack or close, got %s", data)
		}
		conn.Close()
		return 0, ""
	}
	ce, ok := err.(*websocket.CloseError)
	if !ok {
		t.Fatalf("expected a close frame, got %v", err)
	}
	return ce.Code, ce.Text
}

func TestAuthFailureCloses1008(t *testing.T) {
	cases := []struct {
		name   string
		query  string
		header http.Header
	}{
		{"missing secret", "?provider=local", nil},
		{"wrong secret in header", "?provider=local", http.Header{"X-Worker-Secret": {"nope"}}},
		{"wrong secret in query", "?provider=local&worker_secret=nope", nil},
		{"header wins over query", "?provider=local&worker_secret=" + secret, http.Header{"X-Worker-Secret": {"nope"}}},
		{"unknown provider", "?provider=elsewhere", secretHeader()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings()})
			code, reason := attempt(t, ts, "127.0.0.1", tc.query, tc.header)
			if code != websocket.ClosePolicyViolation || reason != authFailed {
				t.Fatalf("close %d %q, want 1008 %q", code, reason, authFailed)
			}
		})
	}
}

func TestAuthAcceptsQuerySecretAndDefaultProvider(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	if code, reason := attempt(t, ts, "127.0.0.1", "?worker_secret="+secret, nil); code != 0 {
		t.Fatalf("query secret without provider: close %d %q, want admitted", code, reason)
	}
}

// A flood of wrong secrets from one address never refuses a correct secret from the same
// address [fix], while the flood's answers are spaced out and, past the hold, cut off.
func TestAuthFloodNeverRefusesACorrectSecret(t *testing.T) {
	tm := quietTimings()
	tm.AuthFailureStep, tm.AuthFailureHold = 100*time.Millisecond, 500*time.Millisecond
	_, ts := startServer(t, relay.Options{Timings: tm})
	wrong := http.Header{"X-Worker-Secret": {"nope"}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed, limited atomic.Int32
	for range 20 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				switch _, reason := attempt(t, ts, "127.0.0.1", "?provider=local", wrong); reason {
				case authFailed:
					failed.Add(1)
				case rateLimited:
					limited.Add(1)
				default:
					t.Errorf("wrong secret answered %q", reason)
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // the flood is under way
	start := time.Now()
	for i := range 10 {
		if code, reason := attempt(t, ts, "127.0.0.1", "?provider=local", secretHeader()); code != 0 {
			t.Errorf("correct secret %d during the flood: close %d %q", i, code, reason)
		}
	}
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	if limited.Load() == 0 {
		t.Errorf("20 concurrent guessers were never told they are rate limited (%d plain failures)", failed.Load())
	}
	// One verdict per step in turn, plus the cut-off ones: far fewer than the guessers sent.
	window := 300*time.Millisecond + elapsed + tm.AuthFailureHold
	if max := int32(window/tm.AuthFailureStep) + 1; failed.Load() > max {
		t.Errorf("%d in-turn failures in %s; the throttle allows %d", failed.Load(), window, max)
	}
}

func TestAuthMissingSecretIsNotCounted(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	for i := 0; i < 5; i++ {
		if code, reason := attempt(t, ts, "127.0.0.1", "?provider=local", nil); code != 1008 || reason != authFailed {
			t.Fatalf("missing secret %d: close %d %q", i+1, code, reason)
		}
	}
	if code, reason := attempt(t, ts, "127.0.0.1", "?provider=local", secretHeader()); code != 0 {
		t.Fatalf("correct secret after missing ones: close %d %q, want admitted", code, reason)
	}
}

// The throttle is keyed by the peer IP: another address is not queued behind a guesser, and
// an untrusted peer's forwarded header changes nothing.
func TestAuthThrottleIsKeyedByPeerIP(t *testing.T) {
	tm := quietTimings()
	tm.AuthFailureStep, tm.AuthFailureHold = 400*time.Millisecond, time.Minute
	_, ts := startServer(t, relay.Options{Timings: tm})
	queued := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 5 {
		h := http.Header{"X-Worker-Secret": {"nope"}, "X-Forwarded-For": {"10.0.0." + strconv.Itoa(i+1)}}
		wg.Go(func() { attempt(t, ts, "127.0.0.1", "?provider=local", h) })
	}
	go func() { wg.Wait(); close(queued) }()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if code, reason := attempt(t, ts, "127.0.0.2", "?provider=local", http.Header{"X-Worker-Secret": {"nope"}}); code != 1008 || reason != authFailed {
		t.Fatalf("other peer: close %d %q", code, reason)
	}
	if took := time.Since(start); took >= 5*tm.AuthFailureStep {
		t.Errorf("another peer's failure waited %s behind 127.0.0.1's", took)
	}
	select {
	case <-queued:
		t.Fatal("five failures from 127.0.0.1 (with made-up forwarded addresses) were not queued behind each other")
	default:
	}
	<-queued
}

// Behind a trusted proxy the forwarded client is the key: two clients do not share a queue.
func TestAuthThrottleUsesForwardedForFromTrustedProxy(t *testing.T) {
	tm := quietTimings()
	tm.AuthFailureStep, tm.AuthFailureHold = 400*time.Millisecond, time.Minute
	_, ts := startServer(t, relay.Options{Timings: tm, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			attempt(t, ts, "127.0.0.1", "?provider=local", http.Header{"X-Worker-Secret": {"nope"}, "X-Forwarded-For": {"192.0.2.1"}})
		})
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	attempt(t, ts, "127.0.0.1", "?provider=local", http.Header{"X-Worker-Secret": {"nope"}, "X-Forwarded-For": {"192.0.2.2"}})
	if took := time.Since(start); took >= 4*tm.AuthFailureStep {
		t.Errorf("client 192.0.2.2 waited %s behind 192.0.2.1", took)
	}
	wg.Wait()
}

func TestRegistrationProtocolErrors(t *testing.T) {
	cases := []struct {
		name  string
		kind  int
		frame string
	}{
		{"first frame not register", websocket.TextMessage, `{"type":"pong","current_load":0}`},
		{"binary first frame", websocket.BinaryMessage, reg("w", []string{"m"}, 1)},
		{"wrong protocol_version", websocket.TextMessage, regFrame(map[string]any{"worker_name": "w", "models": []string{"m"},
			"max_concurrent": 1, "protocol_version": "1999-01-old"})},
		{"unparseable frame", websocket.TextMessage, `{"type":"register",`},
		{"not an object", websocket.TextMessage, `[1,2,3]`},
		{"unknown type", websocket.TextMessage, `{"type":"hello"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings()})
			conn := dialWorker(t, ts)
			if err := conn.WriteMessage(tc.kind, []byte(tc.frame)); err != nil {
				t.Fatal(err)
			}
			if code, reason := expectClose(t, conn); code != websocket.CloseProtocolError || reason != protoError {
				t.Fatalf("close %d %q, want 1002 %q", code, reason, protoError)
			}
		})
	}
}

func TestProtocolErrorsAfterRegistration(t *testing.T) {
	cases := []struct {
		name  string
		kind  int
		frame string
	}{
		{"binary frame", websocket.BinaryMessage, `{"type":"pong","current_load":0}`},
		{"second register", websocket.TextMessage, reg("again", []string{"m"}, 1)},
		{"unparseable frame", websocket.TextMessage, `{"type":`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings()})
			w := join(t, ts, reg("w", []string{"m"}, 1))
			w.sendRaw(tc.kind, []byte(tc.frame))
			if code, reason, _ := w.closeFrame(); code != websocket.CloseProtocolError || reason != protoError {
				t.Fatalf("close %d %q, want 1002 %q", code, reason, protoError)
			}
			eventually(t, "worker gone from /health", func() bool { return !healthHasWorker(t, ts, w.ack.WorkerID) })
		})
	}
}

func TestSilenceAfterUpgradeCloses1002(t *testing.T) {
	tm := quietTimings()
	tm.RegisterTimeout = 200 * time.Millisecond
	_, ts := startServer(t, relay.Options{Timings: tm})
	conn := dialWorker(t, ts)
	if code, reason := expectClose(t, conn); code != websocket.CloseProtocolError || reason != protoError {
		t.Fatalf("close %d %q, want 1002 %q", code, reason, protoError)
	}
}

func TestRequireProtocolVersion(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), RequireProtocolVersion: true})
	conn := dialWorker(t, ts)
	conn.WriteMessage(websocket.TextMessage, []byte(regFrame(map[string]any{"worker_name": "w", "models": []string{"m"}, "max_concurrent": 1})))
	if code, reason := expectClose(t, conn); code != websocket.CloseProtocolError || reason != protoError {
		t.Fatalf("register without version: close %d %q, want 1002 %q", code, reason, protoError)
	}
	w := join(t, ts, reg("w", []string{"m"}, 1))
	if w.ack.ProtocolVersion == nil || *w.ack.ProtocolVersion != protocol.Version {
		t.Fatalf("ack %s", w.rawAck)
	}
}

func TestHeartbeatTimeoutCloses1000(t *testing.T) {
	tm := quietTimings()
	tm.HeartbeatTimeout = 300 * time.Millisecond
	_, ts := startServer(t, relay.Options{Timings: tm})
	w := joinNoWait(t, ts, reg("silent", []string{"m"}, 1))
	if code, reason, _ := w.closeFrame(); code != websocket.CloseNormalClosure || reason != "worker heartbeat timed out" {
		t.Fatalf("close %d %q, want 1000 \"worker heartbeat timed out\"", code, reason)
	}
}

func TestHeartbeatPingsAndPongsKeepWorkerAlive(t *testing.T) {
	tm := quietTimings()
	tm.HeartbeatInterval = 40 * time.Millisecond
	tm.HeartbeatTimeout = 600 * time.Millisecond
	_, ts := startServer(t, relay.Options{Timings: tm})
	w := join(t, ts, reg("chatty", []string{"m"}, 1))
	// A stream is running: pings must still come (they are unconditional).
	sc := goStream(context.Background(), ts, "/v1/chat/completions", chatBody("m", true))
	req := w.request()
	w.chunk(req.RequestID, "data: 0\n\n")
	r := wait(t, sc)
	defer r.resp.Body.Close()
	readN(t, r.resp.Body, len("data: 0\n\n"))
	// Answer pings for several heartbeat timeouts; the session must survive.
	for i := 0; i < 40; i++ {
		select {
		case p := <-w.pings:
			if p.TimestampUnixMs == nil {
				t.Fatalf("ping without timestamp")
			}
			if err := w.conn.WriteMessage(websocket.TextMessage, mustMarshal(protocol.Pong{CurrentLoad: 1, TimestampUnixMs: p.TimestampUnixMs})); err != nil {
				<-w.closed
				t.Fatalf("pong %d: %v; server closed %d %q", i, err, w.code, w.text)
			}
		case <-w.closed:
			t.Fatalf("closed after %d pongs: %d %q", i, w.code, w.text)
		case <-time.After(waitLimit):
			t.Fatal("no ping")
		}
	}
	w.send(protocol.ResponseComplete{RequestID: req.RequestID, StatusCode: 200})
	if rest := readAll(t, r.resp.Body); rest != "" {
		t.Fatalf("rest %q", rest)
	}
}

func TestWorkerIDsCountFromOne(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	for i, want := range []string{"worker-1", "worker-2", "worker-3"} {
		w := joinNoWait(t, ts, reg("w", []string{"m"}, 1))
		if w.ack.WorkerID != want {
			t.Fatalf("worker %d id %q, want %q", i+1, w.ack.WorkerID, want)
		}
		if i == 1 {
			w.vanish() // ids are not reused
		}
	}
}

func TestAckEchoesOrOmitsProtocolVersion(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	with := joinNoWait(t, ts, reg("w", []string{"m"}, 1))
	if with.ack.ProtocolVersion == nil || *with.ack.ProtocolVersion != protocol.Version {
		t.Fatalf("ack %s does not echo the version", with.rawAck)
	}
	without := joinNoWait(t, ts, regFrame(map[string]any{"worker_name": "w", "models": []string{"m"}, "max_concurrent": 1}))
	if strings.Contains(string(without.rawAck), "protocol_version") {
		t.Fatalf("ack %s has protocol_version for a register without one", without.rawAck)
	}
	if strings.Contains(string(without.rawAck), "warnings") {
		t.Fatalf("ack %s has warnings for a clean register", without.rawAck)
	}
}

func TestAckWarningsAndSanitizing(t *testing.T) {
	long := strings.Repeat("é", 129)
	cases := []struct {
		name      string
		register  string
		models    []string
		warnings  []string
		storeName string
	}{
		{"clean", reg(" gpu ", []string{"a"}, 1), []string{"a"}, nil, "gpu"},
		{"trim and dedup", reg("w", []string{" a ", "b", "a", "", "  ", "b ", "c"}, 1), []string{"a", "b", "c"}, nil, "w"},
		{"empty name", reg("   ", []string{"a"}, 1), []string{"a"}, []string{"worker_name was empty after trimming"}, ""},
		{"long name", reg(long, []string{"a"}, 1), []string{"a"}, []string{"worker_name truncated to 128 characters"}, strings.Repeat("é", 128)},
		{"no models", reg("w", []string{" ", ""}, 1), []string{}, []string{"worker registered without any routable models"}, "w"},
		{"truncated list", reg("w", []string{"a", "b", "a", "c", "d"}, 1), []string{"a", "b", "c"}, []string{"model list truncated to 3 entries"}, "w"},
		{"all warnings in order", reg("", []string{"a", "b", "c", "d"}, 1), []string{"a", "b", "c"},
			[]string{"worker_name was empty after trimming", "model list truncated to 3 entries"}, ""},
		{"long name and no models", reg(long+"x", nil, 1), []string{},
			[]string{"worker_name truncated to 128 characters", "worker registered without any routable models"}, strings.Repeat("é", 128)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings(), MaxModelsPerWorker: 3, AdminToken: "tok"})
			w := joinNoWait(t, ts, tc.register)
			if !equalStrings(w.ack.Models, tc.models) {
				t.Errorf("models %q, want %q", w.ack.Models, tc.models)
			}
			if !equalStrings(w.ack.Warnings, tc.warnings) {
				t.Errorf("warnings %q, want %q", w.ack.Warnings, tc.warnings)
			}
			eventually(t, "worker listed", func() bool { return adminWorker(t, ts, "tok", w.ack.WorkerID) != nil })
			if got := adminWorker(t, ts, "tok", w.ack.WorkerID)["worker_name"]; got != tc.storeName {
				t.Errorf("stored name %q, want %q", got, tc.storeName)
			}
		})
	}
}

func TestMaxConcurrentZeroMeansOne(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), AdminToken: "tok"})
	w := join(t, ts, reg("w", []string{"m"}, 0))
	if got := adminWorker(t, ts, "tok", w.ack.WorkerID)["max_concurrent"]; got != 1.0 {
		t.Fatalf("max_concurrent %v, want 1", got)
	}
	first := goPost(ts, "/v1/chat/completions", markedBody("m", false, "first"))
	r1 := w.request()
	second := goPost(ts, "/v1/chat/completions", markedBody("m", false, "second"))
	waitQueueDepth(t, ts, 1) // the second waits: capacity is one
	w.complete(r1.RequestID, 200, nil, "1")
	r2 := w.request()
	if !strings.Contains(r2.Body, "second") {
		t.Fatalf("second request body %q", r2.Body)
	}
	w.complete(r2.RequestID, 200, nil, "2")
	wait(t, first)
	wait(t, second)
}

func TestRequestRightAfterAckIsRouted(t *testing.T) {
	// A worker that got its register_ack is part of the pool: a request sent right after must
	// reach it, not 404 because the worker joined the pool a moment later.
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	for i := 0; i < 100; i++ {
		model := fmt.Sprintf("model-%d", i)
		w := joinNoWait(t, ts, reg("w", []string{model}, 1))
		c := goPost(ts, "/v1/chat/completions", chatBody(model, false))
		select {
		case m := <-w.frames:
			req, ok := m.(protocol.Request)
			if !ok {
				t.Fatalf("attempt %d: got %#v", i, m)
			}
			w.complete(req.RequestID, 200, nil, "{}")
			wait(t, c)
		case r := <-c:
			t.Fatalf("attempt %d: request sent after register_ack answered %d %s instead of reaching the worker", i, r.resp.StatusCode, r.body)
		case <-time.After(waitLimit):
			t.Fatalf("attempt %d: nothing happened", i)
		}
		w.conn.Close()
	}
}

func TestWorkerJoiningDrainingServerGetsAckThenGracefulShutdown(t *testing.T) {
	srv, ts := startServer(t, relay.Options{Timings: quietTimings(), DrainTimeout: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srv.Drain(ctx)
	w := joinNoWait(t, ts, reg("late", []string{"m"}, 1))
	code, reason, before := w.closeFrame()
	if len(before) == 0 {
		t.Fatalf("a worker joining a draining server got no graceful_shutdown (close %d %q)", code, reason)
	}
	gs, ok := before[0].(protocol.GracefulShutdown)
	if !ok || gs.Reason == nil || *gs.Reason != "server shutting down" {
		t.Fatalf("first frame after ack %#v, want graceful_shutdown reason \"server shutting down\"", before[0])
	}
	if code != 1000 || reason != "graceful shutdown complete" {
		t.Fatalf("close %d %q, want 1000 \"graceful shutdown complete\"", code, reason)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// adminWorker returns the /admin/workers entry for id, or nil.
func adminWorker(t *testing.T, ts *httptest.Server, token, id string) map[string]any {
	t.Helper()
	_, v := getJSON(t, ts, "/admin/workers", token)
	list, _ := v["workers"].([]any)
	for _, e := range list {
		if m, ok := e.(map[string]any); ok && m["worker_id"] == id {
			return m
		}
	}
	return nil
}

func mustMarshal(m protocol.Message) []byte {
	b, err := protocol.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func TestWebSocketPingsCountAsActivity(t *testing.T) {
	tm := quietTimings()
	tm.HeartbeatTimeout = 300 * time.Millisecond
	_, ts := startServer(t, relay.Options{Timings: tm})
	w := join(t, ts, reg("ws-pinger", []string{"m"}, 1))
	tick := time.NewTicker(30 * time.Millisecond)
	defer tick.Stop()
	until := time.After(1200 * time.Millisecond) // four heartbeat timeouts
	last, maxGap := time.Now(), time.Duration(0)
	for done := false; !done; {
		select {
		case <-tick.C:
			if err := w.conn.WriteControl(websocket.PingMessage, []byte("hi"), time.Now().Add(time.Second)); err != nil {
				<-w.closed
				t.Fatalf("ping: %v; server closed %d %q", err, w.code, w.text)
			}
			maxGap = max(maxGap, time.Since(last))
			last = time.Now()
		case <-w.closed:
			t.Fatalf("closed despite WebSocket pings (last ping %v ago, largest gap %v): %d %q", time.Since(last), maxGap, w.code, w.text)
		case <-until:
			done = true
		}
	}
	if !healthHasWorker(t, ts, w.ack.WorkerID) {
		t.Fatal("worker dropped")
	}
}

func TestUnknownJSONFieldsIgnored(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w := join(t, ts, regFrame(map[string]any{"worker_name": "w", "models": []string{"m"}, "max_concurrent": 1,
		"protocol_version": protocol.Version, "gpu": map[string]any{"kind": "h100"}, "labels": []string{"x"}}))
	c := goPost(ts, "/v1/chat/completions", chatBody("m", false))
	req := w.request()
	w.sendRaw(websocket.TextMessage, []byte(`{"type":"pong","current_load":0,"future_field":true}`))
	w.sendRaw(websocket.TextMessage, []byte(`{"type":"response_complete","request_id":"`+req.RequestID+
		`","status_code":200,"body":"ok","extra":{"a":[1,2]}}`))
	if r := wait(t, c); r.resp.StatusCode != 200 || string(r.body) != "ok" {
		t.Fatalf("got %d %q", r.resp.StatusCode, r.body)
	}
}
