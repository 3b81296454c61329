package relay_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"modelrelay/protocol"
	"modelrelay/relay"
)

func TestErrorQueueFull(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings(), MaxQueueLen: 1})
			w, held, first := hold(t, ts, rt.path, "m")
			second := goPost(ts, rt.path, markedBody("m", false, "second"))
			waitQueueDepth(t, ts, 1)
			checkError(t, rt, wait(t, goPost(ts, rt.path, markedBody("m", false, "third"))), 429, "queue full")
			w.complete(held.RequestID, 200, nil, "1")
			r2 := w.request()
			if !strings.Contains(r2.Body, "second") {
				t.Fatalf("queued request lost: got %q", r2.Body)
			}
			w.complete(r2.RequestID, 200, nil, "2")
			wait(t, first)
			wait(t, second)
		})
	}
}

func TestErrorNoProviderForModel(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings()})
			join(t, ts, reg("w", []string{"llama"}, 1))
			checkError(t, rt, wait(t, goPost(ts, rt.path, chatBody("ghost", false))), 404, "no provider for model ghost")
		})
	}
}

func TestErrorQueueTimeout(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings(), QueueTimeout: 200 * time.Millisecond})
			w, held, first := hold(t, ts, rt.path, "m")
			checkError(t, rt, wait(t, goPost(ts, rt.path, markedBody("m", false, "queued"))), 504,
				"queue timeout: no worker available within deadline")
			if d := queueDepth(t, ts); d != 0 {
				t.Errorf("queue depth %d after the timeout", d)
			}
			w.complete(held.RequestID, 200, nil, "ok")
			wait(t, first)
		})
	}
}

func TestErrorRequestTimeoutCancelsWorker(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings(), RequestTimeout: 300 * time.Millisecond})
			w := join(t, ts, reg("slow", []string{"m"}, 1))
			inflight := goPost(ts, rt.path, markedBody("m", false, "inflight"))
			req := w.request()
			// Queue time counts too: this one never leaves the queue.
			queued := goPost(ts, rt.path, markedBody("m", false, "queued"))
			checkError(t, rt, wait(t, inflight), 504, "request timeout")
			c := w.cancel()
			if c.RequestID != req.RequestID || c.Reason != protocol.CancelTimeout {
				t.Fatalf("cancel %#v, want %s reason timeout", c, req.RequestID)
			}
			checkError(t, rt, wait(t, queued), 504, "request timeout")
		})
	}
}

func TestErrorRequeueAttemptsExhausted(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings()})
			w := join(t, ts, reg("w0", []string{"m"}, 1))
			c := goPost(ts, rt.path, markedBody("m", false, "doomed"))
			id := w.request().RequestID
			w.vanish()
			for i := 1; i <= 3; i++ {
				w = join(t, ts, reg("w", []string{"m"}, 1))
				if got := w.request().RequestID; got != id {
					t.Fatalf("loss %d: worker got %s, want the requeued %s", i, got, id)
				}
				w.vanish()
			}
			checkError(t, rt, wait(t, c), 503, "requeue attempts exhausted")
		})
	}
}

func TestErrorServerShuttingDown(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			srv, ts := startServer(t, relay.Options{Timings: quietTimings()})
			join(t, ts, reg("w", []string{"m"}, 1))
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			srv.Drain(ctx)
			checkError(t, rt, wait(t, goPost(ts, rt.path, chatBody("m", false))), 503, "server is shutting down")
		})
	}
}

func TestErrorInFlightAtDrainDeadline(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			srv, ts := startServer(t, relay.Options{Timings: quietTimings(), DrainTimeout: time.Hour})
			w, _, c := hold(t, ts, rt.path, "m")
			queued := goPost(ts, rt.path, markedBody("m", false, "queued"))
			waitQueueDepth(t, ts, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			drained := make(chan struct{})
			go func() { srv.Drain(ctx); close(drained) }()
			gs, ok := w.next().(protocol.GracefulShutdown)
			if !ok || gs.Reason == nil || *gs.Reason != "server shutting down" {
				t.Fatalf("worker got %#v, want graceful_shutdown reason \"server shutting down\"", gs)
			}
			checkError(t, rt, wait(t, queued), 503, "server is shutting down")
			checkError(t, rt, wait(t, c), 503, "server is shutting down")
			select {
			case <-drained:
			case <-time.After(waitLimit):
				t.Fatal("Drain did not return")
			}
		})
	}
}

