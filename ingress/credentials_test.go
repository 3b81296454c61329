package ingress

import (
	"crypto/sha256"
	"crypto/sha512"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestCheckCredentials is the attack suite: every way a token can be wrong, each answered with
// the exact status and message of the AppProxy contract's error table.
func TestCheckCredentials(t *testing.T) {
	now := time.Now().Unix()
	good := map[string]any{"id": fixtureCircuitID, "exp": now + 3600}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		for k, v := range extra {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	hs := func(claims map[string]any) string { return hs256(t, claims, fixtureSecret) }
	fixture := fixtureToken(t)
	// Payload of one valid token with the signature of another: a tampered claim set.
	other := hs(with(map[string]any{"id": "11111111-2222-4333-8444-555555555555"}))
	tampered := strings.Join([]string{
		strings.Split(other, ".")[0], strings.Split(other, ".")[1], strings.Split(fixture, ".")[2],
	}, ".")

	cases := []struct {
		name   string
		auth   *string // nil = no header
		status int
		msg    string
	}{
		{"fixture token, Bearer", ptr("Bearer " + fixture), 0, ""},
		{"fixture token, BackendAI", ptr("BackendAI " + fixture), 0, ""},
		{"minted token", ptr("Bearer " + hs(good)), 0, ""},
		{"no exp at all", ptr("Bearer " + hs(with(map[string]any{"exp": nil}))), 0, ""},
		{"past iat and nbf", ptr("Bearer " + hs(with(map[string]any{"iat": now - 60, "nbf": now - 60}))), 0, ""},

		{"no header", nil, 401, "E20006: Authorization header not provided"},
		{"empty header", ptr(""), 401, "E20006: Authorization header not provided"},
		{"lowercase bearer", ptr("bearer " + fixture), 401, "E20007: Unsupported authorization method bearer"},
		{"uppercase BEARER", ptr("BEARER " + fixture), 401, "E20007: Unsupported authorization method BEARER"},
		{"Basic", ptr("Basic dXNlcjpwYXNz"), 401, "E20007: Unsupported authorization method Basic"},
		{"Token", ptr("Token " + fixture), 401, "E20007: Unsupported authorization method Token"},
		{"bare token, echo cut short", ptr(fixture), 401, "E20007: Unsupported authorization method eyJhbGci..."},
		{"tab separator", ptr("Bearer\t" + fixture), 401, "E20007: Unsupported authorization method Bearer\te..."},

		{"alg none, no signature", ptr("Bearer " + mintToken(t, map[string]any{"alg": "none", "typ": "JWT"}, good, nil, nil)),
			401, "E20008: Invalid authorization token (The specified alg value is not allowed)"},
		{"alg None", ptr("Bearer " + mintToken(t, map[string]any{"alg": "None"}, good, nil, nil)),
			401, "E20008: Invalid authorization token (The specified alg value is not allowed)"},
		{"alg hs256 lowercase", ptr("Bearer " + mintToken(t, map[string]any{"alg": "hs256"}, good, sha256.New, []byte(fixtureSecret))),
			401, "E20008: Invalid authorization token (The specified alg value is not allowed)"},
		{"alg missing", ptr("Bearer " + mintToken(t, map[string]any{"typ": "JWT"}, good, sha256.New, []byte(fixtureSecret))),
			401, "E20008: Invalid authorization token (The specified alg value is not allowed)"},
		{"HS512 with the right secret", ptr("Bearer " + mintToken(t, map[string]any{"alg": "HS512"}, good, sha512.New, []byte(fixtureSecret))),
			401, "E20008: Invalid authorization token (The specified alg value is not allowed)"},
		{"HS384 with the right secret", ptr("Bearer " + mintToken(t, map[string]any{"alg": "HS384"}, good, sha512.New384, []byte(fixtureSecret))),
			401, "E20008: Invalid authorization token (The specified alg value is not allowed)"},
		// Key confusion: RS256 in the header, "signed" with HMAC keyed by the secret as if it
		// were the public key.
		{"RS256 with secret as public key", ptr("Bearer " + mintToken(t, map[string]any{"alg": "RS256", "typ": "JWT"}, good, sha256.New, []byte(fixtureSecret))),
			401, "E20008: Invalid authorization token (The specified alg value is not allowed)"},
		{"wrong secret", ptr("Bearer " + hs256(t, good, "not_the_secret")),
			401, "E20008: Invalid authorization token (Signature verification failed)"},
		{"api_secret-like key", ptr("Bearer " + hs256(t, good, "")),
			401, "E20008: Invalid authorization token (Signature verification failed)"},
		{"tampered payload", ptr("Bearer " + tampered),
			401, "E20008: Invalid authorization token (Signature verification failed)"},
		{"signature stripped", ptr("Bearer " + strings.TrimRight(hs(good), "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")),
			401, "E20008: Invalid authorization token (Signature verification failed)"},
		{"expired", ptr("Bearer " + hs(with(map[string]any{"exp": now - 10}))),
			401, "E20008: Invalid authorization token (Signature has expired)"},
		{"future nbf", ptr("Bearer " + hs(with(map[string]any{"nbf": now + 3600}))),
			401, "E20008: Invalid authorization token (The token is not yet valid (nbf))"},
		{"future iat", ptr("Bearer " + hs(with(map[string]any{"iat": now + 3600}))),
			401, "E20008: Invalid authorization token (The token is not yet valid (iat))"},
		{"exp not a number", ptr("Bearer " + hs(with(map[string]any{"exp": "tomorrow"}))),
			401, "E20008: Invalid authorization token (Invalid claim type)"},
		{"aud string", ptr("Bearer " + hs(with(map[string]any{"aud": "backend.ai"}))),
			401, "E20008: Invalid authorization token (Invalid audience)"},
		{"aud list", ptr("Bearer " + hs(with(map[string]any{"aud": []string{fixtureCircuitID}}))),
			401, "E20008: Invalid authorization token (Invalid audience)"},
		{"aud empty list", ptr("Bearer " + hs(with(map[string]any{"aud": []string{}}))),
			401, "E20008: Invalid authorization token (Invalid audience)"},
		{"scheme alone", ptr("Bearer"), 401, "E20008: Invalid authorization token (Not enough segments)"},
		{"empty token", ptr("Bearer "), 401, "E20008: Invalid authorization token (Not enough segments)"},
		{"two segments", ptr("Bearer abc.def"), 401, "E20008: Invalid authorization token (Not enough segments)"},
		{"four segments", ptr("Bearer " + fixture + ".x"), 401, "E20008: Invalid authorization token (Not enough segments)"},
		{"double space", ptr("Bearer  " + fixture), 401, "E20008: Invalid authorization token (Invalid token encoding)"},
		{"garbage segments", ptr("Bearer a!b.c?d.e"), 401, "E20008: Invalid authorization token (Invalid token encoding)"},
		{"padded segments", ptr("Bearer " + strings.Replace(fixture, ".", "=.", 1)), 401, "E20008: Invalid authorization token (Invalid token encoding)"},
		{"payload not an object", ptr("Bearer " + mintToken(t, map[string]any{"alg": "HS256"}, []string{fixtureCircuitID}, sha256.New, []byte(fixtureSecret))),
			401, "E20008: Invalid authorization token (Invalid token encoding)"},
		// JSON null decodes as an empty claim set: no id, so it opens nothing.
		{"payload null", ptr("Bearer " + mintToken(t, map[string]any{"alg": "HS256"}, nil, sha256.New, []byte(fixtureSecret))),
			401, "E20009: Authorization token mismatch"},

		{"missing id", ptr("Bearer " + hs(with(map[string]any{"id": nil}))), 401, "E20009: Authorization token mismatch"},
		{"another circuit's id", ptr("Bearer " + other), 401, "E20009: Authorization token mismatch"},
		{"id upper-cased", ptr("Bearer " + hs(with(map[string]any{"id": strings.ToUpper(fixtureCircuitID)}))), 401, "E20009: Authorization token mismatch"},
		{"id as a number", ptr("Bearer " + hs(with(map[string]any{"id": 42}))), 401, "E20009: Authorization token mismatch"},
		{"id empty", ptr("Bearer " + hs(with(map[string]any{"id": ""}))), 401, "E20009: Authorization token mismatch"},
	}
	circuit := &Circuit{ID: fixtureCircuitID, Subdomain: "llama-abc123", Pool: "circuit:" + fixtureCircuitID}
	ip := netip.MustParseAddr("127.0.0.1")
	// The caching verifier has already seen the valid fixture token; every case runs twice so
	// the second answer may come from its cache. Neither may differ from a plain verifier.
	cached := NewVerifier([]byte(fixtureSecret))
	if id, p := cached.verify(fixtureToken(t)); p != nil || id != fixtureCircuitID {
		t.Fatalf("warm-up: %q %v", id, p)
	}
	for name, v := range map[string]Verifier{"plain": {Secret: []byte(fixtureSecret)}, "cached": cached} {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				for range 2 {
					r := httptest.NewRequest(http.MethodPost, "http://llama-abc123.models.example.com/v1/chat/completions", nil)
					if tc.auth != nil {
						r.Header.Set("Authorization", *tc.auth)
					}
					assertProblem(t, v.Check(r, circuit, ip), tc.status, tc.msg)
				}
			})
		}
	}
}

