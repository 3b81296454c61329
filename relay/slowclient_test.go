package relay_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelrelay/protocol"
	"modelrelay/relay"
)

// TestSlowClientDoesNotLookLikeASilentWorker: while one client reads nothing for several
// heartbeat timeouts, the session's reader waits on that client; the worker kept talking the
// whole time, so it must not be closed for silence (which would cut the stream short).
func TestSlowClientDoesNotLookLikeASilentWorker(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: relay.Timings{HeartbeatInterval: time.Hour, HeartbeatTimeout: 500 * time.Millisecond}})
	w := connectWorker(t, ts, registerFrame("w", []string{"m"}, 2))

	// A client with a tiny receive buffer that does not read for a while, so the server's
	// writes to it block and the session's reader waits on it.
	dialer := &net.Dialer{}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err == nil {
			c.(*net.TCPConn).SetReadBuffer(64 << 10) // a fixed window: no autotuning
		}
		return c, err
	}}}
	respc := make(chan *http.Response, 1)
	go func() {
		resp, err := client.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody("m", true)))
		if err != nil {
			t.Error(err)
		}
		respc <- resp
	}()
	req := w.nextRequest()
	// ~20 MiB: more than the kernel's socket buffers (4 MiB send) plus the server's per-request
	// buffer hold, so the session's reader really blocks on this client.
	// Frames larger than the server's 32 KiB read buffer, so reading the next one after the
	// stall needs the socket, where a stale deadline would bite.
	chunk := "data: " + strings.Repeat("x", 100<<10) + "\n\n"
	const chunks = 200
	go func() {
		for range chunks {
			w.send(protocol.ResponseChunk{RequestID: req.RequestID, Chunk: chunk})
		}
		w.send(protocol.ResponseComplete{RequestID: req.RequestID, StatusCode: 200})
	}()
	resp := <-respc
	if resp == nil {
		t.FailNow()
	}
	time.Sleep(1500 * time.Millisecond) // the client stalls for three heartbeat timeouts
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := strings.Count(string(got), chunk); n != chunks || err != nil {
		t.Fatalf("client got %d of %d chunks (%v)", n, chunks, err)
	}
}
