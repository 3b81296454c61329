package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"modelrelay/protocol"
)

func TestRegisterFrameAndHandshake(t *testing.T) {
	p := newPeer(t)
	cfg := testConfig(p, "http://127.0.0.1:1")
	cfg.Provider = "team a/b"
	cfg.MaxConcurrency = 3
	cfg.Models = []string{" m1 ", "m2", "m1", ""}
	start(t, cfg)
	c := p.accept(t)
	if got := c.req.Header.Get("x-worker-secret"); got != "s3cret" {
		t.Errorf("x-worker-secret = %q", got)
	}
	if got := c.req.URL.Query().Get("provider"); got != "team a/b" {
		t.Errorf("provider = %q", got)
	}
	if c.req.URL.Path != "/v1/worker/connect" {
		t.Errorf("path = %q", c.req.URL.Path)
	}
	reg := expect[protocol.Register](t, c)
	if reg.WorkerName != "test-worker" || reg.MaxConcurrent != 3 ||
		strings.Join(reg.Models, ",") != "m1,m2" ||
		reg.ProtocolVersion == nil || *reg.ProtocolVersion != protocol.Version ||
		reg.CurrentLoad == nil || *reg.CurrentLoad != 0 {
		t.Errorf("register = %+v", reg)
	}
}

func TestPingPongEchoesTimestampAndLoad(t *testing.T) {
	p := newPeer(t)
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer backend.Close()
	defer close(release)
	cfg := testConfig(p, backend.URL)
	cfg.MaxConcurrency = 2
	start(t, cfg)
	c, _ := p.registered(t)

	c.send(t, protocol.Ping{TimestampUnixMs: protocol.Ptr(uint64(1234))})
	pong := expect[protocol.Pong](t, c)
	if pong.CurrentLoad != 0 || pong.TimestampUnixMs == nil || *pong.TimestampUnixMs != 1234 {
		t.Fatalf("idle pong = %+v", pong)
	}
	c.send(t, protocol.Request{RequestID: "r1", Model: "m1", EndpointPath: "/v1/chat/completions", Body: "{}"})
	// The load becomes 1 once the request is admitted; ping until the daemon says so.
	deadline := time.Now().Add(wait)
	for {
		c.send(t, protocol.Ping{})
		pong = expect[protocol.Pong](t, c)
		if pong.TimestampUnixMs != nil {
			t.Fatalf("pong invented a timestamp: %+v", pong)
		}
		if pong.CurrentLoad == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("load never reached 1")
		}
	}
}

