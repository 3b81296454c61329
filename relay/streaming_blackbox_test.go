package relay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"modelrelay/protocol"
	"modelrelay/relay"
)

func TestStreamChunksFlowOneByOne(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings()})
			w := join(t, ts, reg("w", []string{"m"}, 1))
			sc := goStream(context.Background(), ts, rt.path, chatBody("m", true))
			req := w.request()
			if !req.IsStreaming {
				t.Fatalf("request not marked streaming: %#v", req)
			}
			chunks := []string{"data: {\"n\":1}\n\n", "data: {\"n\":2}\n\n", "data: ü€𝄞\n\n", "data: [DONE]\n\n"}
			w.chunk(req.RequestID, chunks[0])
			r := wait(t, sc)
			defer r.resp.Body.Close()
			if r.resp.StatusCode != 200 {
				t.Fatalf("status %d", r.resp.StatusCode)
			}
			if ct := r.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("content-type %q, want text/event-stream", ct)
			}
			if cc := r.resp.Header.Get("Cache-Control"); cc != "no-cache" {
				t.Errorf("cache-control %q, want no-cache", cc)
			}
			// Each chunk is produced only once the client has read the one before it.
			for i, c := range chunks {
				if i > 0 {
					w.chunk(req.RequestID, c)
				}
				if got := readN(t, r.resp.Body, len(c)); got != c {
					t.Fatalf("chunk %d: %q, want %q", i, got, c)
				}
			}
			w.send(protocol.ResponseComplete{RequestID: req.RequestID, StatusCode: 200})
			if rest := readAll(t, r.resp.Body); rest != "" {
				t.Fatalf("trailing bytes %q", rest)
			}
		})
	}
}

func TestStreamingRequestAnsweredWithoutChunks(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings()})
			w := join(t, ts, reg("w", []string{"m"}, 1))
			c := goPost(ts, rt.path, chatBody("m", true))
			req := w.request()
			body := `{"error":{"message":"context too long"}}`
			w.complete(req.RequestID, 400, protocol.Headers{"content-type": "application/json", "x-backend": "vllm"}, body)
			r := wait(t, c)
			if r.resp.StatusCode != 400 || string(r.body) != body {
				t.Fatalf("got %d %q", r.resp.StatusCode, r.body)
			}
			if ct := r.resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content-type %q, want the worker's application/json", ct)
			}
			if r.resp.Header.Get("X-Backend") != "vllm" {
				t.Errorf("x-backend header lost: %v", r.resp.Header)
			}
		})
	}
}

func TestNonStreamingPassThroughKeepsStatusHeadersBody(t *testing.T) {
	for _, status := range []int{200, 201, 404, 422, 500, 503} {
		_, ts := startServer(t, relay.Options{Timings: quietTimings()})
		w := join(t, ts, reg("w", []string{"m"}, 1))
		c := goPost(ts, "/v1/chat/completions", chatBody("m", false))
		req := w.request()
		body := `{"status":"as is"}`
		w.complete(req.RequestID, status, protocol.Headers{"content-type": "application/json; charset=utf-8", "x-request-cost": "3"}, body)
		if status == 404 {
			// A 404 to an auto target may mean "no such API family here": the relay replays the
			// request translated; refused there too, the client gets the first answer as is.
			again := w.request()
			if again.EndpointPath != "/v1/messages" {
				t.Fatalf("replay went to %q", again.EndpointPath)
			}
			w.complete(again.RequestID, 404, protocol.Headers{"content-type": "application/json"}, `{"type":"error"}`)
		}
		r := wait(t, c)
		if r.resp.StatusCode != status || string(r.body) != body {
			t.Fatalf("status %d: got %d %q", status, r.resp.StatusCode, r.body)
		}
		if r.resp.Header.Get("Content-Type") != "application/json; charset=utf-8" || r.resp.Header.Get("X-Request-Cost") != "3" {
			t.Fatalf("status %d: headers %v", status, r.resp.Header)
		}
		if r.resp.Header.Get("Retry-After") != "" {
			t.Fatalf("status %d: relay added Retry-After to a worker's answer", status)
		}
	}
}

func TestNoContentTypeInvented(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	c := goPost(ts, "/v1/chat/completions", chatBody("m", false))
	req := w.request()
	w.complete(req.RequestID, 200, protocol.Headers{"x-only": "1"}, `{"a":1}`)
	r := wait(t, c)
	if ct, ok := r.resp.Header["Content-Type"]; ok {
		t.Fatalf("relay invented content-type %q for a worker answer that had none", ct)
	}
}

