package ingress

import (
	"net/netip"
	"testing"
)

func TestParseAllowList(t *testing.T) {
	cases := []struct {
		name string
		in   *string
		want string // canonical networks; "" = unrestricted
	}{
		{"nil", nil, ""},
		{"empty", ptr(""), ""},
		{"blank", ptr("   "), ""},
		{"only commas", ptr(" , ,, "), ""},
		{"garbage only", ptr("not-an-ip, 10.0.0.0/33, 1.2.3.4/-1, ::1/129, 300.1.1.1"), ""},
		{"bare IPv4", ptr("10.1.2.3"), "10.1.2.3/32"},
		{"bare IPv6", ptr("2001:db8::1"), "2001:db8::1/128"},
		{"CIDR", ptr("10.0.0.0/8"), "10.0.0.0/8"},
		{"CIDR with host bits", ptr("192.168.1.77/24"), "192.168.1.0/24"},
		{"IPv6 CIDR with host bits", ptr("2001:db8::abcd/32"), "2001:db8::/32"},
		{"trimmed, blanks skipped", ptr(" 10.0.0.1 ,, 10.0.0.2/31 ,"), "10.0.0.1/32,10.0.0.2/31"},
		{"invalid entries skipped", ptr("10.0.0.1, bogus, 10.0.0.0/99, 172.16.0.0/12"), "10.0.0.1/32,172.16.0.0/12"},
		{"IPv4-mapped bare", ptr("::ffff:10.0.0.1"), "10.0.0.1/32"},
		{"IPv4-mapped CIDR", ptr("::ffff:10.0.0.0/104"), "10.0.0.0/8"},
		{"netmask form", ptr("10.1.2.3/255.255.0.0"), "10.1.0.0/16"},
		{"hostmask form", ptr("10.1.2.3/0.0.0.255"), "10.1.2.0/24"},
		{"non-contiguous mask", ptr("10.1.2.3/255.0.255.0"), ""},
		{"leading-zero prefix", ptr("10.1.2.3/024"), "10.1.2.0/24"},
		{"zoned address", ptr("fe80::1%eth0"), ""},
		{"zero prefix", ptr("0.0.0.0/0"), "0.0.0.0/0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := ParseAllowList(tc.in)
			if got := a.String(); got != tc.want {
				t.Fatalf("ParseAllowList = %q, want %q", got, tc.want)
			}
			if a.Restricted() != (tc.want != "") {
				t.Fatalf("Restricted() = %v for %q", a.Restricted(), tc.want)
			}
		})
	}
}

func TestAllowListAllows(t *testing.T) {
	cases := []struct {
		list  *string
		ip    string // "" = invalid (unknown) address
		allow bool
	}{
		{nil, "203.0.113.9", true},
		{nil, "", true},
		{ptr(""), "2001:db8::1", true},
		{ptr("garbage"), "203.0.113.9", true},
		{ptr("garbage"), "", true},
		{ptr("10.1.2.3"), "10.1.2.3", true},
		{ptr("10.1.2.3"), "10.1.2.4", false},
		{ptr("10.1.2.3"), "", false},
		{ptr("10.1.2.3"), "::ffff:10.1.2.3", true},
		{ptr("10.1.2.3"), "::ffff:10.1.2.4", false},
		{ptr("::ffff:10.1.2.3"), "10.1.2.3", true},
		{ptr("2001:db8::1"), "2001:db8::1", true},
		{ptr("2001:db8::1"), "2001:db8::2", false},
		{ptr("2001:db8::1"), "fe80::1%eth0", false},
		{ptr("fe80::/10"), "fe80::1%eth0", true},
		{ptr("192.168.1.77/24"), "192.168.1.1", true},
		{ptr("192.168.1.77/24"), "192.168.2.1", false},
		{ptr("10.0.0.0/8, 2001:db8::/32"), "2001:db8:ffff::1", true},
		{ptr("10.0.0.0/8, 2001:db8::/32"), "10.255.255.255", true},
		{ptr("10.0.0.0/8, 2001:db8::/32"), "11.0.0.0", false},
		{ptr("10.0.0.0/8, 2001:db8::/32"), "2001:db9::1", false},
		{ptr("bad, 10.0.0.0/8"), "192.0.2.1", false},
		{ptr("::/0"), "10.0.0.1", false}, // an IPv6 network never holds an IPv4 client
		{ptr("0.0.0.0/0"), "2001:db8::1", false},
		{ptr("0.0.0.0/0"), "::ffff:192.0.2.1", true},
	}
	for _, tc := range cases {
		var ip netip.Addr
		if tc.ip != "" {
			ip = netip.MustParseAddr(tc.ip)
		}
		list := "<nil>"
		if tc.list != nil {
			list = *tc.list
		}
		if got := ParseAllowList(tc.list).Allows(ip); got != tc.allow {
			t.Errorf("ParseAllowList(%q).Allows(%q) = %v, want %v", list, tc.ip, got, tc.allow)
		}
	}
}
