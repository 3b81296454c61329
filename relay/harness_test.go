package relay_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"modelrelay/protocol"
	"modelrelay/relay"
	"modelrelay/relay/admin"
	"modelrelay/relay/api"
)

const secret = "s3cret"

// startServer runs a real relay on a loopback listener, with the operator's surface mounted
// as the server binary mounts it.
func startServer(t *testing.T, opts relay.Options) (*relay.Server, *httptest.Server) {
	t.Helper()
	if opts.WorkerSecret == "" {
		opts.WorkerSecret = secret
	}
	srv, err := relay.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	admin.Mount(srv)
	ts := httptest.NewServer(api.Handler(srv))
	t.Cleanup(func() { srv.Close(); ts.Close() })
	return srv, ts
}

// fakeWorker is a relay worker speaking raw frames, as a Rust worker would.
type fakeWorker struct {
	t    *testing.T
	conn *websocket.Conn
	ack  protocol.RegisterAck
}

func wsURL(ts *httptest.Server, query string) string {
	return "ws" + strings.TrimPrefix(ts.URL, "http") + "/v1/worker/connect" + query
}

func dialRaw(t *testing.T, ts *httptest.Server, query string, header http.Header) *websocket.Conn {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial(wsURL(ts, query), header)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func secretHeader() http.Header { return http.Header{"X-Worker-Secret": {secret}} }

// connectWorker registers a worker with a raw register frame and reads the ack.
func connectWorker(t *testing.T, ts *httptest.Server, register string) *fakeWorker {
	t.Helper()
	conn := dialRaw(t, ts, "?provider=local", secretHeader())
	if err := conn.WriteMessage(websocket.TextMessage, []byte(register)); err != nil {
		t.Fatal(err)
	}
	w := &fakeWorker{t: t, conn: conn}
	msg := w.next()
	ack, ok := msg.(protocol.RegisterAck)
	if !ok {
		t.Fatalf("expected register_ack, got %#v", msg)
	}
	w.ack = ack
	return w
}

func registerFrame(name string, models []string, maxConcurrent int) string {
	b, _ := protocol.Marshal(protocol.Register{WorkerName: name, Models: models, MaxConcurrent: uint32(maxConcurrent),
		ProtocolVersion: protocol.Ptr(protocol.Version)})
	return string(b)
}

// next returns the next frame that is not a ping.
func (w *fakeWorker) next() protocol.Message {
	w.t.Helper()
	for {
		w.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, data, err := w.conn.ReadMessage()
		if err != nil {
			w.t.Fatalf("worker read: %v", err)
		}
		msg, err := protocol.DecodeServerMessage(data)
		if err != nil {
			w.t.Fatalf("decode %s: %v", data, err)
		}
		if _, ping := msg.(protocol.Ping); !ping {
			return msg
		}
	}
}

func (w *fakeWorker) nextRequest() protocol.Request {
	w.t.Helper()
	msg := w.next()
	req, ok := msg.(protocol.Request)
	if !ok {
		w.t.Fatalf("expected request, got %#v", msg)
	}
	return req
}

func (w *fakeWorker) send(m protocol.Message) {
	w.t.Helper()
	b, err := protocol.Marshal(m)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.conn.WriteMessage(websocket.TextMessage, b); err != nil {
		w.t.Fatalf("worker write: %v", err)
	}
}

func (w *fakeWorker) complete(id string, status int, body string) {
	w.send(protocol.ResponseComplete{RequestID: id, StatusCode: uint16(status),
		Headers: protocol.Headers{"content-type": "application/json"}, Body: &body})
}

// expectClose reads until the server closes and returns the close code and reason.
func expectClose(t *testing.T, conn *websocket.Conn) (int, string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		_, _, err := conn.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if ok := asCloseError(err, &ce); ok {
			return ce.Code, ce.Text
		}
		t.Fatalf("expected a close frame, got %v", err)
	}
}

func asCloseError(err error, target **websocket.CloseError) bool {
	ce, ok := err.(*websocket.CloseError)
	if ok {
		*target = ce
	}
	return ok
}

func chatBody(model string, stream bool) string {
	b, _ := json.Marshal(map[string]any{"model": model, "stream": stream, "messages": []any{map[string]string{"role": "user", "content": "hi"}}})
	return string(b)
}

func post(t *testing.T, ts *httptest.Server, path, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	return resp
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
