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
		out[strings.ToLower(name)] = strings.Join(values, ", ")
	}
	return out
}

// copyWireHeaders sets a worker's response headers on dst, filtered like any other.
func copyWireHeaders(dst http.Header, src protocol.Headers) {
	h := make(http.Header, len(src))
	for name, value := range src {
		h[textproto.CanonicalMIMEHeaderKey(name)] = []string{value}
	}
	for name, values := range filterHeader(h) {
		dst[name] = values
	}
}
