package ingress

import (
	"fmt"
	"iter"
	"net/http"
	"net/netip"
	"strings"
)

// ClientIP finds the address a request came from. It is the TCP peer, unless the peer is one
// of the trusted proxies; then X-Forwarded-For (every header, in order) is read from the right,
// skipping hops that are trusted proxies themselves, and the first other entry is the client.
// Anything left of that entry was written by the client and is not believed. If every hop is
// trusted, the left-most entry is used (as the stock worker does). ok is false when the address
// cannot be determined: an unparseable peer, or an unparseable entry where the client should be.
func ClientIP(r *http.Request, trusted []netip.Prefix) (ip netip.Addr, ok bool) {
	peer, ok := parseHop(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if !isTrusted(trusted, peer) {
		return peer, true
	}
	leftmost := peer
	for hop := range fromRight(r.Header.Values("X-Forwarded-For")) {
		addr, ok := parseHop(hop)
		if !ok || !isTrusted(trusted, addr) {
			return addr, ok
		}
		leftmost = addr
	}
	return leftmost, true
}

// ParseTrusted reads the trusted_proxies setting. Unlike an allow-list, a bad entry is an error:
// a silently dropped proxy would make every request through it look like it came from the proxy.
func ParseTrusted(entries []string) ([]netip.Prefix, error) {
	var nets []netip.Prefix
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		p, err := parseNetwork(e)
		if err != nil {
			return nil, fmt.Errorf("trusted_proxies: %w", err)
		}
		nets = append(nets, p)
	}
	return nets, nil
}

// fromRight yields the non-blank comma-separated entries of a list-valued header, across all
// its lines, right-most first: the order in which proxies' additions can be believed.
func fromRight(values []string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := len(values) - 1; i >= 0; i-- {
			rest := values[i]
			for rest != "" {
				var e string
				if j := strings.LastIndexByte(rest, ','); j >= 0 {
					rest, e = rest[:j], rest[j+1:]
				} else {
					rest, e = "", rest
				}
				if e = strings.TrimSpace(e); e != "" && !yield(e) {
					return
				}
			}
		}
	}
}

// parseHop reads an address as it appears in RemoteAddr or in X-Forwarded-For: bare, or with a
// port (some proxies append one), IPv6 possibly in brackets. The shape picks the parser, so the
// common bare entry costs no failed attempt (and no error allocation).
func parseHop(s string) (netip.Addr, bool) {
	withPort := strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1
	if withPort {
		if ap, err := netip.ParseAddrPort(s); err == nil {
			return canonical(ap.Addr()), true
		}
		if s = strings.TrimPrefix(s, "["); !strings.HasSuffix(s, "]") {
			return netip.Addr{}, false
		}
		s = s[:len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return canonical(a), true
}

// isTrusted matches canonical ip against the proxies, accepting prefixes written in
// IPv4-mapped form too, since callers may build them without ParseTrusted.
func isTrusted(trusted []netip.Prefix, ip netip.Addr) bool {
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
		if ip.Is4() && p.Addr().Is4In6() && p.Contains(netip.AddrFrom16(ip.As16())) {
			return true
		}
	}
	return false
}
