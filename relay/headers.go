package relay

import (
	"net/http"
	"net/textproto"
	"strings"

	"modelrelay/protocol"
)

// filterHeader returns the end-to-end subset of h.
func filterHeader(h http.Header) http.Header {
	listed := protocol.ConnectionListed(h.Values("Connection"))
	out := make(http.Header, len(h))
	for name, values := range h {
		if protocol.EndToEnd(name, listed) {
			out[name] = values
		}
	}
	return out
}

// wireHeaders converts end-to-end headers to the relay protocol's form: lowercase names,
// repeated values joined with ", ".
func wireHeaders(h http.Header) protocol.Headers {
	if len(h) == 0 {
		return nil
	}
	out := make(protocol.Headers, len(h))
	for name, values := range h {
		if len(values) > 0 { // a nil value is a marker for the HTTP client, never a header
			out[strings.ToLower(name)] = strings.Join(values, ", ")
		}
	}
	return out
}

// httpHeaders turns a worker's response headers into an http.Header (writeHead filters them).
func httpHeaders(src protocol.Headers) http.Header {
	h := make(http.Header, len(src))
	for name, value := range src {
		h[textproto.CanonicalMIMEHeaderKey(name)] = []string{value}
	}
	return h
}
