package ingress

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// BenchmarkDecision is one request's whole ingress decision on a circuit host, with 10,000
// circuits in the table: Host and client IP from the request (behind a trusted proxy), table
// lookup, a CIDR allow-list, and (sub-benchmark "token") full HS256 verification of the token;
// "public" is the same request on an open_to_public circuit, which shows what the JWT costs.
func BenchmarkDecision(b *testing.B) {
	circuits := make([]Circuit, 10000)
	for i := range circuits {
		circuits[i] = Circuit{
			ID:        fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
			Subdomain: fmt.Sprintf("model-%d", i),
			AllowList: ParseAllowList(ptr("10.0.0.0/8, 192.168.0.0/16, 2001:db8::/32, 198.51.100.0/24")),
			Pool:      fmt.Sprintf("circuit:%d", i),
		}
	}
	circuits[7777].ID = fixtureCircuitID
	circuits[8888].OpenToPublic = true
	router := NewRouter(NewTable(Config{WildcardDomain: ".models.example.com"}, circuits))
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	for _, c := range []struct {
		name, host string
		v          Verifier
	}{
		{"token", "model-7777", NewVerifier([]byte(fixtureSecret))},
		{"token-uncached", "model-7777", Verifier{Secret: []byte(fixtureSecret)}},
		{"public", "model-8888", NewVerifier([]byte(fixtureSecret))},
	} {
		name, host, v := c.name, c.host, c.v
		r := httptest.NewRequest(http.MethodPost, "http://"+host+".models.example.com:443/v1/chat/completions", nil)
		r.RemoteAddr = "127.0.0.1:40000"
		r.Header.Set("X-Forwarded-For", "198.51.100.7")
		r.Header.Set("Authorization", "Bearer "+fixtureToken(b))
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res := router.Resolve(Host(r, trusted))
				if res.Kind != HostCircuit {
					b.Fatalf("resolved %v", res.Kind)
				}
				ip, _ := ClientIP(r, trusted)
				if p := v.Check(r, res.Circuit, ip); p != nil {
					b.Fatalf("denied: %s", p.Msg)
				}
			}
		})
	}
}