func TestNonStreamingRelaysStatusHeadersAndBody(t *testing.T) {
	type seen struct {
		path, body string
		header     http.Header
	}
	got := make(chan seen, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.URL.Path, string(b), r.Header.Clone()}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"slow down ☃"}`)
	}))
	defer backend.Close()
	p := newPeer(t)
	start(t, testConfig(p, backend.URL+"/"))
	c, _ := p.registered(t)

	body := `{"model":"m1","messages":[{"role":"user","content":"héllo <&> \"q\""}]}`
	c.send(t, protocol.Request{RequestID: "r1", Model: "m1", EndpointPath: "/v1/chat/completions",
		Body: body, Headers: protocol.Headers{
			"authorization": "Bearer k", "x-custom": "v", "host": "client.example",
			"content-length": "999", "connection": "x-hop", "x-hop": "1", "keep-alive": "5",
			"accept-encoding": "gzip", "transfer-encoding": "chunked", "bad\nname": "x"}})
	rc, chunks := c.complete(t, "r1")
	s := <-got
	if s.path != "/v1/chat/completions" || s.body != body {
		t.Errorf("backend saw path %q body %q", s.path, s.body)
	}
	for _, h := range []string{"X-Hop", "Keep-Alive", "Accept-Encoding", "Connection"} {
		if s.header.Get(h) != "" {
			t.Errorf("backend received %s: %q", h, s.header.Get(h))
		}
	}
	if s.header.Get("Authorization") != "Bearer k" || s.header.Get("X-Custom") != "v" {
		t.Errorf("end-to-end headers lost: %v", s.header)
	}
	if len(chunks) != 0 {
		t.Errorf("non-streaming request produced chunks %q", chunks)
	}
	if rc.StatusCode != 429 || rc.Body == nil || *rc.Body != `{"error":"slow down ☃"}` {
		t.Errorf("complete = %d %v", rc.StatusCode, rc.Body)
	}
	if rc.Headers["x-multi"] != "a, b" || rc.Headers["retry-after"] != "7" ||
		rc.Headers["content-type"] != "application/json" || rc.Headers["content-length"] != "" {
		t.Errorf("headers = %v", rc.Headers)
	}
}

// TestStreamingKeepsRunesWhole makes the backend split "é" and "😀" across two writes and only
// write the second half after the daemon relayed the first, so they are two backend reads.
func TestStreamingKeepsRunesWhole(t *testing.T) {
	parts := [][]byte{
		[]byte("data: h\xc3"), []byte("\xa9llo \xf0\x9f"), []byte("\x98\x80 bye\n\n"),
	}
	var want strings.Builder
	for _, part := range parts {
		want.Write(part)
	}
	relayed := make(chan struct{}, len(parts))
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i, part := range parts {
			w.Write(part)
			w.(http.Flusher).Flush()
			if i < len(parts)-1 {
				select {
				case <-relayed:
				case <-r.Context().Done():
					return
				}
			}
		}
	}))
	defer backend.Close()
	p := newPeer(t)
	start(t, testConfig(p, backend.URL))
	c, _ := p.registered(t)
	c.send(t, protocol.Request{RequestID: "s1", Model: "m1", EndpointPath: "/v1/chat/completions",
		IsStreaming: true, Body: `{"stream":true}`})

	var chunks []string
	for {
		m := c.next(t)
		if ch, ok := m.(protocol.ResponseChunk); ok {
			if !utf8.ValidString(ch.Chunk) {
				t.Errorf("chunk %q is not valid UTF-8", ch.Chunk)
			}
			chunks = append(chunks, ch.Chunk)
			relayed <- struct{}{}
			continue
		}
		rc, ok := m.(protocol.ResponseComplete)
		if !ok {
			t.Fatalf("unexpected %s", m.MessageType())
		}
		if rc.StatusCode != 200 || rc.Body == nil || *rc.Body != "" || rc.Headers["content-type"] != "text/event-stream" {
			t.Errorf("complete = %+v", rc)
		}
		break
	}
	if got := strings.Join(chunks, ""); got != want.String() {
		t.Errorf("stream = %q, want %q", got, want.String())
	}
	if len(chunks) < len(parts) {
		t.Errorf("want one chunk per backend read, got %q", chunks)
	}
}

func TestStreamingRequestRefusedByBackendIsRelayedWhole(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":"bad"}`)
	}))
	defer backend.Close()
	p := newPeer(t)
	start(t, testConfig(p, backend.URL))
	c, _ := p.registered(t)
	c.send(t, protocol.Request{RequestID: "s1", Model: "m1", EndpointPath: "/v1/chat/completions",
		IsStreaming: true, Body: `{}`})
	rc, chunks := c.complete(t, "s1")
	if len(chunks) != 0 || rc.StatusCode != 400 || rc.Body == nil || *rc.Body != `{"error":"bad"}` {
		t.Errorf("got chunks %q complete %d %v", chunks, rc.StatusCode, rc.Body)
	}
}

func TestBackendDownIs502AndSessionLives(t *testing.T) {
	// A port that was just free: connecting is refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	p := newPeer(t)
	start(t, testConfig(p, dead))
	c, _ := p.registered(t)
	for i, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		id := fmt.Sprintf("r%d", i)
		c.send(t, protocol.Request{RequestID: id, Model: "m1", EndpointPath: path, Body: "{}"})
		rc, _ := c.complete(t, id)
		if rc.StatusCode != 502 || rc.Body == nil || rc.Headers["content-type"] != "application/json" {
			t.Fatalf("complete = %+v", rc)
		}
		var body map[string]any
		if err := json.Unmarshal([]byte(*rc.Body), &body); err != nil {
			t.Fatalf("body %q: %v", *rc.Body, err)
		}
		if path == "/v1/messages" && body["type"] != "error" {
			t.Errorf("anthropic route got %s", *rc.Body)
		}
		if strings.Contains(*rc.Body, l.Addr().String()) {
			t.Errorf("error body leaks the backend address: %s", *rc.Body)
		}
	}
	c.send(t, protocol.Ping{})
	expect[protocol.Pong](t, c)
	select {
	case extra := <-p.conns:
		t.Fatalf("daemon reconnected (%v)", extra.req.URL)
	default:
	}
}

func TestBackendResetMidStreamEndsRequestOnly(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer backend.Close()
	p := newPeer(t)
	start(t, testConfig(p, backend.URL))
	c, _ := p.registered(t)
	c.send(t, protocol.Request{RequestID: "s1", Model: "m1", EndpointPath: "/v1/chat/completions",
		IsStreaming: true, Body: `{}`})
	rc, chunks := c.complete(t, "s1")
	if strings.Join(chunks, "") != "data: 1\n\n" || rc.StatusCode != 502 {
		t.Errorf("chunks %q complete %d", chunks, rc.StatusCode)
	}
	c.send(t, protocol.Ping{})
	expect[protocol.Pong](t, c)
}

