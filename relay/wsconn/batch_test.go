package wsconn

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// recorder is a net.Conn that records each write and each write deadline set on it.
type recorder struct {
	net.Conn
	writes    [][]byte
	deadlines []time.Time
	fail      error
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.fail != nil {
		return 0, r.fail
	}
	r.writes = append(r.writes, bytes.Clone(p))
	return len(p), nil
}

func (r *recorder) SetWriteDeadline(t time.Time) error {
	r.deadlines = append(r.deadlines, t)
	return nil
}

func TestHeldWritesGoOut(t *testing.T) {
	big := bytes.Repeat([]byte("x"), maxHeld)
	cases := []struct {
		name   string
		held   bool
		writes [][]byte
		want   []string // the writes that reach the socket
	}{
		{"through", false, [][]byte{[]byte("a"), []byte("b")}, []string{"a", "b"}},
		{"held together", true, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, []string{"abc"}},
		{"held, then one too large", true, [][]byte{[]byte("a"), big}, []string{"a", string(big)}},
		{"nothing held", true, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			c := New(rec)
			if tc.held {
				c.Hold()
			}
			for _, w := range tc.writes {
				if n, err := c.Write(w); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range rec.writes {
				got = append(got, string(w))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("socket writes %q, want %q", got, tc.want)
			}
			// After Flush writes go through again.
			c.Write([]byte("z"))
			if last := rec.writes[len(rec.writes)-1]; string(last) != "z" {
				t.Errorf("a write after Flush was held: last socket write %q", last)
			}
		})
	}
}

// TestDeadlineOncePerWrite: the frames held together set the socket's deadline once, with the
// last one asked for, and an unchanged deadline is not set again.
func TestDeadlineOncePerWrite(t *testing.T) {
	rec := &recorder{}
	c := New(rec)
	d1, d2 := time.Unix(100, 0), time.Unix(200, 0)
	c.Hold()
	c.SetWriteDeadline(d1)
	c.Write([]byte("a"))
	c.SetWriteDeadline(d2)
	c.Write([]byte("b"))
	c.Flush()
	c.SetWriteDeadline(d2)
	c.Write([]byte("c"))
	if len(rec.deadlines) != 1 || !rec.deadlines[0].Equal(d2) {
		t.Fatalf("socket deadlines %v, want one: %v", rec.deadlines, d2)
	}
}

// TestFlushError: the held frames' failure is Flush's, and nothing stays held.
func TestFlushError(t *testing.T) {
	broken := errors.New("broken pipe")
	rec := &recorder{fail: broken}
	c := New(rec)
	c.Hold()
	if _, err := c.Write([]byte("a")); err != nil {
		t.Fatalf("held write failed: %v", err)
	}
	if err := c.Flush(); !errors.Is(err, broken) {
		t.Fatalf("Flush = %v, want %v", err, broken)
	}
	rec.fail = nil
	c.Write([]byte("b"))
	if len(rec.writes) != 1 || string(rec.writes[0]) != "b" {
		t.Fatalf("after a failed flush the socket got %q, want only \"b\"", rec.writes)
	}
}

// TestWebSocketFramesUnchanged: frames written by gorilla/websocket through a held Conn, on
// both sides of a real connection, arrive as the same messages in the same order.
func TestWebSocketFramesUnchanged(t *testing.T) {
	got := make(chan string, 8)
	upgrader := websocket.Upgrader{}
	var server *Hijacker
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		server = &Hijacker{ResponseWriter: w}
		conn, err := upgrader.Upgrade(server, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		server.Conn.Hold()
		for _, m := range []string{"one", "two", strings.Repeat("3", 70<<10)} {
			if err := conn.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
				t.Error(err)
			}
		}
		if err := server.Conn.Flush(); err != nil {
			t.Error(err)
		}
		collect(conn, got)
	}))
	defer srv.Close()

	var client *Conn
	dialer := websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
		c, err := net.Dial(network, addr)
		if err != nil {
			return nil, err
		}
		client = New(c)
		return client, nil
	}}
	conn, _, err := dialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, want := range []string{"one", "two", strings.Repeat("3", 70<<10)} {
		_, data, err := conn.ReadMessage()
		if err != nil || string(data) != want {
			t.Fatalf("server message: %d bytes, %v; want %d bytes", len(data), err, len(want))
		}
	}
	client.Hold()
	for _, m := range []string{"a", "b"} {
		conn.WriteMessage(websocket.TextMessage, []byte(m)) // masked frames, held
	}
	if err := client.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a", "b"} {
		if m := <-got; m != want {
			t.Fatalf("client message %q, want %q", m, want)
		}
	}
}

// TestHeldFramesUnderTLS: under wss the socket Conn wraps is the one TLS runs over; frames
// held and flushed there arrive whole and in order.
func TestHeldFramesUnderTLS(t *testing.T) {
	got := make(chan string, 4)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		collect(conn, got)
	}))
	defer srv.Close()
	var socket *Conn
	dialer := websocket.Dialer{TLSClientConfig: srv.Client().Transport.(*http.Transport).TLSClientConfig,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			socket = New(c)
			return socket, nil
		}}
	conn, _, err := dialer.Dial("wss"+strings.TrimPrefix(srv.URL, "https"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	socket.Hold()
	for _, m := range []string{"one", "two", "three"} {
		if err := conn.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if err := socket.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"one", "two", "three"} {
		if m := <-got; m != want {
			t.Fatalf("got %q, want %q", m, want)
		}
	}
}

// collect sends every message conn reads to got, until the connection ends.
func collect(conn *websocket.Conn, got chan<- string) {
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		got <- string(data)
	}
}