func TestResponseBodyVerbatimToWorker(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	body := "{ \"model\" : \"m\",\n  \"messages\": [{\"role\":\"user\",\"content\":\"h\\u00e9 ü\"}], \"stream\": null }\n"
	c := goPost(ts, "/v1/completions", body)
	req := w.request()
	if req.Body != body {
		t.Fatalf("body changed on the way: %q", req.Body)
	}
	if req.EndpointPath != "/v1/completions" {
		t.Errorf("endpoint_path %q", req.EndpointPath)
	}
	w.complete(req.RequestID, 200, nil, "ok")
	wait(t, c)
}

func TestLargeResponseCompleteFrame(t *testing.T) {
	// A response_complete carries a whole body: frames well past common 16 MiB limits pass.
	// About 3 s under -race (the server decodes a 17 MiB JSON string), so not in -short.
	if testing.Short() {
		t.Skip("large frame")
	}
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	c := goPost(ts, "/v1/chat/completions", chatBody("m", false))
	req := w.request()
	body := strings.Repeat("x", 17<<20)
	// Built by hand: encoding a 17 MiB string under -race is slow and proves nothing here.
	w.sendRaw(websocket.TextMessage, []byte(`{"type":"response_complete","request_id":"`+req.RequestID+
		`","status_code":200,"headers":{"content-type":"text/plain"},"body":"`+body+`"}`))
	r := wait(t, c)
	if r.resp.StatusCode != 200 || len(r.body) != len(body) {
		t.Fatalf("got %d with %d bytes, want 200 with %d", r.resp.StatusCode, len(r.body), len(body))
	}
}

func TestErrorFrameMidStreamEndsWithErrorEvent(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings()})
			w := join(t, ts, reg("w", []string{"m"}, 1))
			sc := goStream(context.Background(), ts, rt.path, chatBody("m", true))
			req := w.request()
			w.chunk(req.RequestID, "data: partial\n\n")
			r := wait(t, sc)
			defer r.resp.Body.Close()
			readN(t, r.resp.Body, len("data: partial\n\n"))
			w.send(protocol.Error{RequestID: &req.RequestID, Code: "backend_died", Message: "backend died"})
			checkStreamError(t, rt, readAll(t, r.resp.Body), "upstream error: backend died")
			// The session is fine and the slot is free.
			c := goPost(ts, rt.path, chatBody("m", false))
			req2 := w.request()
			w.complete(req2.RequestID, 200, nil, "ok")
			wait(t, c)
		})
	}
}

func TestStartedStreamOutlivesRequestTimeout(t *testing.T) {
	// The request timeout bounds arrival to first byte; a started stream runs as long as it runs.
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), RequestTimeout: 300 * time.Millisecond,
		QueueTimeout: 300 * time.Millisecond})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	sc := goStream(context.Background(), ts, "/v1/chat/completions", chatBody("m", true))
	req := w.request()
	w.chunk(req.RequestID, "data: 1\n\n")
	r := wait(t, sc)
	defer r.resp.Body.Close()
	readN(t, r.resp.Body, len("data: 1\n\n"))
	time.Sleep(600 * time.Millisecond) // past both timeouts
	w.chunk(req.RequestID, "data: 2\n\n")
	w.send(protocol.ResponseComplete{RequestID: req.RequestID, StatusCode: 200})
	if rest := readAll(t, r.resp.Body); rest != "data: 2\n\n" {
		t.Fatalf("rest of stream %q", rest)
	}
	select {
	case m := <-w.frames:
		t.Fatalf("worker got %#v for a stream that was running fine", m)
	default:
	}
}

func TestQueueTimeoutDoesNotApplyOnceDispatched(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), QueueTimeout: 200 * time.Millisecond})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	c := goPost(ts, "/v1/chat/completions", chatBody("m", false))
	req := w.request()
	time.Sleep(400 * time.Millisecond) // past the queue timeout
	w.complete(req.RequestID, 200, nil, "late but fine")
	if r := wait(t, c); r.resp.StatusCode != 200 || string(r.body) != "late but fine" {
		t.Fatalf("got %d %q", r.resp.StatusCode, r.body)
	}
}
