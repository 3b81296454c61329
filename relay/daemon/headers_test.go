package daemon

import (
	"net/http"
	"testing"

	"modelrelay/protocol"
)

func TestBackendRequestHeaders(t *testing.T) {
	in := protocol.Headers{
		"authorization": "Bearer x", "x-api-key": "k", "anthropic-version": "2023-06-01",
		"content-type": "application/json", "host": "h", "content-length": "3",
		"Connection": "close, X-Trace", "x-trace": "1", "keep-alive": "1", "te": "trailers",
		"trailer": "x", "transfer-encoding": "chunked", "upgrade": "h2c", "proxy-authorization": "p",
		"proxy-foo": "p", "accept-encoding": "gzip", "bad name": "v", "x-crlf": "a\r\nb",
	}
	got := backendRequestHeaders(in)
	want := http.Header{}
	for _, k := range []string{"authorization", "x-api-key", "anthropic-version", "content-type"} {
		want.Set(k, in[k])
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k := range want {
		if got.Get(k) != want.Get(k) {
			t.Errorf("%s = %q, want %q", k, got.Get(k), want.Get(k))
		}
	}
}

func TestFrameHeaders(t *testing.T) {
	in := http.Header{
		"Content-Type": {"text/event-stream"}, "X-Multi": {"a", "b"}, "Content-Length": {"9"},
		"Connection": {"X-Gone"}, "X-Gone": {"1"}, "Transfer-Encoding": {"chunked"},
		"Retry-After": {"3"},
	}
	got := frameHeaders(in)
	want := protocol.Headers{"content-type": "text/event-stream", "x-multi": "a, b", "retry-after": "3"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
