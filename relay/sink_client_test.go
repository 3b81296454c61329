package relay

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func newClient(w http.ResponseWriter, d Dialect, maxStream int64, where servedBy) *clientWriter {
	return &clientWriter{w: w, dialect: d, maxStream: maxStream, where: &where}
}

func TestClientWriterHead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		where  servedBy
		header http.Header
		length int64
		want   map[string]string // "" = absent
	}{
		{name: "the target's end-to-end headers and its length",
			header: http.Header{"Content-Type": {"application/json"}, "X-Backend": {"vllm"}, "Connection": {"close, X-Hop"},
				"X-Hop": {"1"}, "Keep-Alive": {"timeout=5"}},
			length: 2,
			want: map[string]string{"Content-Type": "application/json", "X-Backend": "vllm", "Content-Length": "2",
				"Connection": "", "X-Hop": "", "Keep-Alive": "", "X-Modelrelay-Model": "", "X-Modelrelay-Target": ""}},
		{name: "what served it", where: servedBy{served: "small", from: "big", target: "gpu-1", queued: 1500 * time.Millisecond},
			header: jsonHead, length: -1,
			want: map[string]string{"Content-Length": "", "X-Modelrelay-Model": "small", "X-Modelrelay-Fallback-From": "big",
				"X-Modelrelay-Target": "gpu-1", "X-Modelrelay-Queue-Ms": "1500"}},
		{name: "no type is sniffed", header: http.Header{}, length: -1,
			want: map[string]string{"Content-Type": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c := newClient(w, OpenAI, 0, tc.where)
			if body, err := c.Head(201, tc.header, tc.length); err != nil || body != c {
				t.Fatalf("head: %v, the body goes to %v", err, body)
			}
			if err := c.Chunk([]byte("<html>"), true); err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got := w.Header().Get(name); got != want {
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
			if w.Code != 201 || c.status != 201 || !c.wrote || c.streamed != 6 || !w.Flushed {
				t.Fatalf("code %d status %d wrote %v streamed %d flushed %v", w.Code, c.status, c.wrote, c.streamed, w.Flushed)
			}
		})
	}
}

// TestClientWriterCeiling: past max_stream_bytes a stream ends with an error event, any other
// body is torn; the chunk over the ceiling never goes out.
func TestClientWriterCeiling(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      Dialect
		header http.Header
		ender  streamEnder
		rest   string // what follows the chunk under the ceiling
		torn   bool
	}{
		{name: "an OpenAI stream", header: sseHead, rest: `data: {"error":{"message":"stream exceeded size limit","type":"upstream_error","code":"stream_too_large"}}` + "\n\n"},
		{name: "an Anthropic stream", d: Anthropic, header: sseHead,
			rest: "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"stream exceeded size limit\"}}\n\n"},
		{name: "a translated stream", header: sseHead, ender: fixedEnder("event: the translation's own\n\n"),
			rest: "event: the translation's own\n\n"},
		{name: "a body", header: jsonHead, torn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c := newClient(w, tc.d, 10, servedBy{})
			c.ender = tc.ender
			c.Head(200, tc.header, -1)
			if err := c.Chunk([]byte("0123456789"), true); err != nil {
				t.Fatal(err)
			}
			if err := c.Chunk([]byte("x"), true); err != errStreamTooLarge {
				t.Fatalf("over the ceiling: %v", err)
			}
			if got := strings.TrimPrefix(w.Body.String(), "0123456789"); got != tc.rest || c.torn != tc.torn {
				t.Fatalf("then %q torn %v, want %q torn %v", got, c.torn, tc.rest, tc.torn)
			}
		})
	}
}

type fixedEnder string

func (f fixedEnder) endEvent(string) ([]byte, bool) { return []byte(f), true }

func TestClientWriterFail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      Dialect
		head   http.Header // the head already written (nil: none)
		err    error
		status int    // the answer's status afterwards (0: none written)
		body   string // in what the client got after the head
		reason string
		torn   bool
	}{
		{name: "a relay error before the head", err: errNoProvider("m"), status: 404, body: `"message":"no provider for model m"`,
			reason: "no provider for model m"},
		{name: "in the route's dialect", d: Anthropic, err: errNoProvider("m"), status: 404, body: `"type":"not_found_error"`,
			reason: "no provider for model m"},
		{name: "a lost target", err: errTargetLost, status: 502, body: `"code":"worker_lost"`, reason: "worker lost"},
		{name: "any other failure is the upstream's", err: fmt.Errorf("read: boom"), status: 502,
			body: `"message":"upstream error: read: boom"`, reason: "upstream error: read: boom"},
		{name: "a client that left gets nothing", err: errClientGone},
		{name: "a cancelled request gets nothing", err: context.Canceled},
		{name: "a stream over the ceiling was ended already", err: errStreamTooLarge},
		{name: "an answer a sink cut short before the head", err: &cutShort{err: errUpstream("answer too large to translate")},
			status: 502, body: `"message":"upstream error: answer too large to translate"`, reason: "upstream error: answer too large to translate"},
		{name: "a stream that fails midway ends with an error event", head: sseHead, err: errTargetLost, status: 200,
			body: `data: {"error":{"message":"worker lost","type":"upstream_error","code":"worker_lost"}}`},
		{name: "a stream a sink cut short", head: sseHead, err: &cutShort{err: &relayError{status: 502, message: "event too large"}},
			status: 200, body: `"message":"event too large"`},
		{name: "a body that fails midway is torn", head: jsonHead, err: errTargetLost, status: 200, torn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c := newClient(w, tc.d, 0, servedBy{})
			if tc.head != nil {
				c.Head(200, tc.head, -1)
			}
			c.fail(tc.err)
			if c.status != tc.status || c.reason != tc.reason || c.torn != tc.torn || c.wrote != (tc.status != 0) {
				t.Fatalf("status %d reason %q torn %v wrote %v", c.status, c.reason, c.torn, c.wrote)
			}
			if tc.status != 0 && w.Code != tc.status {
				t.Fatalf("code %d, want %d", w.Code, tc.status)
			}
			if !strings.Contains(w.Body.String(), tc.body) || (tc.body == "" && w.Body.Len() != 0) {
				t.Fatalf("body %q, want %q in it", w.Body, tc.body)
			}
		})
	}
}

func TestClientWriterAnswerWith(t *testing.T) {
	w := httptest.NewRecorder()
	c := newClient(w, OpenAI, 0, servedBy{})
	c.answerWith(func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("<problem/>"))
	})
	if !c.wrote || c.status != 503 || w.Code != 503 || w.Body.String() != "<problem/>" {
		t.Fatalf("wrote %v status %d: %d %q", c.wrote, c.status, w.Code, w.Body)
	}
}
