package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"modelrelay/ingress"
	"modelrelay/relay"
)

// TestIngressRejectionsByReason drives the front with every refusal ingress answers and reads
// modelrelay_ingress_rejections_total back from /metrics through the same front.
func TestIngressRejectionsByReason(t *testing.T) {
	srv, err := relay.New(relay.Options{Timings: relay.Timings{AuthFailureStep: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	const open, fenced = "c-open", "c-fenced"
	table := ingress.NewTable(ingress.Config{WildcardDomain: e2eDomain}, []ingress.Circuit{
		{ID: open, Subdomain: "open", Pool: "circuit:" + open},
		{ID: fenced, Subdomain: "fenced", Pool: "circuit:" + fenced, AllowList: ingress.ParseAllowList(ptr("10.0.0.0/8"))},
	})
	f := newFront(srv, ingress.NewRouter(table), nil, ingress.NewVerifier([]byte(e2eJWTSecret)), nil)
	serve := func(host, auth string) int {
		r := httptest.NewRequest(http.MethodPost, "http://"+host+"/v1/chat/completions", strings.NewReader(string(chatBody("m", false))))
		r.RemoteAddr = "192.0.2.7:4242"
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		f.ServeHTTP(w, r)
		return w.Code
	}
	expired := mintToken(t, jwt.MapClaims{"id": open, "exp": time.Now().Add(-time.Minute).Unix()}, e2eJWTSecret)
	cases := []struct {
		host, auth string
		status     int
		reason     string
	}{
		{"nobody" + e2eDomain, "", 400, ingress.ReasonUnknownSubdomain},
		{"nobody" + e2eDomain, "", 400, ingress.ReasonUnknownSubdomain},
		{"fenced" + e2eDomain, "Bearer " + tokenFor(t, fenced), 403, ingress.ReasonClientIP},
		{"open" + e2eDomain, "", 401, ingress.ReasonMissingToken},
		{"open" + e2eDomain, "Basic dXNlcjpwYXNz", 401, ingress.ReasonScheme},
		{"open" + e2eDomain, "Bearer " + mintToken(t, jwt.MapClaims{"id": open}, "not-the-secret"), 401, ingress.ReasonInvalidToken},
		{"open" + e2eDomain, "Bearer " + expired, 401, ingress.ReasonExpiredToken},
		{"open" + e2eDomain, "Bearer " + tokenFor(t, fenced), 401, ingress.ReasonTokenMismatch},
	}
	want := map[string]float64{}
	for _, tc := range cases {
		if st := serve(tc.host, tc.auth); st != tc.status {
			t.Fatalf("%s with %q: %d, want %d", tc.host, tc.auth, st, tc.status)
		}
		want[tc.reason]++
	}
	// A request that passes ingress is no rejection, whatever the relay answers it.
	serve("open"+e2eDomain, "Bearer "+tokenFor(t, open))

	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/metrics", nil)
	w := httptest.NewRecorder()
	f.ServeHTTP(w, r)
	families := parseExposition(t, w.Body.Bytes())
	for _, reason := range ingress.Reasons() {
		if got := metricSample(families, "modelrelay_ingress_rejections_total", `reason="`+reason+`"`); got != want[reason] {
			t.Errorf("rejections{reason=%q} = %v, want %v", reason, got, want[reason])
		}
	}
	if got := metricSample(families, "modelrelay_auth_failures_total", `kind="circuit"`); got != 4 {
		t.Errorf("circuit auth failures %v, want 4 (the wrong credentials, not the missing one or the fenced address)", got)
	}
}
