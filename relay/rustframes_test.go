package relay_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"modelrelay/relay"
)

// TestRustFormatConversation drives a whole worker conversation with frames written byte for
// byte as the Rust worker's serde emits them, and checks the server's frames byte for byte.
func TestRustFormatConversation(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: relay.Timings{HeartbeatInterval: time.Hour}})
	conn := dialRaw(t, ts, "?provider=local", secretHeader())
	send := func(frame string) {
		t.Helper()
		if err := conn.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, data, err := conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}

	send(`{"type":"register","worker_name":"gpu-box-1","models":["llama3-8b"],"max_concurrent":4,"protocol_version":"2026-04-bridge-v1","current_load":0}`)
	if ack := read(); ack != `{"type":"register_ack","worker_id":"worker-1","models":["llama3-8b"],"protocol_version":"2026-04-bridge-v1"}` {
		t.Fatalf("register_ack = %s", ack)
	}

	body := `{"model":"llama3-8b","stream":true,"messages":[{"role":"user","content":"héllo \"quoted\""}]}`
	done := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Trace-Id", "trace-123")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			close(done)
			return
		}
		done <- resp
	}()
	frame := read()
	shape := regexp.MustCompile(`^\{"type":"request","request_id":"([^"]+)","model":"llama3-8b","endpoint_path":"/v1/chat/completions","is_streaming":true,"body":"(.*)","headers":\{(.*)\}\}$`)
	m := shape.FindStringSubmatch(frame)
	if m == nil {
		t.Fatalf("request frame not in serde order: %s", frame)
	}
	if want := `{\"model\":\"llama3-8b\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"héllo \\\"quoted\\\"\"}]}`; m[2] != want {
		t.Fatalf("body not verbatim:\n got %s\nwant %s", m[2], want)
	}
	if !strings.Contains(m[3], `"x-trace-id":"trace-123"`) || !strings.Contains(m[3], `"content-type":"application/json"`) {
		t.Fatalf("headers not lowercased/forwarded: %s", m[3])
	}
	id := m[1]

	send(`{"type":"pong","current_load":1,"timestamp_unix_ms":1712345678901}`)
	send(`{"type":"response_chunk","request_id":"` + id + `","chunk":"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"}`)
	send(`{"type":"response_chunk","request_id":"` + id + `","chunk":"data: [DONE]\n\n"}`)
	send(`{"type":"response_complete","request_id":"` + id + `","status_code":200,"token_counts":{"prompt_tokens":42,"completion_tokens":128,"total_tokens":170}}`)
	resp := <-done
	if resp == nil {
		t.FailNow()
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"; string(got) != want {
		t.Fatalf("stream = %q", got)
	}
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content-type %q", resp.Header.Get("Content-Type"))
	}

	// The server's own frames are in serde form too.
	second := httpClientPost(t, ts.URL+"/v1/chat/completions", `{"model":"llama3-8b"}`)
	req := read()
	id = regexp.MustCompile(`"request_id":"([^"]+)"`).FindStringSubmatch(req)[1]
	send(`{"type":"error","request_id":"` + id + `","code":"upstream_error","message":"backend exploded"}`)
	if r := <-second; r.status != 502 || !strings.Contains(r.body, "upstream error: backend exploded") {
		t.Fatalf("error frame answer: %d %s", r.status, r.body)
	}
}

type httpResult struct {
	status int
	body   string
}

func httpClientPost(t *testing.T, url, body string) <-chan httpResult {
	c := make(chan httpResult, 1)
	go func() {
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			c <- httpResult{}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c <- httpResult{resp.StatusCode, string(b)}
	}()
	return c
}
