package ingress

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestNormalizeHost(t *testing.T) {
	cases := []struct{ in, want string }{
		{"llama.models.example.com", "llama.models.example.com"},
		{"Llama.Models.Example.COM", "llama.models.example.com"},
		{"llama.models.example.com:8443", "llama.models.example.com"},
		{"LLAMA.models.example.com.:443", "llama.models.example.com"},
		{"llama.models.example.com.", "llama.models.example.com"},
		{"llama.models.example.com..", "llama.models.example.com"},
		{"127.0.0.1:8080", "127.0.0.1"},
		{"[::1]:8080", "::1"},
		{"[2001:DB8::1]", "2001:db8::1"},
		{"::1", "::1"}, // unbracketed IPv6: kept whole, not cut at a colon
		{"[::1]junk", "[::1]junk"},
		{"[not-ip.models.example.com]", "[not-ip.models.example.com]"},
		{"[::1]:80:90", "[::1]:80:90"},
		{"localhost", "localhost"},
		{"", ""},
		{" spaced.example.com \t", "spaced.example.com"},
		{"\u212Aey.models.example.com", "\u212Aey.models.example.com"}, // Kelvin sign is not "k"
	}
	for _, tc := range cases {
		if got := normalizeHost(tc.in); got != tc.want {
			t.Errorf("normalizeHost(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestHost(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cases := []struct {
		name string
		peer string
		host string
		fwd  []string
		want string
	}{
		{"Host header", "192.0.2.1:5000", "Llama.Models.Example.com:443", nil, "llama.models.example.com"},
		{"X-Forwarded-Host from untrusted peer ignored", "192.0.2.1:5000", "own.example.com", []string{"llama.models.example.com"}, "own.example.com"},
		{"X-Forwarded-Host from trusted peer", "10.0.0.5:5000", "10.0.0.9:8080", []string{"Llama.models.example.com:443"}, "llama.models.example.com"},
		{"right-most forwarded entry", "10.0.0.5:5000", "10.0.0.9", []string{"a.models.example.com, b.models.example.com"}, "b.models.example.com"},
		{"across repeated headers", "10.0.0.5:5000", "10.0.0.9", []string{"a.models.example.com", "c.models.example.com, "}, "c.models.example.com"},
		{"blank forwarded host falls back", "10.0.0.5:5000", "llama.models.example.com", []string{" , "}, "llama.models.example.com"},
		{"IPv4-mapped trusted peer", "[::ffff:10.0.0.5]:5000", "x", []string{"llama.models.example.com"}, "llama.models.example.com"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "http://placeholder/", nil)
			r.RemoteAddr, r.Host = tc.peer, tc.host
			for _, f := range tc.fwd {
				r.Header.Add("X-Forwarded-Host", f)
			}
			if got := Host(r, trusted); got != tc.want {
				t.Fatalf("Host = %q, want %q", got, tc.want)
			}
		})
	}
}
