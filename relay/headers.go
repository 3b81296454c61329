package relay

import (
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"

	"modelrelay/protocol"
)

// filterHeader returns the end-to-end subset of h, without the headers that name the client
// (forwardHeaders sets those from what the relay can vouch for) and without the relay's own
// client keys (dropKeys).
func filterHeader(h http.Header) http.Header {
	out := make(http.Header, len(h)+3)
	copyEndToEnd(out, h, namesClient)
	dropKeys(out)
	return out
}

// field is h.Get(name) for a name in canonical form, as every name the relay looks up is and
// as net/http and relay/h1 store them: Get canonicalizes its argument on every call, which
// cost more than the lookup (a request made eight such calls).
func field(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// copyEndToEnd copies src's end-to-end headers into dst, except those skip names (nil: none).
func copyEndToEnd(dst, src http.Header, skip func(name string) bool) {
	listed := protocol.ConnectionListed(src["Connection"])
	for name, values := range src {
		if protocol.EndToEnd(name, listed) && (skip == nil || !skip(name)) {
			dst[name] = values
		}
	}
}

// namesClient reports whether a request header claims who the client is or how it connected.
// A client can write any of them, so none reaches a target as the client sent it.
func namesClient(name string) bool {
	if name == "" {
		return false
	}
	switch name[0] | 0x20 { // every name below begins with f, t or x: most names are none of them
	case 'f', 't', 'x':
	default:
		return false
	}
	if len(name) > 12 && strings.EqualFold(name[:12], "x-forwarded-") {
		return true
	}
	for _, h := range [...]string{"forwarded", "x-real-ip", "x-client-ip", "true-client-ip", "x-original-forwarded-for"} {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}

// forwardHeaders tells the target who asked, as the stock AppProxy worker does: the client is
// the address the relay vouches for (the TCP peer, or through trusted proxies only), the proto
// is how it reached us, the host is the one it asked for. The three values are kept in v,
// memory the caller holds already.
func forwardHeaders(h http.Header, r *http.Request, trusted []netip.Prefix, v *[3]string) {
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	*v = [3]string{peerIP(r, trusted), proto, strings.ToLower(r.Host)}
	h["X-Forwarded-For"], h["X-Forwarded-Proto"], h["X-Forwarded-Host"] = v[0:1:1], v[1:2:2], v[2:3:3]
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

// httpHeaders turns a worker's response headers into an http.Header (the client writer
// filters them). The values share one slice, each capped at its own length.
func httpHeaders(src protocol.Headers) http.Header {
	h := make(http.Header, len(src))
	values := make([]string, 0, len(src))
	for name, value := range src {
		values = append(values, value)
		h[textproto.CanonicalMIMEHeaderKey(name)] = values[len(values)-1 : len(values) : len(values)]
	}
	return h
}
