package main

// Blind cross-site requests, through the real binary in AppProxy mode: a page on another site
// can make its visitor's browser post a form to any address the browser reaches, without
// asking first. The inference routes (on the relay's own host, a circuit's host and an
// aggregation host) and the admin routes refuse such a request with a 403 in their own shape;
// a client that is no browser, the same origin and a trusted origin are served as before, and
// what browsers may read anyway (GET routes) and a circuit's pass-through paths are untouched.

import (
	"encoding/json"
	"net/http"
	"testing"
)

func TestE2ECrossOriginBrowserRequestsAreRefused(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "r", "m")
	c := newCircuit("xo", route{port: rep.port()})
	c.public = true
	e, _ := startBinaryEnv(t, map[string]string{"MODELRELAY_DEMO": "true",
		"MODELRELAY_TRUSTED_ORIGINS": "https://app.example, http://localhost:3000"}, c)
	e.waitServing(circuitHost("xo"), nil)

	// What a hostile page's form makes the browser send: no preflight for a form body.
	form := func(origin, site string) http.Header {
		h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Origin": {origin}}
		if site != "" {
			h.Set("Sec-Fetch-Site", site)
		}
		return h
	}
	cases := []struct {
		name    string
		path    string
		header  http.Header
		refused bool
	}{
		{"no browser (curl, an SDK, an agent)", "/v1/chat/completions", withJSON(nil), false},
		{"a form from another site", "/v1/chat/completions", form("https://evil.example", "cross-site"), true},
		{"an Anthropic call from another site", "/v1/messages", form("https://evil.example", "cross-site"), true},
		{"another origin of the same site", "/v1/chat/completions", form("https://other.models.test", "same-site"), true},
		{"an older browser: no Sec-Fetch-Site, Origin elsewhere", "/v1/chat/completions", form("https://evil.example", ""), true},
		{"the same origin", "/v1/chat/completions", form("https://wherever.example", "same-origin"), false},
		{"a trusted origin", "/v1/chat/completions", form("https://app.example", "cross-site"), false},
		{"another trusted origin", "/v1/chat/completions", form("http://localhost:3000", "cross-site"), false},
	}
	hosts := []struct{ label, host, model string }{
		{"own host", "", "demo"},
		{"circuit host", circuitHost("xo"), "m"},
		{"aggregation host", e2eAggHost, "m"},
	}
	refused := 0
	for _, h := range hosts {
		for _, tc := range cases {
			label := h.label + ", " + tc.name
			st, _, body := e.do("POST", h.host, tc.path, tc.header, chatBody(h.model, false))
			if !tc.refused {
				if st != http.StatusOK {
					t.Errorf("%s: %d %.300s, want 200", label, st, body)
				}
				continue
			}
			refused++
			top, typ, _, message := errorOf(body)
			wantTop := ""
			if tc.path == "/v1/messages" {
				wantTop = "error"
			}
			if st != http.StatusForbidden || top != wantTop || typ != "permission_error" || message == "" {
				t.Errorf("%s: %d %.300s, want 403 permission_error in the route's dialect", label, st, body)
			}
		}
	}

	// The admin API: its non-safe calls likewise, its reads not.
	admin := func(method, path string, h http.Header, body string) (int, []byte) {
		h = withJSON(h)
		h.Set("Authorization", "Bearer "+e2eAdmin)
		st, _, b := e.do(method, "", path, h, []byte(body))
		return st, b
	}
	st, body := admin("POST", "/admin/keys", form("https://evil.example", "cross-site"), `{"name":"from-a-page"}`)
	refused++
	var plain struct {
		Error string `json:"error"`
	}
	if st != http.StatusForbidden || json.Unmarshal(body, &plain) != nil || plain.Error == "" {
		t.Errorf("POST /admin/keys from another site: %d %s, want 403 {\"error\": ...}", st, body)
	}
	if st, body := admin("POST", "/admin/keys", form("https://app.example", "cross-site"), `{"name":"from-the-ops-app"}`); st != http.StatusCreated {
		t.Errorf("POST /admin/keys from a trusted origin: %d %s", st, body)
	}
	if st, body := admin("POST", "/admin/keys", nil, `{"name":"from-curl"}`); st != http.StatusCreated {
		t.Errorf("POST /admin/keys from curl: %d %s", st, body)
	}
	for _, path := range []string{"/admin/stats", "/admin/keys"} {
		if st, body := admin("GET", path, form("https://evil.example", "cross-site"), ""); st != http.StatusOK {
			t.Errorf("GET %s from another site: %d %.200s (a read is left to the browser's own rules)", path, st, body)
		}
	}

	// What browsers may fetch anyway, and a circuit's own paths, are untouched.
	for _, get := range []struct{ host, path string }{{"", "/health"}, {"", "/v1/models"}, {e2eAggHost, "/v1/models"}, {"", "/ui"}} {
		if st, _, body := e.do("GET", get.host, get.path, form("https://evil.example", "cross-site"), nil); st != http.StatusOK {
			t.Errorf("GET %s%s from another site: %d %.200s", get.host, get.path, st, body)
		}
	}
	if st, _, body := e.do("POST", circuitHost("xo"), "/tokenize", form("https://evil.example", "cross-site"), []byte(`{}`)); st == http.StatusForbidden {
		t.Errorf("a circuit's pass-through path from another site: %d %s (it belongs to the model service)", st, body)
	}

	if got := metricSum(t, e.addr, "modelrelay_cross_origin_refusals_total"); got != float64(refused) {
		t.Errorf("modelrelay_cross_origin_refusals_total = %v, want %d", got, refused)
	}
}
