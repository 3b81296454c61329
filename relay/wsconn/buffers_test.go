package wsconn

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/gorilla/websocket"
)

// TestReaderReusesItsBuffer: messages of any size arrive whole; a small one is read into the
// buffer the previous one used, and a buffer past keepMax is not kept.
func TestReaderReusesItsBuffer(t *testing.T) {
	messages := []string{"first", strings.Repeat("m", 3000), "", "x", strings.Repeat("L", keepMax+1), "after"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		for _, m := range messages {
			conn.WriteMessage(websocket.TextMessage, []byte(m))
		}
		conn.ReadMessage() // until the client goes
	}))
	defer srv.Close()
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var r Reader
	var prev []byte
	for i, want := range messages {
		kind, got, err := r.Read(conn)
		if err != nil || kind != websocket.TextMessage || string(got) != want {
			t.Fatalf("message %d: %d bytes, kind %d, %v; want %d bytes", i, len(got), kind, err, len(want))
		}
		if i == 3 && &prev[:1][0] != &got[:1][0] {
			t.Error("a small message after a larger one was not read into the same buffer")
		}
		if len(want) > keepMax && r.buf != nil {
			t.Errorf("kept a %d-byte buffer", cap(r.buf))
		}
		prev = got
	}
}

func TestReadAll(t *testing.T) {
	data := strings.Repeat("0123456789", 1000)
	got, err := ReadAll([]byte("prefix:"), iotest.OneByteReader(strings.NewReader(data)))
	if err != nil || string(got) != "prefix:"+data {
		t.Fatalf("ReadAll = %d bytes, %v", len(got), err)
	}
	_, err = ReadAll(nil, iotest.ErrReader(iotest.ErrTimeout))
	if err != iotest.ErrTimeout {
		t.Fatalf("ReadAll of a failing reader = %v", err)
	}
	b := Buffer()
	*b = append(*b, "frame"...)
	Release(b)
	if again := Buffer(); len(*again) != 0 {
		t.Fatalf("Buffer returned %q, want it empty", *again)
	}
	big := Buffer()
	*big = bytes.Repeat([]byte{1}, keepMax+1)
	Release(big) // dropped, not pooled: nothing to observe but that it does not panic
}
