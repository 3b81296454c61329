package ingress

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"hash"
	"os"
	"strings"
	"testing"
)

const (
	fixtureCircuitID = "3f1c0c8e-6b2a-4b8e-9a51-0d2f5e7c9a10"
	fixtureSecret    = "some_jwt_secret"
)

// mintToken builds a JWT by hand, so tests can make tokens no well-behaved library would sign:
// any header, any claims, a signature from any hash keyed with any bytes (nil hash = empty
// signature, as "alg":"none" tokens carry).
func mintToken(t testing.TB, header map[string]any, claims any, h func() hash.Hash, key []byte) string {
	t.Helper()
	seg := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("marshal token segment: %v", err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := seg(header) + "." + seg(claims)
	if h == nil {
		return input + "."
	}
	mac := hmac.New(h, key)
	mac.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func hs256(t testing.TB, claims map[string]any, key string) string {
	return mintToken(t, map[string]any{"alg": "HS256", "typ": "JWT"}, claims, sha256.New, []byte(key))
}

func fixtureToken(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("testdata/token-valid.txt")
	if err != nil {
		t.Fatalf("read token fixture: %v", err)
	}
	return strings.TrimSpace(string(b))
}
