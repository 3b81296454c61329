package ingress

import (
	"net/http"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// TestRefusalReasons walks every way ingress refuses a request, through Resolve and Check as
// the server calls them, and checks each names its reason from the fixed set.
func TestRefusalReasons(t *testing.T) {
	now := time.Now().Unix()
	circuit := &Circuit{ID: fixtureCircuitID, Subdomain: "llama", Pool: "p", AllowList: ParseAllowList(ptr("198.51.100.0/24"))}
	table := NewTable(Config{WildcardDomain: ".models.example.com"}, []Circuit{*circuit})
	v := NewVerifier([]byte(fixtureSecret))
	inside, outside := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("203.0.113.9")
	check := func(auth string, ip netip.Addr) *Problem {
		r, _ := http.NewRequest(http.MethodPost, "http://llama.models.example.com/v1/chat/completions", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		return v.Check(r, circuit, ip)
	}
	cases := []struct {
		name string
		p    *Problem
		want string
	}{
		{"unknown subdomain", table.Resolve("nope.models.example.com").Problem(), ReasonUnknownSubdomain},
		{"address outside the allow-list", check("Bearer "+fixtureToken(t), outside), ReasonClientIP},
		{"no Authorization", check("", inside), ReasonMissingToken},
		{"Basic", check("Basic dXNlcjpwYXNz", inside), ReasonScheme},
		{"bad signature", check("Bearer "+hs256(t, map[string]any{"id": fixtureCircuitID}, "other"), inside), ReasonInvalidToken},
		{"garbage", check("Bearer not-a-token", inside), ReasonInvalidToken},
		{"expired", check("Bearer "+hs256(t, map[string]any{"id": fixtureCircuitID, "exp": now - 60}, fixtureSecret), inside), ReasonExpiredToken},
		{"another circuit's token", check("Bearer "+hs256(t, map[string]any{"id": "other-circuit"}, fixtureSecret), inside), ReasonTokenMismatch},
	}
	for _, tc := range cases {
		if tc.p == nil {
			t.Errorf("%s: not refused", tc.name)
			continue
		}
		if got := tc.p.Reason(); got != tc.want {
			t.Errorf("%s: reason %q, want %q (%s)", tc.name, got, tc.want, tc.p.Msg)
		}
		if !slices.Contains(Reasons(), tc.p.Reason()) {
			t.Errorf("%s: reason %q is not in Reasons()", tc.name, tc.p.Reason())
		}
	}
	if p := check("Bearer "+fixtureToken(t), inside); p != nil {
		t.Fatalf("the fixture token was refused: %s", p.Msg)
	}
	for _, p := range []*Problem{WorkerNotAvailable(), ContainerConnectionRefused()} {
		if p.Reason() != "" {
			t.Errorf("%s is no refusal of the caller, but has reason %q", p.Msg, p.Reason())
		}
	}
}
