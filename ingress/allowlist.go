package ingress

import (
	"fmt"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"
)

// AllowList is a circuit's parsed allowed_client_ips. The zero value admits everyone.
type AllowList struct {
	nets []netip.Prefix
}

// ParseAllowList reads allowed_client_ips: comma-separated CIDRs or bare IPs, host bits allowed.
// Invalid entries are skipped rather than failing the circuit, as the stock worker does, so one
// typo never locks out the addresses that were listed correctly. nil, blank or nothing valid
// leaves the circuit unrestricted.
func ParseAllowList(s *string) AllowList {
	if s == nil {
		return AllowList{}
	}
	var nets []netip.Prefix
	for entry := range strings.SplitSeq(*s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if p, err := parseNetwork(entry); err == nil {
			nets = append(nets, p)
		}
	}
	return AllowList{nets: nets}
}

// Restricted reports whether any network was listed.
func (a AllowList) Restricted() bool { return len(a.nets) > 0 }

// Allows reports whether ip may reach the circuit. An unrestricted list admits every caller,
// even one whose address is unknown (the stock worker does not look at the address then); a
// restricted list denies an invalid address.
func (a AllowList) Allows(ip netip.Addr) bool {
	if len(a.nets) == 0 {
		return true
	}
	if !ip.IsValid() {
		return false
	}
	ip = canonical(ip)
	for _, p := range a.nets {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// String lists the networks in canonical CIDR form, comma-separated ("" when unrestricted).
func (a AllowList) String() string {
	parts := make([]string, len(a.nets))
	for i, p := range a.nets {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// canonical drops what must not affect matching: the IPv4-mapped wrapper (a dual-stack listener
// reports IPv4 peers as ::ffff:a.b.c.d) and any IPv6 zone.
func canonical(ip netip.Addr) netip.Addr {
	return ip.Unmap().WithZone("")
}

// parseNetwork reads one entry the way Python's ip_network(strict=False) does: a bare address
// is a host route; the part after "/" is a prefix length or, for IPv4, a netmask or hostmask.
// IPv4-mapped entries are turned into IPv4 networks so they match unmapped client addresses.
func parseNetwork(entry string) (netip.Prefix, error) {
	addrText, maskText, hasMask := strings.Cut(entry, "/")
	addr, err := netip.ParseAddr(addrText)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("network %q: %w", entry, err)
	}
	if addr.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("network %q: zoned address", entry)
	}
	n := addr.BitLen()
	if hasMask {
		if n, err = maskBits(addr, maskText); err != nil {
			return netip.Prefix{}, fmt.Errorf("network %q: %w", entry, err)
		}
	}
	if addr.Is4In6() && n >= 96 {
		addr, n = addr.Unmap(), n-96
	}
	return netip.PrefixFrom(addr, n).Masked(), nil
}

// maskBits turns the text after "/" into a prefix length for addr's family.
func maskBits(addr netip.Addr, mask string) (int, error) {
	if isDigits(mask) {
		// Python accepts leading zeros ("/024"); more than three digits is out of range anyway.
		if len(mask) > 3 {
			return 0, fmt.Errorf("prefix length %q out of range", mask)
		}
		n, err := strconv.Atoi(mask)
		if err != nil || n > addr.BitLen() {
			return 0, fmt.Errorf("prefix length %q out of range", mask)
		}
		return n, nil
	}
	m, err := netip.ParseAddr(mask)
	if err != nil || !addr.Is4() || !m.Is4() {
		return 0, fmt.Errorf("bad mask %q", mask)
	}
	b := m.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	if n, ok := leadingOnes(v); ok {
		return n, nil
	}
	if n, ok := leadingOnes(^v); ok { // hostmask form, 0.0.0.255
		return n, nil
	}
	return 0, fmt.Errorf("mask %q is not contiguous", mask)
}

// leadingOnes reports the length of v's run of leading one bits, if nothing but zeros follows.
func leadingOnes(v uint32) (int, bool) {
	n := bits.LeadingZeros32(^v)
	return n, bits.TrailingZeros32(v) >= 32-n
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
