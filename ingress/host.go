package ingress

import (
	"net/http"
	"net/netip"
	"strings"
)

// Host returns the name a request was addressed to, normalized for Table.Resolve: the Host
// header, or X-Forwarded-Host when the TCP peer is a trusted proxy (its right-most entry, the
// one the nearest proxy wrote), without port, lowercased, without trailing dots.
func Host(r *http.Request, trusted []netip.Prefix) string {
	host := r.Host
	if fwd := r.Header.Values("X-Forwarded-Host"); len(fwd) > 0 {
		if peer, ok := parseHop(r.RemoteAddr); ok && isTrusted(trusted, peer) {
			for h := range fromRight(fwd) {
				host = h
				break
			}
		}
	}
	return normalizeHost(host)
}

// normalizeHost cuts the port, lowercases ASCII only and trims trailing dots. It is idempotent.
// Lowercasing is ASCII-only on purpose: Unicode case folding would let a name such as
// "\u212Aey.models.example.com" (Kelvin sign) collide with a registered "key" subdomain.
func normalizeHost(h string) string {
	h = strings.Trim(h, hostSpace)
	if strings.HasPrefix(h, "[") {
		// An IPv6 literal; anything but "[addr]" or "[addr]:port" is left whole, so it can
		// never look like a name inside the wildcard domain.
		if end := strings.IndexByte(h, ']'); end > 0 && validPortSuffix(h[end+1:]) {
			if _, err := netip.ParseAddr(h[1:end]); err == nil {
				h = h[1:end]
			}
		}
	} else if i := strings.IndexByte(h, ':'); i >= 0 && strings.IndexByte(h[i+1:], ':') < 0 {
		h = h[:i]
	} // Two or more colons without brackets: a bare IPv6 literal, kept whole.
	return strings.TrimRight(lowerASCII(h), "."+hostSpace)
}

// hostSpace is the blank space a proxy may leave around a forwarded host.
const hostSpace = " \t"

func validPortSuffix(s string) bool {
	return s == "" || s[0] == ':' && strings.IndexByte(s[1:], ':') < 0
}

func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + ('a' - 'A')
				}
			}
			return string(b)
		}
	}
	return s
}