// blockingBackend holds every request until the client goes away, reporting both events.
func blockingBackend(t *testing.T) (url string, arrived, gone chan string) {
	arrived, gone = make(chan string, 16), make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fast" {
			io.WriteString(w, "ok")
			return
		}
		b, _ := io.ReadAll(r.Body)
		arrived <- string(b)
		<-r.Context().Done()
		gone <- string(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, arrived, gone
}

func TestCancelAbortsBackendAndFreesTheSlot(t *testing.T) {
	url, arrived, gone := blockingBackend(t)
	p := newPeer(t)
	start(t, testConfig(p, url)) // max concurrency 1
	c, _ := p.registered(t)
	for _, streaming := range []bool{false, true} {
		c.send(t, protocol.Request{RequestID: "slow", Model: "m1", EndpointPath: "/v1/chat/completions",
			IsStreaming: streaming, Body: "slow"})
		<-arrived
		c.send(t, protocol.Cancel{RequestID: "slow", Reason: protocol.CancelClientDisconnect})
		select {
		case <-gone:
		case <-time.After(wait):
			t.Fatal("backend call not aborted")
		}
		rc, _ := c.complete(t, "slow")
		if rc.StatusCode != 499 || (rc.Body != nil && *rc.Body != "") {
			t.Fatalf("cancel answered %+v", rc)
		}
		// The slot is free: the next request is served, not refused.
		c.send(t, protocol.Request{RequestID: "next", Model: "m1", EndpointPath: "/fast", Body: "{}"})
		if rc, _ := c.complete(t, "next"); rc.StatusCode != 200 {
			t.Fatalf("after cancel: %+v", rc)
		}
	}
	// A cancel for an unknown request changes nothing.
	c.send(t, protocol.Cancel{RequestID: "nope", Reason: "whatever"})
	c.send(t, protocol.Ping{})
	if pong := expect[protocol.Pong](t, c); pong.CurrentLoad != 0 {
		t.Errorf("load %d", pong.CurrentLoad)
	}
}

func TestOverCapacityIs503(t *testing.T) {
	url, arrived, _ := blockingBackend(t)
	p := newPeer(t)
	start(t, testConfig(p, url))
	c, _ := p.registered(t)
	c.send(t, protocol.Request{RequestID: "a", Model: "m1", EndpointPath: "/v1/chat/completions", Body: "a"})
	<-arrived
	c.send(t, protocol.Request{RequestID: "b", Model: "m1", EndpointPath: "/v1/chat/completions", Body: "b"})
	rc, _ := c.complete(t, "b")
	if rc.StatusCode != 503 || rc.Body == nil || !json.Valid([]byte(*rc.Body)) || rc.Headers["retry-after"] != "1" {
		t.Fatalf("over capacity: %+v", rc)
	}
}

func TestWildcardDiscoveryAndRefresh(t *testing.T) {
	var list atomic.Value
	list.Store(`{"object":"list","data":[{"id":"llama"},{"id":"qwen"}]}`)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		s := list.Load().(string)
		if s == "" {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, s)
	}))
	defer backend.Close()
	p := newPeer(t)
	cfg := testConfig(p, backend.URL)
	cfg.Models = []string{"*"}
	start(t, cfg)

	c, reg := p.registered(t)
	if strings.Join(reg.Models, ",") != "llama,qwen" {
		t.Fatalf("registered %q", reg.Models)
	}
	list.Store(`{"data":[{"id":"mistral"}]}`)
	c.send(t, protocol.ModelsRefresh{Reason: protocol.Ptr("admin")})
	upd := expect[protocol.ModelsUpdate](t, c)
	if strings.Join(upd.Models, ",") != "mistral" {
		t.Fatalf("models_update %q", upd.Models)
	}
	// Discovery runs again on reconnect; a failing backend means registering "*".
	list.Store("")
	c.ws.Close()
	_, reg = p.registered(t)
	if strings.Join(reg.Models, ",") != "*" {
		t.Fatalf("fallback registered %q", reg.Models)
	}
}

func TestReconnectsAfterPeerDrops(t *testing.T) {
	p := newPeer(t)
	start(t, testConfig(p, "http://127.0.0.1:1"))
	c, _ := p.registered(t)
	c.ws.UnderlyingConn().Close() // abrupt: no close frame
	c2, _ := p.registered(t)
	msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "graceful shutdown complete")
	if err := c2.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(wait)); err != nil {
		t.Fatal(err)
	}
	c3, _ := p.registered(t)
	c3.send(t, protocol.Ping{})
	expect[protocol.Pong](t, c3)
}

