package relay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
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

// TestDropKeys: a credential header that carries one of the relay's keys, in any way a
// client may write it, never reaches a target; other credentials go on.
func TestDropKeys(t *testing.T) {
	const key = "mr_live_abcdefghijklmnopqrstuvwxyz012345"
	for _, tc := range []struct {
		header http.Header
		kept   []string
	}{
		{http.Header{"Authorization": {"Bearer " + key}}, nil},
		{http.Header{"Authorization": {key}}, nil},
		{http.Header{"Authorization": {"bearer  " + key + " "}}, nil},
		{http.Header{"Authorization": {"Bearer sk-other"}}, []string{"Authorization"}},
		{http.Header{"X-Api-Key": {key}}, nil},
		{http.Header{"X-Api-Key": {" " + key}}, nil},
		{http.Header{"X-Api-Key": {"sk-ant-other", key}}, nil}, // a second line is no hiding place
		{http.Header{"X-Api-Key": {key}, "Authorization": {"Bearer circuit-jwt"}}, []string{"Authorization"}},
		{http.Header{"X-Api-Key": {"sk-ant-other"}, "Authorization": {"Bearer " + key}}, []string{"X-Api-Key"}},
		{http.Header{"X-Api-Key": {key}, "Authorization": {"Bearer mr_live_another"}}, nil},
		{http.Header{"X-Api-Key": {"Token " + key}}, nil},
		{http.Header{"X-Api-Key": {"sk-ant-mr_live_lookalike"}}, []string{"X-Api-Key"}},
		{http.Header{"X-Other": {key}}, []string{"X-Other"}}, // not a credential header
	} {
		h := tc.header.Clone()
		dropKeys(h)
		var kept []string
		for name := range h {
			kept = append(kept, name)
		}
		slices.Sort(kept)
		if !slices.Equal(kept, tc.kept) {
			t.Errorf("dropKeys(%v) kept %q, want %q", tc.header, kept, tc.kept)
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
		k := s.authorize(w, r, OpenAI, now)
		if k == nil {
			b.Fatal("refused")
		}
		if no := s.admit(r.Context(), k, "llama-3-8b", now); no != nil {
			b.Fatal(no)
		}
	}
}
