package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"modelrelay/protocol"
)

// wait bounds how long a test waits for something that should happen promptly; it is a
// failure deadline, not a timing assertion.
const wait = 10 * time.Second

// peer is a scripted relay server: a real gorilla WebSocket endpoint on loopback whose
// connections the test drives frame by frame.
type peer struct {
	srv   *httptest.Server
	conns chan *peerConn
	mu    sync.Mutex
	all   []*peerConn
}

type peerConn struct {
	ws        *websocket.Conn
	req       *http.Request
	frames    chan protocol.Message
	closed    chan struct{} // the read loop ended
	closeCode int           // valid after closed
}

func newPeer(t *testing.T) *peer {
	t.Helper()
	p := &peer{conns: make(chan *peerConn, 16)}
	up := websocket.Upgrader{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		c := &peerConn{ws: ws, req: r, frames: make(chan protocol.Message, 1024), closed: make(chan struct{})}
		p.mu.Lock()
		p.all = append(p.all, c)
		p.mu.Unlock()
		go c.readLoop()
		p.conns <- c
	}))
	t.Cleanup(func() {
		p.mu.Lock()
		for _, c := range p.all {
			c.ws.Close()
		}
		p.mu.Unlock()
		p.srv.Close()
	})
	return p
}

func (c *peerConn) readLoop() {
	defer close(c.closed)
	c.ws.SetReadLimit(maxFrameBytes)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				c.closeCode = ce.Code
			}
			return
		}
		m, err := protocol.DecodeWorkerMessage(data)
		if err != nil {
			m = protocol.Error{Code: "undecodable", Message: err.Error() + ": " + string(data)}
		}
		c.frames <- m
	}
}

func (p *peer) accept(t *testing.T) *peerConn {
	t.Helper()
	select {
	case c := <-p.conns:
		return c
	case <-time.After(wait):
		t.Fatal("daemon did not connect")
		return nil
	}
}

// next returns the next frame the daemon sent.
func (c *peerConn) next(t *testing.T) protocol.Message {
	t.Helper()
	select {
	case m := <-c.frames:
		if e, ok := m.(protocol.Error); ok {
			t.Fatalf("daemon sent an error frame or garbage: %+v", e)
		}
		return m
	case <-c.closed:
		select {
		case m := <-c.frames:
			return m
		default:
		}
		t.Fatalf("connection closed (code %d) while waiting for a frame", c.closeCode)
	case <-time.After(wait):
		t.Fatal("no frame from daemon")
	}
	return nil
}

func expect[T protocol.Message](t *testing.T, c *peerConn) T {
	t.Helper()
	m := c.next(t)
	v, ok := m.(T)
	if !ok {
		var zero T
		t.Fatalf("want %s frame, got %s: %+v", zero.MessageType(), m.MessageType(), m)
	}
	return v
}

func (c *peerConn) send(t *testing.T, m protocol.Message) {
	t.Helper()
	b, err := protocol.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		t.Fatalf("send %s: %v", m.MessageType(), err)
	}
}

// registered accepts the next connection and reads its register frame.
func (p *peer) registered(t *testing.T) (*peerConn, protocol.Register) {
	t.Helper()
	c := p.accept(t)
	reg := expect[protocol.Register](t, c)
	c.send(t, protocol.RegisterAck{WorkerID: "worker-1", Models: reg.Models,
		ProtocolVersion: protocol.Ptr(protocol.Version)})
	return c, reg
}

// complete waits for the response_complete of id, collecting the chunks before it; load
// reports (models_update) on the way are skipped.
func (c *peerConn) complete(t *testing.T, id string) (protocol.ResponseComplete, []string) {
	t.Helper()
	var chunks []string
	for {
		switch m := c.next(t).(type) {
		case protocol.ResponseChunk:
			if m.RequestID != id {
				t.Fatalf("chunk for %s while waiting for %s", m.RequestID, id)
			}
			chunks = append(chunks, m.Chunk)
		case protocol.ResponseComplete:
			if m.RequestID != id {
				t.Fatalf("completion for %s while waiting for %s", m.RequestID, id)
			}
			return m, chunks
		case protocol.ModelsUpdate:
			// A load report may come at any time (the worker reports its load as it changes).
		default:
			t.Fatalf("unexpected %s frame while waiting for %s", m.MessageType(), id)
		}
	}
}

func testConfig(p *peer, backendURL string) Config {
	return Config{
		ProxyURL:      p.srv.URL,
		WorkerSecret:  "s3cret",
		WorkerName:    "test-worker",
		Models:        []string{"m1"},
		BackendURL:    backendURL,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		BackoffMin:    20 * time.Millisecond,
		BackoffMax:    100 * time.Millisecond,
		MaxJitter:     -1, // negative: no jitter
		GracefulDelay: 20 * time.Millisecond,
	}
}

// running is a daemon under test.
type running struct {
	d    *Daemon
	stop context.CancelFunc
	done chan struct{}
}

func start(t *testing.T, cfg Config) *running {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{d: d, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := d.Run(ctx); err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

func (r *running) waitDone(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(wait):
		t.Fatal("daemon did not stop")
	}
}
