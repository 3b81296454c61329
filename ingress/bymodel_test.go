package ingress

import (
	"net/http/httptest"
	"net/netip"
	"slices"
	"testing"
)

// byModelTable has a circuit of each kind for routing by model: the caller's own private one
// (fixtureCircuitID), another's private one, a public one, and a public one fenced to a LAN.
func byModelTable() *Table {
	lan := ParseAllowList(ptr("10.0.0.0/8"))
	return NewTable(Config{WildcardDomain: ".models.example.com"}, []Circuit{
		{ID: fixtureCircuitID, Subdomain: "mine", Pool: "circuit:mine"},
		{ID: "other", Subdomain: "other", Pool: "circuit:other"},
		{ID: "pub", Subdomain: "pub", Pool: "circuit:pub", OpenToPublic: true},
		{ID: "pub-lan", Subdomain: "pub-lan", Pool: "circuit:pub-lan", OpenToPublic: true, AllowList: lan},
	})
}

// callerOf is the caller of a request with the given method and Authorization from ip.
func callerOf(t *testing.T, method, auth string, ip netip.Addr) Caller {
	t.Helper()
	r := httptest.NewRequest(method, "http://models.example.com/v1/chat/completions", nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	return Verifier{Secret: []byte(fixtureSecret)}.Caller(r, ip)
}

func TestPoolsFor(t *testing.T) {
	tbl := byModelTable()
	token := "Bearer " + fixtureToken(t)
	inside, outside := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("192.0.2.1")
	all := []string{"circuit:other", "circuit:mine", "circuit:pub-lan", "circuit:pub"}
	cases := []struct {
		name   string
		method string
		auth   string
		ip     netip.Addr
		pools  []string
		want   []string
	}{
		{"no token: the public ones, in order", "POST", "", inside, all, []string{"circuit:pub-lan", "circuit:pub"}},
		{"a token adds its own circuit", "POST", token, inside, all, []string{"circuit:mine", "circuit:pub-lan", "circuit:pub"}},
		{"allow-lists apply", "POST", token, outside, all, []string{"circuit:mine", "circuit:pub"}},
		{"a bad token counts as none", "POST", "Bearer junk", outside, all, []string{"circuit:pub"}},
		{"private circuits only: the relay's pool, as if nobody served it", "POST", "", inside,
			[]string{"circuit:mine", "circuit:other"}, []string{"relay"}},
		{"fenced out of every one: the relay's pool", "POST", "", outside, []string{"circuit:pub-lan"}, []string{"relay"}},
		{"no circuit serves it", "POST", token, inside, nil, []string{"relay"}},
		{"a pool no circuit has (a stale index) is skipped", "POST", "", inside,
			[]string{"circuit:gone", "circuit:pub"}, []string{"circuit:pub"}},
		{"OPTIONS: the allow-lists alone", "OPTIONS", "", outside, all, []string{"circuit:other", "circuit:mine", "circuit:pub"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tbl.PoolsFor(callerOf(t, tc.method, tc.auth, tc.ip), tc.pools, "relay")
			if !slices.Equal(got, tc.want) {
				t.Errorf("PoolsFor = %q, want %q", got, tc.want)
			}
		})
	}
	if got := (*Table)(nil).PoolsFor(callerOf(t, "POST", token, inside), all, "relay"); !slices.Equal(got, []string{"relay"}) {
		t.Errorf("a nil table: %q, want the relay's pool", got)
	}
}

func TestModels(t *testing.T) {
	tbl := byModelTable()
	token := "Bearer " + fixtureToken(t)
	inside, outside := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("192.0.2.1")
	index := map[string][]string{
		"zeta":    {"circuit:pub"},
		"alpha":   {"circuit:pub-lan"},
		"private": {"circuit:mine"},
		"others":  {"circuit:other"},
		"shared":  {"circuit:other", "circuit:pub"}, // any one reachable circuit lists it
		"stale":   {"circuit:gone"},
	}
	own := []string{"local", "shared", "alpha", "local"}
	cases := []struct {
		name string
		auth string
		ip   netip.Addr
		want []string
	}{
		{"no token", "", inside, []string{"alpha", "shared", "zeta", "local"}},
		{"a token lists its private model", token, inside, []string{"alpha", "private", "shared", "zeta", "local"}},
		{"fenced out of a circuit: the relay's own model still shows", token, outside, []string{"private", "shared", "zeta", "local", "alpha"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tbl.Models(callerOf(t, "GET", tc.auth, tc.ip), index, own)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Models = %q, want %q", got, tc.want)
			}
		})
	}
	if got := tbl.Models(callerOf(t, "GET", "", inside), nil, nil); len(got) != 0 {
		t.Errorf("nothing served: %q", got)
	}
}
