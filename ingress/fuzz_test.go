package ingress

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func FuzzNormalizeHost(f *testing.F) {
	for _, s := range []string{
		"llama.models.example.com", "LLAMA.Models.Example.com:443", "[::1]:8080", "[2001:db8::1]",
		"::1", "a.b.models.example.com.", "evilmodels.example.com", "models.example.com", "[x]:1",
		"[fe80::1%eth0]:80", " a. :80", "\u212Aey.models.example.com", ".models.example.com", "",
	} {
		f.Add(s)
	}
	tbl := testTable()
	f.Fuzz(func(t *testing.T, in string) {
		h := normalizeHost(in)
		if again := normalizeHost(h); again != h {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, h, again)
		}
		if strings.HasSuffix(h, ".") || strings.IndexFunc(h, func(r rune) bool { return 'A' <= r && r <= 'Z' }) >= 0 {
			t.Fatalf("normalizeHost(%q) = %q keeps a trailing dot or upper case", in, h)
		}
		res := tbl.Resolve(h)
		switch res.Kind {
		case HostCircuit, HostUnknown:
			if h != res.Subdomain+".models.example.com" {
				t.Fatalf("Resolve(%q) gave subdomain %q outside the wildcard domain", h, res.Subdomain)
			}
			if res.Kind == HostCircuit && res.Circuit.Subdomain != res.Subdomain {
				t.Fatalf("Resolve(%q) gave circuit %q for subdomain %q", h, res.Circuit.Subdomain, res.Subdomain)
			}
		case HostOwn:
			if strings.HasSuffix(h, ".models.example.com") || h == "models.example.com" {
				t.Fatalf("Resolve(%q) = own, but the host is inside the wildcard domain", h)
			}
		}
	})
}

func FuzzParseAllowList(f *testing.F) {
	for _, s := range [][2]string{
		{"10.0.0.0/8", "10.1.2.3"}, {"192.168.1.77/24, ::1", "::ffff:192.168.1.9"},
		{" ,garbage, 2001:db8::/32", "2001:db8::1"}, {"10.1.2.3/255.255.0.0", "10.1.9.9"},
		{"10.1.2.3/0.0.0.255", "10.1.2.200"}, {"::ffff:10.0.0.0/104", "10.0.0.1"},
		{"fe80::/10", "fe80::1%eth0"}, {"", ""}, {"1.2.3.4/024", "1.2.3.4"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, list, client string) {
		a := ParseAllowList(&list)
		canon := a.String()
		if again := ParseAllowList(&canon).String(); again != canon {
			t.Fatalf("canonical form does not round-trip: %q -> %q -> %q", list, canon, again)
		}
		if a.Restricted() != (canon != "") {
			t.Fatalf("Restricted() = %v with networks %q", a.Restricted(), canon)
		}
		ip, err := netip.ParseAddr(client)
		if err != nil {
			if a.Restricted() && a.Allows(netip.Addr{}) {
				t.Fatalf("%q admits an unknown address", list)
			}
			return
		}
		allowed := a.Allows(ip)
		if !a.Restricted() && !allowed {
			t.Fatalf("unrestricted list %q refused %v", list, ip)
		}
		if ip.Is4() && a.Allows(netip.AddrFrom16(ip.As16())) != allowed {
			t.Fatalf("%q treats %v and its IPv4-mapped form differently", list, ip)
		}
	})
}

