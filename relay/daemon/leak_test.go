package daemon

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"modelrelay/protocol"
)

// TestStoppedDaemonLeavesNoGoroutines runs a daemon through requests, a cancel, a reconnect
// and a stop, then waits for the goroutine count to return to where it was.
func TestStoppedDaemonLeavesNoGoroutines(t *testing.T) {
	url, arrived, _ := blockingBackend(t)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer fast.Close()
	p := newPeer(t)
	baseline := runtime.NumGoroutine()

	cfg := testConfig(p, url)
	cfg.MaxConcurrency = 2
	r := start(t, cfg)
	c, _ := p.registered(t)
	c.send(t, protocol.Request{RequestID: "a", Model: "m1", EndpointPath: "/v1/completions", Body: "{}", IsStreaming: true})
	<-arrived
	c.send(t, protocol.Cancel{RequestID: "a", Reason: protocol.CancelTimeout})
	c.complete(t, "a")
	c.send(t, protocol.Request{RequestID: "b", Model: "m1", EndpointPath: "/v1/completions", Body: "{}"})
	<-arrived
	c.ws.Close() // drop the session with "b" in flight
	p.registered(t)
	r.stop()
	r.waitDone(t)

	deadline := time.Now().Add(wait)
	for {
		// The peer's read loops and the backends' handlers end too: their connections close
		// when the daemon exits.
		n := runtime.NumGoroutine()
		if n <= baseline {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, baseline %d:\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
