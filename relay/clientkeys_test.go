package relay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"modelrelay/relay/keys"
)

func TestCredential(t *testing.T) {
	const key = "mr_live_abcdefghijklmnopqrstuvwxyz012345"
	for _, tc := range []struct {
		header         http.Header
		secret, source string
	}{
		{http.Header{}, "", ""},
		{http.Header{"Authorization": {"Bearer " + key}}, key, "Authorization"},
		{http.Header{"Authorization": {key}}, key, "Authorization"}, // as the Rust server reads it
		{http.Header{"X-Api-Key": {key}}, key, "X-Api-Key"},
		{http.Header{"X-Api-Key": {key}, "Authorization": {"Bearer circuit-jwt"}}, key, "X-Api-Key"},
		{http.Header{"X-Api-Key": {"sk-ant-dummy"}, "Authorization": {"Bearer " + key}}, key, "Authorization"},
		{http.Header{"X-Api-Key": {"wrong"}, "Authorization": {"Bearer other"}}, "wrong", "X-Api-Key"},
	} {
		secret, source := credential(tc.header)
		if secret != tc.secret || source != tc.source {
			t.Errorf("credential(%v) = %q from %q, want %q from %q", tc.header, secret, source, tc.secret, tc.source)
		}
	}
}

// BenchmarkKeyStages is what client keys add to a request whose key is cached: reading the
// credential, validating it, recording its use, and the admission of its model and limits.
func BenchmarkKeyStages(b *testing.B) {
	s, err := New(Options{RequireAPIKeys: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	secret, prefix := keys.NewSecret()
	if _, err := s.keys.Store().Insert(context.Background(), keys.Key{ID: keys.NewID(), Prefix: prefix,
		Limits: keys.Limits{AllowedModels: []string{"llama-*"}, RateLimitRPM: 1 << 30}}, keys.HashOf(secret)); err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r.Header.Set("Authorization", "Bearer "+secret)
	w := httptest.NewRecorder()
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		k, _ := s.authorize(w, r, OpenAI, now)
		if k == nil {
			b.Fatal("refused")
		}
		if no := s.admit(r.Context(), k, "llama-3-8b", now); no != nil {
			b.Fatal(no)
		}
	}
}