func TestErrorBodyTooLarge(t *testing.T) {
	big := markedBody("m", false, strings.Repeat("x", 200))
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings(), MaxBodyBytes: 64})
			join(t, ts, reg("w", []string{"m"}, 1))
			checkError(t, rt, wait(t, goPost(ts, rt.path, big)), 413, "request body exceeds 64 bytes")
			// Without a Content-Length the limit holds too.
			req, _ := http.NewRequest(http.MethodPost, ts.URL+rt.path, io.MultiReader(strings.NewReader(big)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			checkError(t, rt, result{resp: resp, body: b}, 413, "request body exceeds 64 bytes")
		})
	}
}

func TestErrorFrameWithRequestIDIs502(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings()})
			w := join(t, ts, reg("w", []string{"m"}, 1))
			c := goPost(ts, rt.path, chatBody("m", false))
			req := w.request()
			w.send(protocol.Error{RequestID: &req.RequestID, Code: "backend_unreachable", Message: "connection refused"})
			checkError(t, rt, wait(t, c), 502, "upstream error: connection refused")
			// The session survives and its slot is free again.
			c2 := goPost(ts, rt.path, chatBody("m", false))
			req2 := w.request()
			w.complete(req2.RequestID, 200, nil, "fine")
			if r := wait(t, c2); r.resp.StatusCode != 200 || string(r.body) != "fine" {
				t.Fatalf("after error frame: %d %q", r.resp.StatusCode, r.body)
			}
		})
	}
}

func TestErrorFrameOnStreamingRequestBeforeFirstByte(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings()})
			w := join(t, ts, reg("w", []string{"m"}, 1))
			c := goPost(ts, rt.path, chatBody("m", true))
			req := w.request()
			w.send(protocol.Error{RequestID: &req.RequestID, Code: "oops", Message: "backend exploded"})
			checkError(t, rt, wait(t, c), 502, "upstream error: backend exploded")
		})
	}
}

func TestErrorBadRequests(t *testing.T) {
	cases := []struct {
		name, body, message string
	}{
		{"invalid JSON", `{"model":`, "request body is not valid JSON"},
		{"trailing garbage", `{"model":"m"} x`, "request body is not valid JSON"},
		{"empty body", ``, "request body is not valid JSON"},
		{"missing model", `{"messages":[]}`, "model is required"},
		{"model not a string", `{"model":42}`, "model must be a string"},
		{"model twice", `{"model":"secret-model","model":"m"}`, `duplicate key "model" in the request body`},
		{"model in two spellings", `{"Model":"secret-model","model":"m"}`, `duplicate key "model" in the request body`},
		{"messages twice", `{"model":"m","messages":[],"messages":[]}`, `duplicate key "messages" in the request body`},
		{"stream not boolean", `{"model":"m","stream":"yes"}`, "stream must be a boolean"},
		{"invalid UTF-8", "{\"model\":\"m\",\"x\":\"\xff\xfe\"}", ""},
		{"non-object body", `["m"]`, ""},
		{"string body", `"m"`, ""},
	}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings()})
			w := join(t, ts, reg("w", []string{"m"}, 1))
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					checkError(t, rt, wait(t, goPost(ts, rt.path, tc.body)), 400, tc.message)
				})
			}
			select {
			case m := <-w.frames:
				t.Fatalf("a bad request reached the worker: %#v", m)
			default:
			}
		})
	}
}

// A chain that runs out answers with the asked model's failure, not with "no provider" for an
// alternate the client never named; a target's own 5xx beats both.
func TestChainRunOutAnswersTheAskedModelsFailure(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"boom"}`, http.StatusInternalServerError)
	}))
	defer failing.Close()
	_, ts := startServer(t, relay.Options{Timings: quietTimings(),
		Backends: []relay.Backend{
			{Name: "dead", URL: "http://127.0.0.1:1", Models: []string{"big"}},
			{Name: "failing", URL: failing.URL, Models: []string{"flaky"}},
		},
		Fallbacks: map[string][]string{"big": {"absent"}, "flaky": {"absent"}, "ghost": {"big"}}})
	for _, c := range []struct {
		model string
		want  func(status int, body string) bool
	}{
		// Its only backend refused the connection: down (502 refused, or 503 once its breaker
		// is open), never "no provider for model absent".
		{"big", func(st int, _ string) bool { return st == http.StatusBadGateway || st == http.StatusServiceUnavailable }},
		{"ghost", func(st int, _ string) bool { return st == http.StatusBadGateway || st == http.StatusServiceUnavailable }},
		{"flaky", func(st int, body string) bool {
			return st == http.StatusInternalServerError && strings.Contains(body, "boom")
		}},
	} {
		resp := post(t, ts, "/v1/chat/completions", chatBody(c.model, false))
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !c.want(resp.StatusCode, string(body)) || strings.Contains(string(body), "absent") {
			t.Errorf("%s: %d %s", c.model, resp.StatusCode, body)
		}
	}
}
