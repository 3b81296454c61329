package relay_test

import (
	"bufio"
	"io"
	"net/http"
	"testing"

	"modelrelay/protocol"
	"modelrelay/relay"
)

func TestNonStreamingThroughWorker(t *testing.T) {
	_, ts := startServer(t, relay.Options{})
	w := connectWorker(t, ts, registerFrame("gpu-box-1", []string{"llama3-8b"}, 4))
	if w.ack.WorkerID != "worker-1" || w.ack.ProtocolVersion == nil || *w.ack.ProtocolVersion != protocol.Version {
		t.Fatalf("ack = %#v", w.ack)
	}
	done := make(chan *http.Response, 1)
	go func() { done <- post(t, ts, "/v1/chat/completions", chatBody("llama3-8b", false)) }()
	req := w.nextRequest()
	if req.Model != "llama3-8b" || req.EndpointPath != "/v1/chat/completions" || req.IsStreaming {
		t.Fatalf("request = %#v", req)
	}
	w.complete(req.RequestID, 200, `{"choices":[]}`)
	resp := <-done
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != `{"choices":[]}` || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %q %v", resp.StatusCode, body, resp.Header)
	}
}

func TestStreamingChunkArrivesBeforeNextIsProduced(t *testing.T) {
	_, ts := startServer(t, relay.Options{})
	w := connectWorker(t, ts, registerFrame("w", []string{"m"}, 1))
	done := make(chan *http.Response, 1)
	go func() { done <- post(t, ts, "/v1/chat/completions", chatBody("m", true)) }()
	req := w.nextRequest()
	w.send(protocol.ResponseChunk{RequestID: req.RequestID, Chunk: "data: one\n\n"})
	resp := <-done
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content-type %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	line, _ := r.ReadString('\n')
	if line != "data: one\n" {
		t.Fatalf("first line %q", line)
	}
	// The second chunk is produced only after the first was read by the client.
	r.ReadString('\n')
	w.send(protocol.ResponseChunk{RequestID: req.RequestID, Chunk: "data: two\n\n"})
	w.send(protocol.ResponseComplete{RequestID: req.RequestID, StatusCode: 200})
	rest, _ := io.ReadAll(r)
	if string(rest) != "data: two\n\n" {
		t.Fatalf("rest %q", rest)
	}
}
