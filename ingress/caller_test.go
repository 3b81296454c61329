package ingress

import (
	"net/http/httptest"
	"net/netip"
	"slices"
	"testing"
)

func TestCallerFilter(t *testing.T) {
	v := Verifier{Secret: []byte(fixtureSecret)}
	fixture := fixtureToken(t)
	inside, outside := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("192.0.2.1")
	lan := ParseAllowList(ptr("10.0.0.0/8"))
	mine := &Circuit{ID: fixtureCircuitID, Pool: "circuit:mine"}
	mineLAN := &Circuit{ID: fixtureCircuitID, Pool: "circuit:mine-lan", AllowList: lan}
	public := &Circuit{ID: "pub", OpenToPublic: true, Pool: "circuit:pub"}
	publicLAN := &Circuit{ID: "pub-lan", OpenToPublic: true, AllowList: lan, Pool: "circuit:pub-lan"}
	privateOther := &Circuit{ID: "other", Pool: "circuit:other"}
	privateOtherLAN := &Circuit{ID: "other-lan", AllowList: lan, Pool: "circuit:other-lan"}

	cases := []struct {
		name     string
		method   string
		auth     string
		ip       netip.Addr
		circuits []*Circuit
		want     []string // pools kept
		status   int
		msg      string
	}{
		{"nothing serves the model", "POST", "", inside, nil, nil, 0, ""},
		{"token opens its circuit", "POST", "Bearer " + fixture, outside, []*Circuit{privateOther, mine, public}, []string{"circuit:mine", "circuit:pub"}, 0, ""},
		{"no token: public only", "POST", "", outside, []*Circuit{mine, public}, []string{"circuit:pub"}, 0, ""},
		{"bad token counts as none", "POST", "Bearer junk", outside, []*Circuit{mine, public}, []string{"circuit:pub"}, 0, ""},
		{"allow-list filters", "POST", "Bearer " + fixture, outside, []*Circuit{mineLAN, public, publicLAN}, []string{"circuit:pub"}, 0, ""},
		{"OPTIONS: allow-lists only", "OPTIONS", "", outside, []*Circuit{mine, privateOther, privateOtherLAN}, []string{"circuit:mine", "circuit:other"}, 0, ""},

		{"no header, private only", "POST", "", inside, []*Circuit{mine, privateOther}, nil, 401, "E20006: Authorization header not provided"},
		{"other scheme", "POST", "Basic abc", inside, []*Circuit{mine}, nil, 401, "E20007: Unsupported authorization method Basic"},
		{"failed verification", "POST", "Bearer a.b.c", inside, []*Circuit{mine}, nil, 401, "E20008: Invalid authorization token (Invalid token encoding)"},
		{"valid token for another circuit", "POST", "Bearer " + fixture, inside, []*Circuit{privateOther}, nil, 401, "E20009: Authorization token mismatch"},
		{"token opens one but its allow-list refuses", "POST", "Bearer " + fixture, outside, []*Circuit{privateOther, mineLAN}, nil, 403, "E20011: Client address not allowed"},
		{"public circuit but allow-list refuses", "POST", "", outside, []*Circuit{mine, publicLAN}, nil, 403, "E20011: Client address not allowed"},
		{"every allow-list refuses", "POST", "", outside, []*Circuit{mineLAN, privateOtherLAN}, nil, 403, "E20011: Client address not allowed"},
		{"credentials stop the reachable one", "POST", "", outside, []*Circuit{privateOther, privateOtherLAN}, nil, 401, "E20006: Authorization header not provided"},
		{"OPTIONS, every allow-list refuses", "OPTIONS", "", outside, []*Circuit{mineLAN}, nil, 403, "E20011: Client address not allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "http://models.example.com/v1/chat/completions", nil)
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			caller := v.Caller(r, tc.ip)
			kept, p := caller.Filter(tc.circuits)
			assertProblem(t, p, tc.status, tc.msg)
			var pools []string
			for _, c := range kept {
				pools = append(pools, c.Pool)
			}
			if len(pools) != len(tc.want) {
				t.Fatalf("kept %v, want %v", pools, tc.want)
			}
			for i := range pools {
				if pools[i] != tc.want[i] {
					t.Fatalf("kept %v, want %v", pools, tc.want)
				}
			}
			for _, c := range tc.circuits {
				if got, want := caller.Reaches(c), slices.Contains(tc.want, c.Pool); got != want {
					t.Errorf("Reaches(%s) = %v, want %v", c.Pool, got, want)
				}
			}
		})
	}
}

// TestCallerAgreesWithCheck: for a single circuit, an aggregation host must answer what the
// circuit's own host answers.
func TestCallerAgreesWithCheck(t *testing.T) {
	v := Verifier{Secret: []byte(fixtureSecret)}
	auths := []string{"", "Basic x", "Bearer junk", "Bearer " + fixtureToken(t)}
	ips := []netip.Addr{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("192.0.2.1"), {}}
	lists := []AllowList{{}, ParseAllowList(ptr("10.0.0.0/8"))}
	for _, method := range []string{"POST", "OPTIONS"} {
		for _, auth := range auths {
			for _, ip := range ips {
				for _, list := range lists {
					for _, id := range []string{fixtureCircuitID, "other"} {
						for _, public := range []bool{false, true} {
							c := &Circuit{ID: id, OpenToPublic: public, AllowList: list}
							r := httptest.NewRequest(method, "http://x/", nil)
							if auth != "" {
								r.Header.Set("Authorization", auth)
							}
							want := v.Check(r, c, ip)
							_, got := v.Caller(r, ip).Filter([]*Circuit{c})
							if (want == nil) != (got == nil) || want != nil && (want.Status != got.Status || want.Msg != got.Msg) {
								t.Errorf("%s %q ip=%v list=%q id=%s public=%v: Check=%v Filter=%v", method, auth, ip, list, id, public, want, got)
							}
						}
					}
				}
			}
		}
	}
}
