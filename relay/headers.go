package relay

import (
	"net/http"
	"net/textproto"
	"strings"

	"modelrelay/protocol"
)

// hopByHop are the headers that describe one connection, not the message (RFC 9110 7.6.1),
// plus the two a proxy always recomputes. Filtering happens here and only here.
var hopByHop = map[string]bool{
	"Connection":          true,
	"Keep-Alive":          true,
	"Proxy-Connection":    true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
	"Host":                true,
	"Content-Length":      true,
}

// endToEnd reports whether header name (canonical form) may cross the relay, given the names
// the message's Connection header lists.
func endToEnd(name string, connectionListed map[string]bool) bool {
	if hopByHop[name] || strings.HasPrefix(name, "Proxy-") {
		return false
	}
	return !connectionListed[name]
}

func connectionListed(h http.Header) map[string]bool {
	values := h.Values("Connection")
	if len(values) == 0 {
		return nil
	}
	listed := make(map[string]bool)
	for _, v := range values {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				listed[textproto.CanonicalMIMEHeaderKey(name)] = true
			}
		}
	}
	return listed
}

// filterHeader returns the end-to-end subset of h.
func filterHeader(h http.Header) http.Header {
	listed := connectionListed(h)
	out := make(http.Header, len(h))
	for name, values := range h {
		if endToEnd(name, listed) {
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
