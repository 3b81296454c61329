package relay

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// peerIP is the client address for the auth limiter: the TCP peer, or — only when the peer is
// a trusted proxy — the right-most X-Forwarded-For entry that is not itself trusted. (The
// ingress package applies the same rule for circuit allow-lists; relay must not import it.)
func peerIP(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	peer = peer.Unmap()
	if !inPrefixes(peer, trusted) {
		return canonical(host, peer)
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		parts := strings.Split(hops[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			addr, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				return peer.String() // a garbled chain is not to be believed past this point
			}
			if addr = addr.Unmap(); !inPrefixes(addr, trusted) {
				return addr.String()
			}
		}
	}
	return peer.String()
}

// canonical is addr's text: host itself when host already spells it so (no allocation, as for
// every peer a listener reports in IPv4), else its canonical form.
func canonical(host string, addr netip.Addr) string {
	var buf [64]byte
	if string(addr.AppendTo(buf[:0])) == host {
		return host
	}
	return addr.String()
}

func inPrefixes(addr netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