func TestReconnectsAfterServerSilence(t *testing.T) {
	p := newPeer(t)
	cfg := testConfig(p, "http://127.0.0.1:1")
	cfg.IdleTimeout = 200 * time.Millisecond
	start(t, cfg)
	c, _ := p.registered(t)
	select {
	case <-c.closed:
	case <-time.After(wait):
		t.Fatal("silent session not dropped")
	}
	p.registered(t)
}

func TestServerGracefulShutdownFinishesInFlightAndRefusesNew(t *testing.T) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		io.WriteString(w, "done")
	}))
	defer backend.Close()
	p := newPeer(t)
	cfg := testConfig(p, backend.URL)
	cfg.MaxConcurrency = 4
	start(t, cfg)
	c, _ := p.registered(t)
	c.send(t, protocol.Request{RequestID: "a", Model: "m1", EndpointPath: "/v1/completions", Body: "{}"})
	<-arrived
	c.send(t, protocol.GracefulShutdown{Reason: protocol.Ptr("admin drain"), DrainTimeoutSecs: protocol.Ptr(uint64(30))})
	c.send(t, protocol.Request{RequestID: "b", Model: "m1", EndpointPath: "/v1/completions", Body: "{}"})
	if rc, _ := c.complete(t, "b"); rc.StatusCode != 503 {
		t.Fatalf("request while draining: %+v", rc)
	}
	close(release)
	if rc, _ := c.complete(t, "a"); rc.StatusCode != 200 || *rc.Body != "done" {
		t.Fatalf("in-flight: %+v", rc)
	}
}

func TestShutdownDrainsThenCloses(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		io.WriteString(w, "done")
	}))
	defer backend.Close()
	p := newPeer(t)
	r := start(t, testConfig(p, backend.URL))
	c, _ := p.registered(t)
	c.send(t, protocol.Request{RequestID: "a", Model: "m1", EndpointPath: "/v1/completions", Body: "{}"})
	<-arrived

	shut := make(chan error, 1)
	go func() { shut <- r.d.Shutdown(t.Context()) }()
	upd := expect[protocol.ModelsUpdate](t, c)
	if len(upd.Models) != 0 || upd.CurrentLoad != 1 {
		t.Fatalf("drain announcement %+v", upd)
	}
	c.send(t, protocol.Request{RequestID: "b", Model: "m1", EndpointPath: "/v1/completions", Body: "{}"})
	if rc, _ := c.complete(t, "b"); rc.StatusCode != 503 {
		t.Fatalf("new request while draining: %+v", rc)
	}
	close(release)
	if rc, _ := c.complete(t, "a"); rc.StatusCode != 200 {
		t.Fatalf("in-flight: %+v", rc)
	}
	select {
	case <-c.closed:
	case <-time.After(wait):
		t.Fatal("session not closed after drain")
	}
	if c.closeCode != websocket.CloseNormalClosure {
		t.Errorf("close code %d", c.closeCode)
	}
	if err := <-shut; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	r.waitDone(t)
	select {
	case extra := <-p.conns:
		t.Fatalf("reconnected after shutdown: %v", extra.req.URL)
	default:
	}
}

func TestShutdownDeadlineAbortsInFlight(t *testing.T) {
	url, arrived, gone := blockingBackend(t)
	p := newPeer(t)
	r := start(t, testConfig(p, url))
	c, _ := p.registered(t)
	c.send(t, protocol.Request{RequestID: "a", Model: "m1", EndpointPath: "/v1/completions", Body: "{}"})
	<-arrived
	ctx, cancel := context.WithCancel(t.Context())
	shut := make(chan error, 1)
	go func() { shut <- r.d.Shutdown(ctx) }()
	expect[protocol.ModelsUpdate](t, c)
	cancel()
	if err := <-shut; err == nil {
		t.Error("shutdown past its deadline returned nil")
	}
	<-gone
	r.waitDone(t)
}

func TestInvalidEndpointPathIs400(t *testing.T) {
	p := newPeer(t)
	start(t, testConfig(p, "http://127.0.0.1:1"))
	c, _ := p.registered(t)
	for i, path := range []string{"v1/chat/completions", "", "/v1/\x7f bad"} {
		id := fmt.Sprintf("p%d", i)
		c.send(t, protocol.Request{RequestID: id, Model: "m1", EndpointPath: path, Body: "{}"})
		if rc, _ := c.complete(t, id); rc.StatusCode != 400 || rc.Body == nil || !json.Valid([]byte(*rc.Body)) {
			t.Errorf("path %q: %+v", path, rc)
		}
	}
}
