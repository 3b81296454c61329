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
	// Names stay lowercase, as the frame has them: the backend request is written as given.
	want := http.Header{}
	for _, k := range []string{"authorization", "x-api-key", "anthropic-version", "content-type"} {
		want[k] = []string{in[k]}
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if len(got[k]) != 1 || got[k][0] != v[0] {
			t.Errorf("%s = %q, want %q", k, got[k], v)
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