func FuzzAuthorization(f *testing.F) {
	fixture := fixtureToken(f)
	for _, s := range []string{
		"Bearer " + fixture, "BackendAI " + fixture, "bearer " + fixture, fixture, "", "Bearer ",
		"Basic dXNlcjpwYXNz", "Bearer a.b.c", "Bearer eyJhbGciOiJub25lIn0.e30.",
		"Bearer " + hs256(f, map[string]any{"id": fixtureCircuitID, "aud": "x"}, fixtureSecret),
		"Bearer " + hs256(f, map[string]any{"id": fixtureCircuitID, "exp": "soon"}, fixtureSecret),
	} {
		f.Add(s)
	}
	v := Verifier{Secret: []byte(fixtureSecret)}
	f.Fuzz(func(t *testing.T, header string) {
		token, p := bearerToken(header)
		if p != nil {
			if p.Status != 401 || len(p.Msg) > len("E20007: Unsupported authorization method ")+maxSchemeLen {
				t.Fatalf("bearerToken(%q) = %d %q", header, p.Status, p.Msg)
			}
			return
		}
		// "Bearer" alone passes with an empty token, which then fails verification (as in
		// the stock worker, where the empty token fails PyJWT's decode).
		scheme, _, _ := strings.Cut(header, " ")
		if scheme != "Bearer" && scheme != "BackendAI" || header != scheme+" "+token && (header != scheme || token != "") {
			t.Fatalf("bearerToken(%q) accepted token %q", header, token)
		}
		id, p := v.verify(token)
		if p != nil {
			if p.Status != 401 || !strings.HasPrefix(p.Msg, "E20008: Invalid authorization token (") {
				t.Fatalf("verify(%q) = %d %q", token, p.Status, p.Msg)
			}
			return
		}
		assertGenuine(t, token, id)
	})
}

// assertGenuine re-checks an accepted token without the JWT library: HS256 header, an HMAC that
// matches under the secret, no audience, and the id that verify reported.
func assertGenuine(t *testing.T, token, id string) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("accepted %q with %d segments", token, len(parts))
	}
	var header struct {
		Alg string `json:"alg"`
	}
	var claims map[string]any
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(hb, &header) != nil || json.Unmarshal(cb, &claims) != nil {
		t.Fatalf("accepted undecodable token %q", token)
	}
	mac := hmac.New(sha256.New, []byte(fixtureSecret))
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if header.Alg != "HS256" || !hmac.Equal(sig, mac.Sum(nil)) {
		t.Fatalf("accepted forged token %q (alg %q)", token, header.Alg)
	}
	if _, ok := claims["aud"]; ok {
		t.Fatalf("accepted token with aud: %q", token)
	}
	if want, _ := claims["id"].(string); want != id {
		t.Fatalf("verify reported id %q, token says %q", id, want)
	}
}

func FuzzClientIP(f *testing.F) {
	for _, s := range [][2]string{
		{"10.0.0.5:5000", "198.51.100.7"}, {"10.0.0.5:5000", "1.1.1.1, 198.51.100.7, 10.0.0.3"},
		{"[::ffff:10.0.0.5]:1", "[2001:db8::7]:443"}, {"192.0.2.1:5000", "10.0.0.1"},
		{"10.0.0.5:5000", "10.0.0.2,10.0.0.3"}, {"10.0.0.5:5000", "unknown"}, {"@", ""},
		{"[fe80::1%eth0]:80", " , ::ffff:1.2.3.4 ,"},
	} {
		f.Add(s[0], s[1])
	}
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	f.Fuzz(func(t *testing.T, peer, xff string) {
		r := httptest.NewRequest(http.MethodGet, "http://x/", nil)
		r.RemoteAddr = peer
		r.Header.Set("X-Forwarded-For", xff)
		ip, ok := ClientIP(r, trusted)
		if !ok {
			if ip.IsValid() {
				t.Fatalf("ClientIP(%q, %q) = %v but not ok", peer, xff, ip)
			}
			return
		}
		if !ip.IsValid() || ip.Is4In6() || ip.Zone() != "" {
			t.Fatalf("ClientIP(%q, %q) = %v, not canonical", peer, xff, ip)
		}
		p, _ := parseHop(peer)
		if !isTrusted(trusted, p) && ip != p {
			t.Fatalf("untrusted peer %q, but ClientIP took %v from %q", peer, ip, xff)
		}
		if ip == p {
			return
		}
		for e := range strings.SplitSeq(xff, ",") {
			if a, ok := parseHop(strings.TrimSpace(e)); ok && a == ip {
				return
			}
		}
		t.Fatalf("ClientIP(%q, %q) = %v, from neither peer nor header", peer, xff, ip)
	})
}
