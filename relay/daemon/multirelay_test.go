package daemon

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"modelrelay/protocol"
)

func TestSlotsHandOverOldestFirst(t *testing.T) {
	s := newSlots(1)
	if !s.tryTake() || s.tryTake() {
		t.Fatal("one slot: the first take succeeds, the second fails")
	}
	got := make(chan int, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if s.take(context.Background(), wait) {
				got <- i
			}
		})
		waitFor(t, "waiter queued", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.waiters) == i+1 })
	}
	s.give()
	if first := <-got; first != 0 {
		t.Fatalf("slot went to waiter %d; want the oldest", first)
	}
	if s.load() != 1 {
		t.Fatalf("load = %d after a hand-over; want 1", s.load())
	}
	s.give()
	<-got
	wg.Wait()
	s.give()
	if s.load() != 0 {
		t.Fatalf("load = %d after every slot came back", s.load())
	}
}

func TestSlotsWaitIsBounded(t *testing.T) {
	s := newSlots(1)
	s.tryTake()
	if s.take(context.Background(), 0) {
		t.Fatal("took a slot without waiting while none was free")
	}
	if s.take(context.Background(), 20*time.Millisecond) {
		t.Fatal("took a slot nobody freed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s.take(ctx, wait) {
		t.Fatal("a cancelled waiter took a slot")
	}
	if len(s.waiters) != 0 || s.load() != 1 {
		t.Fatalf("waiters %d, load %d; want none left and the one slot taken", len(s.waiters), s.load())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// heldBackend answers each request only when the test releases it, reporting arrivals.
type heldBackend struct {
	srv     *httptest.Server
	arrived chan string // the X-Request-Tag of each request, as it arrives
	release chan struct{}
}

func newHeldBackend(t *testing.T) *heldBackend {
	b := &heldBackend{arrived: make(chan string, 64), release: make(chan struct{}, 64)}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read to the end: only then does net/http notice a client that goes away.
		io.Copy(io.Discard, r.Body)
		b.arrived <- r.Header.Get("X-Request-Tag")
		select {
		case <-b.release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *heldBackend) next(t *testing.T) string {
	t.Helper()
	select {
	case tag := <-b.arrived:
		return tag
	case <-time.After(wait):
		t.Fatal("no request reached the backend")
		return ""
	}
}

func (b *heldBackend) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case tag := <-b.arrived:
		t.Fatalf("request %q reached the backend while every slot was taken", tag)
	case <-time.After(d):
	}
}

func tagged(id string) protocol.Request {
	return protocol.Request{RequestID: id, Model: "m1", EndpointPath: "/v1/chat/completions",
		Body: "{}", Headers: protocol.Headers{"x-request-tag": id}}
}

// loadReport reads frames until a models_update with the wanted load arrives.
func loadReport(t *testing.T, c *peerConn, load uint32) protocol.ModelsUpdate {
	t.Helper()
	for {
		switch m := c.next(t).(type) {
		case protocol.ModelsUpdate:
			if m.CurrentLoad == load {
				return m
			}
		case protocol.ResponseChunk, protocol.ResponseComplete:
			t.Fatalf("unexpected %s while waiting for load %d", m.MessageType(), load)
		}
	}
}

// completion waits for the response_complete of id, passing over chunks and load reports.
func completion(t *testing.T, c *peerConn, id string) protocol.ResponseComplete {
	t.Helper()
	for {
		switch m := c.next(t).(type) {
		case protocol.ResponseComplete:
			if m.RequestID == id {
				return m
			}
			t.Fatalf("completion for %s while waiting for %s", m.RequestID, id)
		case protocol.ResponseChunk, protocol.ModelsUpdate:
		default:
			t.Fatalf("unexpected %s frame while waiting for %s", m.MessageType(), id)
		}
	}
}

// twoRelays starts a daemon with max_concurrency 2 attached to two scripted relays.
func twoRelays(t *testing.T, backend string) (a, b *peerConn) {
	pa, pb := newPeer(t), newPeer(t)
	cfg := testConfig(pa, backend)
	cfg.ProxyURL = pa.srv.URL + "," + pb.srv.URL
	cfg.MaxConcurrency = 2
	start(t, cfg)
	a, _ = pa.registered(t)
	b, _ = pb.registered(t)
	return a, b
}

func TestSeveralRelaysShareTheSlots(t *testing.T) {
	backend := newHeldBackend(t)
	a, b := twoRelays(t, backend.srv.URL)

	a.send(t, tagged("a1"))
	a.send(t, tagged("a2"))
	backend.next(t)
	backend.next(t)
	// B is told the slots it does not know about are taken.
	if upd := loadReport(t, b, 2); strings.Join(upd.Models, ",") != "m1" {
		t.Fatalf("load report to the other relay = %+v; want its models and load 2", upd)
	}

	// B hands out a request anyway (its report was late): it waits for a slot, not a 503.
	b.send(t, tagged("b1"))
	backend.none(t, 100*time.Millisecond)
	backend.release <- struct{}{}
	if got := backend.next(t); got != "b1" {
		t.Fatalf("the freed slot went to %q; want the waiting b1", got)
	}
	// One of A's requests completed (A's server counts its own requests; B's report came
	// from the daemon).
	var done protocol.ResponseComplete
	for done.RequestID == "" {
		if m, ok := a.next(t).(protocol.ResponseComplete); ok {
			done = m
		}
	}
	if done.StatusCode != 200 {
		t.Fatalf("a's request answered %d", done.StatusCode)
	}
	backend.release <- struct{}{}
	backend.release <- struct{}{}
	if rc := completion(t, b, "b1"); rc.StatusCode != 200 {
		t.Fatalf("b1 answered %d after waiting for a slot", rc.StatusCode)
	}
	// (B's last report may say 1 or 0: b1's own release is B's server's to count, and the
	// report of A's last release may be read before or after it.)
}

func TestSlotWaitEndsInBusy(t *testing.T) {
	backend := newHeldBackend(t)
	a, b := twoRelays(t, backend.srv.URL)
	a.send(t, tagged("a1"))
	a.send(t, tagged("a2"))
	backend.next(t)
	backend.next(t)
	loadReport(t, b, 2)

	b.send(t, tagged("b1"))
	rc := completion(t, b, "b1") // after slotWait (2 s)
	if rc.StatusCode != 503 || rc.Body == nil || !strings.Contains(*rc.Body, "worker_busy") {
		t.Fatalf("b1 after the slot wait = %d %v; want 503 worker_busy", rc.StatusCode, rc.Body)
	}
	backend.none(t, 50*time.Millisecond)

	// A cancel while waiting frees the server's slot at once.
	b.send(t, tagged("b2"))
	b.send(t, protocol.Cancel{RequestID: "b2", Reason: protocol.CancelClientDisconnect})
	if rc := completion(t, b, "b2"); rc.StatusCode != cancelledStatus {
		t.Fatalf("b2 cancelled while waiting = %d; want %d", rc.StatusCode, cancelledStatus)
	}
	backend.release <- struct{}{}
	backend.release <- struct{}{}
	for done := 0; done < 2; {
		if _, ok := a.next(t).(protocol.ResponseComplete); ok {
			done++
		}
	}
}

// TestRustFramesAgainstSeveralRelays drives one session of a daemon attached to two relays
// with server frames written byte for byte as the Rust server's serde emits them, and checks
// the daemon's frames, load reports included, are in the Rust worker's exact format.
func TestRustFramesAgainstSeveralRelays(t *testing.T) {
	backend := newHeldBackend(t)
	pa, pb := newPeer(t), newPeer(t)
	cfg := testConfig(pa, backend.srv.URL)
	cfg.ProxyURL = pa.srv.URL + "," + pb.srv.URL
	cfg.MaxConcurrency = 2
	start(t, cfg)
	a, b := pa.accept(t), pb.accept(t)

	raw := func(c *peerConn, frame string) {
		t.Helper()
		if err := c.ws.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
			t.Fatal(err)
		}
	}
	// The frames decode into messages that re-encode byte for byte (TestFramesRoundTripByteForByte),
	// so comparing the re-encoding compares what the daemon wrote, field order included.
	want := func(c *peerConn, frame string) {
		t.Helper()
		got, err := protocol.Marshal(c.next(t))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != frame {
			t.Fatalf("daemon wrote\n %s\nwant\n %s", got, frame)
		}
	}
	want(a, `{"type":"register","worker_name":"test-worker","models":["m1"],"max_concurrent":2,"protocol_version":"2026-04-bridge-v1","current_load":0}`)
	want(b, `{"type":"register","worker_name":"test-worker","models":["m1"],"max_concurrent":2,"protocol_version":"2026-04-bridge-v1","current_load":0}`)
	raw(a, `{"type":"register_ack","worker_id":"worker-1","models":["m1"],"protocol_version":"2026-04-bridge-v1"}`)
	raw(b, `{"type":"register_ack","worker_id":"worker-7","models":["m1"],"warnings":["duplicate model dropped"]}`)

	raw(a, `{"type":"ping","timestamp_unix_ms":1712345678901}`)
	want(a, `{"type":"pong","current_load":0,"timestamp_unix_ms":1712345678901}`)

	raw(a, `{"type":"request","request_id":"r-001","model":"m1","endpoint_path":"/v1/chat/completions","is_streaming":false,"body":"{}","headers":{"x-request-tag":"r-001"}}`)
	backend.next(t)
	want(b, `{"type":"models_update","models":["m1"],"current_load":1}`)
	raw(a, `{"type":"ping"}`)
	want(a, `{"type":"pong","current_load":1}`)
	backend.release <- struct{}{}
	rc, _ := a.complete(t, "r-001")
	if rc.StatusCode != 200 || rc.Body == nil || *rc.Body != `{"ok":true}` {
		t.Fatalf("r-001 = %d %v", rc.StatusCode, rc.Body)
	}
	want(b, `{"type":"models_update","models":["m1"],"current_load":0}`)

	raw(a, `{"type":"request","request_id":"r-002","model":"m1","endpoint_path":"/v1/chat/completions","is_streaming":true,"body":"{}","headers":{"x-request-tag":"r-002"}}`)
	backend.next(t)
	raw(a, `{"type":"cancel","request_id":"r-002","reason":{"other":"stream exceeded size limit"}}`)
	want(a, `{"type":"response_complete","request_id":"r-002","status_code":499,"body":""}`)

	raw(a, `{"type":"models_refresh","reason":"periodic"}`)
	want(a, `{"type":"models_update","models":["m1"],"current_load":0}`)

	raw(a, `{"type":"graceful_shutdown","reason":"maintenance","drain_timeout_secs":30}`)
	raw(a, `{"type":"request","request_id":"r-003","model":"m1","endpoint_path":"/v1/chat/completions","is_streaming":false,"body":"{}"}`)
	if rc, _ := a.complete(t, "r-003"); rc.StatusCode != 503 || !strings.Contains(*rc.Body, "worker_draining") {
		t.Fatalf("request after graceful_shutdown = %d %v", rc.StatusCode, rc.Body)
	}
	// The other relay still gets work: the drain was one server's.
	raw(b, `{"type":"request","request_id":"b-1","model":"m1","endpoint_path":"/v1/chat/completions","is_streaming":false,"body":"{}","headers":{"x-request-tag":"b-1"}}`)
	backend.next(t)
	backend.release <- struct{}{}
	if rc, _ := b.complete(t, "b-1"); rc.StatusCode != 200 {
		t.Fatalf("b-1 = %d", rc.StatusCode)
	}
}

// A wildcard worker whose backend did not answer discovery at connect registers "*", keeps
// asking in the background, and advertises the real models once the backend answers.
func TestFailedDiscoveryIsRetriedInTheBackground(t *testing.T) {
	var up atomic.Bool
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"llama-3-8b"},{"id":"qwen-7b"}]}`)
	}))
	t.Cleanup(backend.Close)
	p := newPeer(t)
	cfg := testConfig(p, backend.URL)
	cfg.Models = []string{"*"}
	start(t, cfg)
	c, reg := p.registered(t)
	if strings.Join(reg.Models, ",") != "*" {
		t.Fatalf("registered %v with the backend down; want the wildcard", reg.Models)
	}
	up.Store(true)
	upd := expect[protocol.ModelsUpdate](t, c) // the first retry comes after rediscoverMin
	if got := strings.Join(upd.Models, ","); got != "llama-3-8b,qwen-7b" {
		t.Fatalf("advertised %q once the backend answered; want its models", got)
	}
}
