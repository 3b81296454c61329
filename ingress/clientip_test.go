package ingress

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted, err := ParseTrusted([]string{"10.0.0.0/8", " 2001:db8:ffff::/48 ", ""})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		trusted []netip.Prefix
		peer    string
		xff     []string
		want    string // "" = not determined
	}{
		{"no proxies, peer", nil, "192.0.2.1:5000", nil, "192.0.2.1"},
		{"no proxies, spoofed XFF ignored", nil, "192.0.2.1:5000", []string{"10.9.9.9"}, "192.0.2.1"},
		{"untrusted peer, spoofed XFF ignored", trusted, "192.0.2.1:5000", []string{"198.51.100.7, 10.0.0.1"}, "192.0.2.1"},
		{"trusted peer, no XFF", trusted, "10.0.0.5:5000", nil, "10.0.0.5"},
		{"trusted peer, one hop", trusted, "10.0.0.5:5000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"client-written entries left of the real one ignored", trusted, "10.0.0.5:5000", []string{"1.1.1.1, 2.2.2.2, 198.51.100.7"}, "198.51.100.7"},
		{"trusted hops skipped", trusted, "10.0.0.5:5000", []string{"198.51.100.7, 10.0.0.3, 10.0.0.4"}, "198.51.100.7"},
		{"spoofed trusted-looking entry left of client", trusted, "10.0.0.5:5000", []string{"10.0.0.66, 198.51.100.7"}, "198.51.100.7"},
		{"repeated headers in order", trusted, "10.0.0.5:5000", []string{"1.1.1.1, 198.51.100.7", "10.0.0.3"}, "198.51.100.7"},
		{"every hop trusted: left-most", trusted, "10.0.0.5:5000", []string{"10.0.0.2, 10.0.0.3"}, "10.0.0.2"},
		{"blank entries skipped", trusted, "10.0.0.5:5000", []string{" , 198.51.100.7 ,, "}, "198.51.100.7"},
		{"entry with port", trusted, "10.0.0.5:5000", []string{"198.51.100.7:4711"}, "198.51.100.7"},
		{"IPv6 entry", trusted, "10.0.0.5:5000", []string{"2001:DB8::7"}, "2001:db8::7"},
		{"bracketed IPv6 entry with port", trusted, "10.0.0.5:5000", []string{"[2001:db8::7]:443"}, "2001:db8::7"},
		{"IPv6 trusted peer", trusted, "[2001:db8:ffff::1]:5000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"IPv4-mapped peer is IPv4", trusted, "[::ffff:10.0.0.5]:5000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"IPv4-mapped entry is IPv4", trusted, "10.0.0.5:5000", []string{"::ffff:198.51.100.7"}, "198.51.100.7"},
		{"garbage where the client should be", trusted, "10.0.0.5:5000", []string{"198.51.100.7, unknown"}, ""},
		{"unparseable peer", trusted, "@", []string{"198.51.100.7"}, ""},
		{"empty peer", nil, "", nil, ""},
		{"peer without port", nil, "192.0.2.1", nil, "192.0.2.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "http://x/", nil)
			r.RemoteAddr = tc.peer
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			ip, ok := ClientIP(r, tc.trusted)
			got := ""
			if ok {
				got = ip.String()
			}
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("ClientIP = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

func TestClientIPMappedTrustedPrefix(t *testing.T) {
	// A prefix written in IPv4-mapped form, not through ParseTrusted, still trusts IPv4 peers.
	trusted := []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}
	r := httptest.NewRequest(http.MethodGet, "http://x/", nil)
	r.RemoteAddr = "10.0.0.5:5000"
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	if ip, ok := ClientIP(r, trusted); !ok || ip.String() != "198.51.100.7" {
		t.Fatalf("ClientIP = %v, %v", ip, ok)
	}
}

func TestParseTrustedRejectsBadEntries(t *testing.T) {
	for _, in := range [][]string{{"10.0.0.0/33"}, {"10.0.0.0/8", "proxy.local"}} {
		if _, err := ParseTrusted(in); err == nil {
			t.Errorf("ParseTrusted(%q) accepted a bad entry", in)
		}
	}
	got, err := ParseTrusted([]string{"::ffff:10.1.2.3/104", "192.168.7.9/16"})
	if err != nil || len(got) != 2 || got[0].String() != "10.0.0.0/8" || got[1].String() != "192.168.0.0/16" {
		t.Fatalf("ParseTrusted = %v, %v", got, err)
	}
}
