package relay

import "testing"

// The guess throttle holds an IPv4 address, or an IPv6 /64, to account: one host cannot get
// fresh turns by moving through the addresses of its /64.
func TestGuesserIsTheAddressOrItsIPv6Prefix(t *testing.T) {
	for client, want := range map[string]string{
		"192.0.2.7":                 "192.0.2.7",
		"2001:db8:1:2:aaaa::1":      "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff:ffff::9": "2001:db8:1:2::/64",
		"2001:db8:1:3::1":           "2001:db8:1:3::/64",
		"fe80::1%eth0":              "fe80::/64",
		"::1":                       "::/64",
		"::ffff:192.0.2.7":          "::ffff:192.0.2.7", // peerIP unmaps these; one address either way
		"not an address":            "not an address",
	} {
		if got := guesser(client); got != want {
			t.Errorf("guesser(%q) = %q, want %q", client, got, want)
		}
	}
}