func TestCachedTokenExpires(t *testing.T) {
	v := NewVerifier([]byte(fixtureSecret))
	exp := time.Now().Add(time.Second).Unix() + 1
	token := hs256(t, map[string]any{"id": fixtureCircuitID, "exp": exp}, fixtureSecret)
	if _, p := v.verify(token); p != nil {
		t.Fatalf("fresh token refused: %v", p.Msg)
	}
	for time.Now().Unix() < exp {
		time.Sleep(50 * time.Millisecond)
	}
	_, p := v.verify(token)
	if p == nil || p.Msg != "E20008: Invalid authorization token (Signature has expired)" {
		t.Fatalf("expired cached token: %v", p)
	}
}

func TestCheckOrderAndExemptions(t *testing.T) {
	v := Verifier{Secret: []byte(fixtureSecret)}
	fixture := fixtureToken(t)
	restricted := ParseAllowList(ptr("10.0.0.0/8"))
	inside, outside := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("192.0.2.1")
	cases := []struct {
		name    string
		circuit Circuit
		method  string
		auth    string
		ip      netip.Addr
		status  int
		msg     string
	}{
		{"ip denied before missing credentials", Circuit{ID: fixtureCircuitID, AllowList: restricted}, "GET", "", outside, 403, "E20011: Client address not allowed"},
		{"ip denied even with a valid token", Circuit{ID: fixtureCircuitID, AllowList: restricted}, "GET", "Bearer " + fixture, outside, 403, "E20011: Client address not allowed"},
		{"unknown client address, restricted", Circuit{ID: fixtureCircuitID, AllowList: restricted}, "GET", "Bearer " + fixture, netip.Addr{}, 403, "E20011: Client address not allowed"},
		{"ip allowed, then credentials", Circuit{ID: fixtureCircuitID, AllowList: restricted}, "GET", "", inside, 401, "E20006: Authorization header not provided"},
		{"ip allowed, valid token", Circuit{ID: fixtureCircuitID, AllowList: restricted}, "GET", "Bearer " + fixture, inside, 0, ""},
		{"public circuit needs no token", Circuit{ID: fixtureCircuitID, OpenToPublic: true}, "POST", "", outside, 0, ""},
		{"public circuit ignores a bad token", Circuit{ID: fixtureCircuitID, OpenToPublic: true}, "POST", "Bearer junk", outside, 0, ""},
		{"public circuit keeps its allow-list", Circuit{ID: fixtureCircuitID, OpenToPublic: true, AllowList: restricted}, "POST", "", outside, 403, "E20011: Client address not allowed"},
		{"OPTIONS needs no token", Circuit{ID: fixtureCircuitID}, "OPTIONS", "", outside, 0, ""},
		{"OPTIONS keeps the allow-list", Circuit{ID: fixtureCircuitID, AllowList: restricted}, "OPTIONS", "", outside, 403, "E20011: Client address not allowed"},
		{"token for the fixture circuit on another circuit", Circuit{ID: "11111111-2222-4333-8444-555555555555"}, "GET", "Bearer " + fixture, inside, 401, "E20009: Authorization token mismatch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "http://x.models.example.com/", nil)
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			assertProblem(t, v.Check(r, &tc.circuit, tc.ip), tc.status, tc.msg)
		})
	}
}

