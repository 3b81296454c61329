package main

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"modelrelay/ingress"
	"modelrelay/protocol"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// admits reports whether the relay's own token check (ingress, with jwt_secret secret) lets a
// request carrying token onto circuit id.
func admits(t *testing.T, secret string, requireExp bool, id, token string) bool {
	t.Helper()
	v := ingress.NewVerifier([]byte(secret))
	v.RequireExp = requireExp
	r := httptest.NewRequest("POST", "http://private.models.localhost/v1/chat/completions", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return v.Check(r, &ingress.Circuit{ID: id, Subdomain: "private"}, loopback) == nil
}

// TestCreatedPrivateCircuitCarriesItsToken: POST /dev/circuits answers a private circuit with
// a token that the relay's ingress accepts for that circuit only, and only with the same
// jwt_secret; a public circuit needs none.
func TestCreatedPrivateCircuitCarriesItsToken(t *testing.T) {
	c, err := newCircuit(strings.NewReader(`{"subdomain":"private","routes":[{"host":"127.0.0.1","port":8000}]}`))
	if err != nil {
		t.Fatal(err)
	}
	answer, err := created(c, "dev-jwt", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var published protocol.Circuit
	if err := json.Unmarshal(answer.Circuit, &published); err != nil || published.ID != c.ID || answer.ID != c.ID {
		t.Fatalf("answer id %q, circuit %+v (%v), want id %q", answer.ID, published, err, c.ID)
	}
	if answer.Token == "" {
		t.Fatal("a private circuit's answer has no token")
	}
	if !admits(t, "dev-jwt", true, c.ID, answer.Token) {
		t.Error("ingress refuses the token for its own circuit (exp required)")
	}
	if admits(t, "dev-jwt", false, protocol.NewUUID(), answer.Token) {
		t.Error("ingress accepts the token for another circuit")
	}
	if admits(t, "another-secret", false, c.ID, answer.Token) {
		t.Error("ingress accepts the token under another jwt_secret")
	}

	public, _ := newCircuit(strings.NewReader(`{"subdomain":"llama","open_to_public":true,"routes":[]}`))
	if answer, _ := created(public, "dev-jwt", time.Now()); answer.Token != "" {
		t.Errorf("a public circuit got a token %q", answer.Token)
	}
}

// TestExpiredTokenRefused: the token's exp is real, so a lifetime that has passed is refused.
func TestExpiredTokenRefused(t *testing.T) {
	id := protocol.NewUUID()
	token, err := circuitToken("dev-jwt", id, time.Now().Add(-2*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if admits(t, "dev-jwt", false, id, token) {
		t.Error("an expired token was accepted")
	}
}

// TestTokenCommand: `devcoordinator token` prints one line the relay accepts for that circuit.
func TestTokenCommand(t *testing.T) {
	id := protocol.NewUUID()
	var stdout, stderr bytes.Buffer
	if code := runToken([]string{"-jwt-secret", "s3cret", id}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	token, rest, _ := strings.Cut(stdout.String(), "\n")
	if rest != "" || !admits(t, "s3cret", true, id, token) {
		t.Errorf("printed %q: not one token the relay accepts for %s", stdout.String(), id)
	}

	for _, args := range [][]string{nil, {"a", "b"}, {"-ttl", "0s", id}, {"-jwt-secret", "", id}} {
		stdout.Reset()
		stderr.Reset()
		if code := runToken(args, &stdout, &stderr); code == 0 || stdout.Len() != 0 || stderr.Len() == 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want a failure explained on stderr", args, code, stdout.String(), stderr.String())
		}
	}
}
