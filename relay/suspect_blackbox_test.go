package relay_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"modelrelay/protocol"
	"modelrelay/relay"
)

// suspectTimings ping often and call a worker suspect soon after, but never close it for
// silence unless a test asks.
func suspectTimings() relay.Timings {
	tm := quietTimings()
	tm.HeartbeatInterval = 100 * time.Millisecond
	tm.SuspectAfter = 300 * time.Millisecond
	return tm
}

// speaker answers a worker's pings with pongs while it is on, and serializes every write a test
// makes to that worker (gorilla/websocket allows one writer at a time).
type speaker struct {
	w    *liveWorker
	mu   sync.Mutex
	on   bool
	stop chan struct{}
}

func speak(t *testing.T, w *liveWorker, on bool) *speaker {
	s := &speaker{w: w, on: on, stop: make(chan struct{})}
	go func() {
		for {
			select {
			case p := <-w.pings:
				s.mu.Lock()
				if s.on {
					w.conn.SetWriteDeadline(time.Now().Add(waitLimit))
					w.conn.WriteMessage(websocket.TextMessage, mustMarshal(protocol.Pong{TimestampUnixMs: p.TimestampUnixMs}))
				}
				s.mu.Unlock()
			case <-s.stop:
				return
			case <-w.closed:
				return
			}
		}
	}()
	t.Cleanup(func() { close(s.stop) })
	return s
}

func (s *speaker) set(on bool) {
	s.mu.Lock()
	s.on = on
	s.mu.Unlock()
}

func (s *speaker) send(t *testing.T, kind int, data []byte) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.conn.SetWriteDeadline(time.Now().Add(waitLimit))
	if err := s.w.conn.WriteMessage(kind, data); err != nil {
		t.Fatalf("%s: write: %v", s.w.ack.WorkerID, err)
	}
}

func (s *speaker) complete(t *testing.T, id, body string) {
	t.Helper()
	s.send(t, websocket.TextMessage, mustMarshal(protocol.ResponseComplete{RequestID: id, StatusCode: 200,
		Headers: protocol.Headers{"content-type": "application/json"}, Body: &body}))
}

// waitSuspect waits until /health says worker id is (or is not) suspect.
func waitSuspect(t *testing.T, ts *httptest.Server, id string, want bool) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s suspect=%v", id, want), func() bool {
		h := healthWorker(t, ts, id)
		if h == nil {
			t.Fatalf("%s not in /health", id)
		}
		got, ok := h["suspect"].(bool)
		if !ok {
			t.Fatalf("/health worker %s has no boolean suspect: %v", id, h)
		}
		return got == want
	})
}

// syncBuffer is a log sink tests may read while the server writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A worker that stops sending (but keeps its connection and keeps reading) becomes suspect
// after a ping: new requests go to the other worker, its in-flight request completes when it
// speaks again, and that frame makes it healthy.
func TestSuspectWorkerGetsNothingNewButFinishesWhatItHolds(t *testing.T) {
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, ts := startServer(t, relay.Options{Timings: suspectTimings(), Logger: log})
	quiet := join(t, ts, reg("quiet", []string{"m"}, 4))
	quietSays := speak(t, quiet, true)
	held := goPost(ts, "/v1/chat/completions", chatBody("m", false))
	heldReq := quiet.request() // the only worker: it holds this one
	other := join(t, ts, reg("other", []string{"m"}, 4))
	otherSays := speak(t, other, true)

	quietSays.set(false) // silence from here on
	waitSuspect(t, ts, quiet.ack.WorkerID, true)
	waitSuspect(t, ts, other.ack.WorkerID, false) // (a pong late on a busy machine may flap it)
	eventually(t, "modelrelay_workers_suspect 1", func() bool {
		_, metrics := getText(t, ts, "/metrics")
		return strings.Contains(metrics, "modelrelay_workers_suspect 1\n")
	})
	if h := healthWorker(t, ts, quiet.ack.WorkerID); h["in_flight"] != 1.0 {
		t.Fatalf("suspect worker lost its in-flight request: %v", h)
	}

	for i := range 3 {
		c := goPost(ts, "/v1/chat/completions", chatBody("m", false))
		req := other.request()
		otherSays.complete(t, req.RequestID, `{"n":1}`)
		if r := wait(t, c); r.resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, r.resp.StatusCode, r.body)
		}
	}
	select {
	case m := <-quiet.frames:
		t.Fatalf("suspect worker was sent %#v", m)
	default:
	}

	// It speaks again: the answer it held reaches its client, and it is healthy.
	quietSays.complete(t, heldReq.RequestID, `{"held":true}`)
	quietSays.set(true) // and keeps answering pings, so it stays healthy while we look
	if r := wait(t, held); r.resp.StatusCode != 200 || string(r.body) != `{"held":true}` {
		t.Fatalf("held request: %d %s", r.resp.StatusCode, r.body)
	}
	waitSuspect(t, ts, quiet.ack.WorkerID, false)
	eventually(t, "modelrelay_workers_suspect 0", func() bool {
		_, metrics := getText(t, ts, "/metrics")
		return strings.Contains(metrics, "modelrelay_workers_suspect 0\n")
	})
	text := logs.String()
	for _, want := range []string{
		`level=WARN msg="worker suspect`,
		`level=INFO msg="worker recovered`,
		"worker_id=" + quiet.ack.WorkerID,
		"worker_name=quiet",
		"silent_for=",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("logs lack %q", want)
		}
	}
}