func TestCheckWithoutSecretRefusesEverything(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "http://x/", nil)
	r.Header.Set("Authorization", "Bearer "+hs256(t, map[string]any{"id": "c"}, ""))
	p := Verifier{}.Check(r, &Circuit{ID: "c"}, netip.MustParseAddr("127.0.0.1"))
	assertProblem(t, p, 401, "E20008: Invalid authorization token (Signature verification failed)")
}

func TestFixtureTokenValid(t *testing.T) {
	id, p := Verifier{Secret: []byte(fixtureSecret)}.verify(fixtureToken(t))
	if p != nil || id != fixtureCircuitID {
		t.Fatalf("fixture token: id %q, problem %v; want id %q", id, p, fixtureCircuitID)
	}
}

// assertProblem checks a decision: status 0 means allowed (nil).
func assertProblem(t *testing.T, p *Problem, status int, msg string) {
	t.Helper()
	if status == 0 {
		if p != nil {
			t.Fatalf("want allowed, got %d %q", p.Status, p.Msg)
		}
		return
	}
	if p == nil {
		t.Fatalf("want %d %q, got allowed", status, msg)
	}
	if p.Status != status || p.Msg != msg {
		t.Fatalf("want %d %q, got %d %q", status, msg, p.Status, p.Msg)
	}
}

func ptr[T any](v T) *T { return &v }
