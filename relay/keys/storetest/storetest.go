// Package storetest is the conformance suite of the keys.Store contract: every store (the
// in-memory one, PostgreSQL) runs it, so they answer alike and either can stand in for the
// other in tests of what uses them.
package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"modelrelay/relay/keys"
)

// Run runs the suite as parallel subtests. open returns an empty store for one subtest (it is
// called from several subtests at once); Run closes the store when its subtest ends.
func Run(t *testing.T, open func(t *testing.T) keys.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s keys.Store)
	}{
		{"InsertFind", testInsertFind},
		{"FindUnknown", testFindUnknown},
		{"Revoke", testRevoke},
		{"UnknownIDs", testUnknownIDs},
		{"ListNewestFirst", testList},
		{"LimitsRoundTrip", testLimits},
		{"UpdatePatch", testUpdate},
		{"UpdateKeyWithoutLimits", testUpdateNoLimits},
		{"MaxPriorityAlone", testMaxPriorityAlone},
		{"CacheAlone", testCacheAlone},
		{"RecordSums", testRecordSums},
		{"LastUsedForward", testLastUsed},
		{"UsageOrder", testUsageOrder},
		{"ConcurrentRecord", testConcurrentRecord},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(s.Close)
			tc.fn(t, s)
		})
	}
}

// newKey inserts a key named name with limits l and returns it with its secret.
func newKey(t *testing.T, s keys.Store, name string, l keys.Limits) (keys.Key, string) {
	t.Helper()
	secret, prefix := keys.NewSecret()
	want := keys.Key{ID: keys.NewID(), Name: name, Prefix: prefix, Limits: l}
	before := time.Now()
	got, err := s.Insert(context.Background(), want, keys.HashOf(secret))
	if err != nil {
		t.Fatalf("Insert %s: %v", name, err)
	}
	want.CreatedAt = got.CreatedAt
	sameKey(t, "Insert "+name, got, want)
	if got.CreatedAt.Location() != time.UTC || got.CreatedAt.Sub(before).Abs() > time.Minute {
		t.Errorf("Insert %s: CreatedAt %v, want UTC, about %v", name, got.CreatedAt, before.UTC())
	}
	return got, secret
}

func find(t *testing.T, s keys.Store, secret string) (keys.Key, bool) {
	t.Helper()
	k, ok, err := s.Find(context.Background(), keys.HashOf(secret))
	if err != nil {
		t.Fatalf("Find: %v", err)
	}
	return k, ok
}

func get(t *testing.T, s keys.Store, id string) keys.Key {
	t.Helper()
	k, ok, err := s.Get(context.Background(), id)
	if err != nil || !ok {
		t.Fatalf("Get %s = %v, %v; want the key", id, ok, err)
	}
	return k
}

func list(t *testing.T, s keys.Store) []keys.Key {
	t.Helper()
	ks, err := s.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return ks
}

func record(t *testing.T, s keys.Store, rows []keys.Usage, used map[string]time.Time) {
	t.Helper()
	if err := s.Record(context.Background(), rows, used); err != nil {
		t.Fatalf("Record: %v", err)
	}
}

func usage(t *testing.T, s keys.Store, id string) []keys.Usage {
	t.Helper()
	u, err := s.Usage(context.Background(), id)
	if err != nil {
		t.Fatalf("Usage %s: %v", id, err)
	}
	return u
}

// sameKey compares keys field by field: times with Equal and in UTC, an empty AllowedModels
// like a nil one.
func sameKey(t *testing.T, what string, got, want keys.Key) {
	t.Helper()
	if got.ID != want.ID || got.Name != want.Name || got.Prefix != want.Prefix {
		t.Errorf("%s: key %q %q %q, want %q %q %q", what, got.ID, got.Name, got.Prefix, want.ID, want.Name, want.Prefix)
	}
	sameTime(t, what+" CreatedAt", got.CreatedAt, want.CreatedAt)
	sameTime(t, what+" LastUsedAt", got.LastUsedAt, want.LastUsedAt)
	sameTime(t, what+" RevokedAt", got.RevokedAt, want.RevokedAt)
	sameLimits(t, what, got.Limits, want.Limits)
}

func sameLimits(t *testing.T, what string, got, want keys.Limits) {
	t.Helper()
	if !slices.Equal(got.AllowedModels, want.AllowedModels) {
		t.Errorf("%s: AllowedModels %q, want %q", what, got.AllowedModels, want.AllowedModels)
	}
	if got.RateLimitRPM != want.RateLimitRPM || got.TokenLimitTPM != want.TokenLimitTPM || got.Priority != want.Priority ||
		got.MaxPriority != want.MaxPriority || got.Cache != want.Cache {
		t.Errorf("%s: rpm %d tpm %d priority %q max priority %q cache %q, want %d %d %q %q %q", what, got.RateLimitRPM,
			got.TokenLimitTPM, got.Priority, got.MaxPriority, got.Cache, want.RateLimitRPM, want.TokenLimitTPM, want.Priority,
			want.MaxPriority, want.Cache)
	}
	sameTime(t, what+" ExpiresAt", got.ExpiresAt, want.ExpiresAt)
}

// sameTime wants got equal to want and, when set, in UTC (what every store returns).
func sameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) || got.IsZero() != want.IsZero() {
		t.Errorf("%s = %v, want %v", what, got, want)
	} else if !got.IsZero() && got.Location() != time.UTC {
		t.Errorf("%s = %v, want it in UTC", what, got)
	}
}

func sameUsage(t *testing.T, what string, got, want []keys.Usage) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		g, w := got[i], want[i]
		ok = g.KeyID == w.KeyID && g.Day.Equal(w.Day) && g.Day.Location() == time.UTC && g.Model == w.Model &&
			g.Requests == w.Requests && g.InputTokens == w.InputTokens && g.OutputTokens == w.OutputTokens
	}
	if !ok {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}