// A model whose only worker is suspect does not fail fast: its requests queue, and the
// worker's next frame of any kind (a text frame, a WebSocket ping or pong) clears it and hands
// it the queued request at once.
func TestSuspectWorkerTakesQueuedRequestOnItsNextFrame(t *testing.T) {
	frames := []struct {
		name string
		send func(t *testing.T, s *speaker)
	}{
		{"pong", func(t *testing.T, s *speaker) {
			s.send(t, websocket.TextMessage, mustMarshal(protocol.Pong{CurrentLoad: 0}))
		}},
		{"models_update", func(t *testing.T, s *speaker) {
			s.send(t, websocket.TextMessage, mustMarshal(protocol.ModelsUpdate{Models: []string{"m"}}))
		}},
		{"websocket ping", func(t *testing.T, s *speaker) { s.send(t, websocket.PingMessage, []byte("hi")) }},
		{"websocket pong", func(t *testing.T, s *speaker) { s.send(t, websocket.PongMessage, nil) }},
	}
	for _, f := range frames {
		t.Run(f.name, func(t *testing.T) {
			tm := suspectTimings()
			_, ts := startServer(t, relay.Options{Timings: tm, QueueTimeout: time.Hour})
			w := join(t, ts, reg("w", []string{"m"}, 2))
			says := speak(t, w, false)
			waitSuspect(t, ts, w.ack.WorkerID, true)

			c := goPost(ts, "/v1/chat/completions", chatBody("m", false))
			waitQueueDepth(t, ts, 1)
			select {
			case r := <-c:
				t.Fatalf("request for a model served only by a suspect worker answered %d %s", r.resp.StatusCode, r.body)
			default:
			}
			f.send(t, says)
			req := w.request()
			says.complete(t, req.RequestID, `{"ok":true}`)
			if r := wait(t, c); r.resp.StatusCode != 200 {
				t.Fatalf("%d %s", r.resp.StatusCode, r.body)
			}
		})
	}
}

// A worker that neither reads nor sends is suspect first, and the heartbeat timeout still
// closes it as before.
func TestSuspectWorkerStillClosedAtHeartbeatTimeout(t *testing.T) {
	tm := suspectTimings()
	tm.HeartbeatTimeout = 3 * time.Second
	_, ts := startServer(t, relay.Options{Timings: tm})
	conn := dialWorker(t, ts)
	if err := conn.WriteMessage(websocket.TextMessage, []byte(reg("stuck", []string{"m"}, 1))); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(waitLimit))
	_, data, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("read register_ack: %v", err)
	}
	msg, err := protocol.DecodeServerMessage(data)
	ack, ok := msg.(protocol.RegisterAck)
	if err != nil || !ok {
		t.Fatalf("expected register_ack, got %s", data)
	}
	// From here on the worker reads nothing and sends nothing; its connection stays open.
	waitSuspect(t, ts, ack.WorkerID, true)
	if code, reason := expectClose(t, conn); code != websocket.CloseNormalClosure || reason != "worker heartbeat timed out" {
		t.Fatalf("close %d %q, want 1000 \"worker heartbeat timed out\"", code, reason)
	}
	eventually(t, "worker gone from /health", func() bool { return !healthHasWorker(t, ts, ack.WorkerID) })
}
