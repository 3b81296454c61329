package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"modelrelay/relay/keys"
)

func testInsertFind(t *testing.T, s keys.Store) {
	k, secret := newKey(t, s, "alpha", keys.Limits{})
	got, ok := find(t, s, secret)
	if !ok {
		t.Fatal("Find of an inserted key: not found")
	}
	sameKey(t, "Find", got, k)
	if len(got.AllowedModels) != 0 || !got.ExpiresAt.IsZero() {
		t.Errorf("Find: limits %+v, want none", got.Limits)
	}
	sameKey(t, "Get", get(t, s, k.ID), k)
}

func testFindUnknown(t *testing.T, s keys.Store) {
	if _, ok := find(t, s, "mr_live_nothing"); ok {
		t.Error("Find in an empty store: found")
	}
	newKey(t, s, "alpha", keys.Limits{})
	if _, ok := find(t, s, "mr_live_nothing"); ok {
		t.Error("Find of an unknown secret: found")
	}
}

func testRevoke(t *testing.T, s keys.Store) {
	ctx := context.Background()
	k, secret := newKey(t, s, "doomed", keys.Limits{RateLimitRPM: 5})
	other, otherSecret := newKey(t, s, "kept", keys.Limits{})
	before := time.Now()
	if ok, err := s.Revoke(ctx, k.ID); err != nil || !ok {
		t.Fatalf("Revoke = %v, %v; want true", ok, err)
	}
	if _, ok := find(t, s, secret); ok {
		t.Error("Find of a revoked key: found")
	}
	if _, ok := find(t, s, otherSecret); !ok {
		t.Error("Find of the other key after a revoke: not found")
	}
	got := get(t, s, k.ID)
	if got.RevokedAt.IsZero() || got.RevokedAt.Location() != time.UTC || got.RevokedAt.Sub(before).Abs() > time.Minute {
		t.Errorf("Get of a revoked key: RevokedAt %v, want about %v in UTC", got.RevokedAt, before.UTC())
	}
	k.RevokedAt = got.RevokedAt
	sameKey(t, "Get revoked", got, k)
	ks := list(t, s)
	if len(ks) != 2 {
		t.Fatalf("List after a revoke: %d keys, want 2", len(ks))
	}
	for _, lk := range ks {
		switch lk.ID {
		case k.ID:
			sameKey(t, "List revoked", lk, k)
		case other.ID:
			sameKey(t, "List active", lk, other)
		}
	}
	if ok, err := s.Revoke(ctx, k.ID); err != nil || ok {
		t.Errorf("second Revoke = %v, %v; want false, nil", ok, err)
	}
	sameTime(t, "RevokedAt after a second Revoke", get(t, s, k.ID).RevokedAt, got.RevokedAt)
}

func testUnknownIDs(t *testing.T, s keys.Store) {
	ctx := context.Background()
	newKey(t, s, "alpha", keys.Limits{})
	rpm := 7
	for _, id := range []string{keys.NewID(), "not-a-uuid", "", "00000000-0000-0000-0000-00000000000g", "'; DROP TABLE x; --"} {
		if ok, err := s.Revoke(ctx, id); err != nil || ok {
			t.Errorf("Revoke(%q) = %v, %v; want false, nil", id, ok, err)
		}
		if _, ok, err := s.Get(ctx, id); err != nil || ok {
			t.Errorf("Get(%q) = %v, %v; want false, nil", id, ok, err)
		}
		if _, ok, err := s.Update(ctx, id, keys.Patch{RateLimitRPM: &rpm}); err != nil || ok {
			t.Errorf("Update(%q) = %v, %v; want false, nil", id, ok, err)
		}
		if u, err := s.Usage(ctx, id); err != nil || len(u) != 0 {
			t.Errorf("Usage(%q) = %v, %v; want nothing", id, u, err)
		}
	}
	if n := len(list(t, s)); n != 1 {
		t.Errorf("List: %d keys, want 1", n)
	}
}

func testList(t *testing.T, s keys.Store) {
	if ks := list(t, s); len(ks) != 0 {
		t.Fatalf("List of an empty store: %d keys", len(ks))
	}
	var want []keys.Key
	for i := range 3 {
		k, _ := newKey(t, s, fmt.Sprint("key", i), keys.Limits{TokenLimitTPM: i * 100})
		want = append([]keys.Key{k}, want...)
		time.Sleep(2 * time.Millisecond) // distinct creation times, whatever the clock's grain
	}
	if _, err := s.Revoke(context.Background(), want[1].ID); err != nil {
		t.Fatal(err)
	}
	want[1].RevokedAt = get(t, s, want[1].ID).RevokedAt
	got := list(t, s)
	if len(got) != len(want) {
		t.Fatalf("List: %d keys, want %d", len(got), len(want))
	}
	for i := range got {
		sameKey(t, fmt.Sprint("List[", i, "]"), got[i], want[i])
	}
}

// expiry is a time at microsecond precision (what PostgreSQL keeps) away from UTC.
var expiry = time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.FixedZone("UTC+5:30", 5*3600+1800))

func testLimits(t *testing.T, s keys.Store) {
	l := keys.Limits{
		AllowedModels: []string{"gpt-4*", "claude-?-opus", "llama/[a-c]*", "exact-model"},
		RateLimitRPM:  60,
		TokenLimitTPM: 100000,
		Priority:      "low",
		MaxPriority:   "normal",
		ExpiresAt:     expiry,
		Cache:         keys.CacheDefault,
	}
	k, secret := newKey(t, s, "limited", l)
	found, ok := find(t, s, secret)
	if !ok {
		t.Fatal("Find: not found")
	}
	sameLimits(t, "Find", found.Limits, l)
	sameLimits(t, "Get", get(t, s, k.ID).Limits, l)
	sameLimits(t, "List", list(t, s)[0].Limits, l)
	// The caller's slice is not the store's.
	l.AllowedModels[0] = "changed"
	if got := get(t, s, k.ID).AllowedModels[0]; got != "gpt-4*" {
		t.Errorf("AllowedModels[0] after the caller changed its slice: %q", got)
	}
}

func testUpdate(t *testing.T, s keys.Store) {
	ctx := context.Background()
	l := keys.Limits{AllowedModels: []string{"a*", "b"}, RateLimitRPM: 10, TokenLimitTPM: 2000, Priority: "low", ExpiresAt: expiry}
	k, secret := newKey(t, s, "patched", l)
	update := func(what string, p keys.Patch, want keys.Limits) {
		t.Helper()
		got, ok, err := s.Update(ctx, k.ID, p)
		if err != nil || !ok {
			t.Fatalf("Update %s = %v, %v", what, ok, err)
		}
		sameKey(t, "Update "+what, got, keys.Key{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt,
			RevokedAt: got.RevokedAt, Limits: want})
		sameLimits(t, "Get after Update "+what, get(t, s, k.ID).Limits, want)
	}
	rpm := 99
	l.RateLimitRPM = 99
	update("rpm", keys.Patch{RateLimitRPM: &rpm}, l)
	prio, models := "high", []string{"c?"}
	l.Priority, l.AllowedModels = prio, []string{"c?"}
	update("priority and models", keys.Patch{Priority: &prio, AllowedModels: &models}, l)
	ceiling := "normal"
	l.MaxPriority = ceiling
	update("max priority", keys.Patch{MaxPriority: &ceiling}, l)
	cache := keys.CacheOff
	l.Cache = cache
	update("cache", keys.Patch{Cache: &cache}, l)
	if found, ok := find(t, s, secret); !ok {
		t.Error("Find after Update: not found")
	} else {
		sameLimits(t, "Find after Update", found.Limits, l)
	}
	update("nothing", keys.Patch{}, l)
	zero, none, empty, never := 0, "", []string{}, time.Time{}
	update("clear all", keys.Patch{AllowedModels: &empty, RateLimitRPM: &zero, TokenLimitTPM: &zero, Priority: &none,
		MaxPriority: &none, ExpiresAt: &never, Cache: &none}, keys.Limits{})
	later := expiry.Add(48 * time.Hour)
	update("expiry", keys.Patch{ExpiresAt: &later}, keys.Limits{ExpiresAt: later})
	// A revoked key still exists: its limits can change, and it stays revoked.
	if _, err := s.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	tpm := 5
	update("revoked", keys.Patch{TokenLimitTPM: &tpm}, keys.Limits{ExpiresAt: later, TokenLimitTPM: 5})
	if get(t, s, k.ID).RevokedAt.IsZero() {
		t.Error("Update revived a revoked key")
	}
}

// testUpdateNoLimits patches a key inserted without limits (in PostgreSQL: no limits row, like
// every key the Rust server made).
func testUpdateNoLimits(t *testing.T, s keys.Store) {
	k, secret := newKey(t, s, "plain", keys.Limits{})
	models := []string{"m-*"}
	got, ok, err := s.Update(context.Background(), k.ID, keys.Patch{AllowedModels: &models})
	if err != nil || !ok {
		t.Fatalf("Update = %v, %v", ok, err)
	}
	sameLimits(t, "Update", got.Limits, keys.Limits{AllowedModels: models})
	found, ok := find(t, s, secret)
	if !ok {
		t.Fatal("Find after Update: not found")
	}
	sameLimits(t, "Find after Update", found.Limits, keys.Limits{AllowedModels: models})
}

// testMaxPriorityAlone stores a key whose only limit is its priority ceiling (in PostgreSQL:
// a limits row that holds nothing else), then clears it: the key has no limits again.
func testMaxPriorityAlone(t *testing.T, s keys.Store) {
	k, secret := newKey(t, s, "capped", keys.Limits{MaxPriority: "low"})
	found, ok := find(t, s, secret)
	if !ok {
		t.Fatal("Find: not found")
	}
	sameLimits(t, "Find", found.Limits, keys.Limits{MaxPriority: "low"})
	sameLimits(t, "List", list(t, s)[0].Limits, keys.Limits{MaxPriority: "low"})
	high := "high"
	got, ok, err := s.Update(context.Background(), k.ID, keys.Patch{MaxPriority: &high})
	if err != nil || !ok {
		t.Fatalf("Update = %v, %v", ok, err)
	}
	sameLimits(t, "Update to high", got.Limits, keys.Limits{MaxPriority: "high"})
	none := ""
	if got, ok, err = s.Update(context.Background(), k.ID, keys.Patch{MaxPriority: &none}); err != nil || !ok {
		t.Fatalf("Update = %v, %v", ok, err)
	}
	sameLimits(t, "Update cleared", got.Limits, keys.Limits{})
	sameLimits(t, "Get after the clear", get(t, s, k.ID).Limits, keys.Limits{})
}

// testCacheAlone stores a key whose only setting is its use of the response cache (in
// PostgreSQL: a limits row that holds nothing else), then clears it.
func testCacheAlone(t *testing.T, s keys.Store) {
	k, secret := newKey(t, s, "cached", keys.Limits{Cache: keys.CacheDefault})
	found, ok := find(t, s, secret)
	if !ok {
		t.Fatal("Find: not found")
	}
	sameLimits(t, "Find", found.Limits, keys.Limits{Cache: keys.CacheDefault})
	none := ""
	got, ok, err := s.Update(context.Background(), k.ID, keys.Patch{Cache: &none})
	if err != nil || !ok {
		t.Fatalf("Update = %v, %v", ok, err)
	}
	sameLimits(t, "Update cleared", got.Limits, keys.Limits{})
	sameLimits(t, "Get after the clear", get(t, s, k.ID).Limits, keys.Limits{})
}

var (
	day1 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	day2 = day1.AddDate(0, 0, 1)
)

func testRecordSums(t *testing.T, s keys.Store) {
	a, _ := newKey(t, s, "a", keys.Limits{})
	b, _ := newKey(t, s, "b", keys.Limits{})
	record(t, s, nil, nil)
	record(t, s, []keys.Usage{
		{KeyID: a.ID, Day: day1, Model: "m1", Requests: 1, InputTokens: 10, OutputTokens: 20},
		{KeyID: a.ID, Day: day1.Add(13 * time.Hour), Model: "m1", Requests: 2, InputTokens: 5, OutputTokens: 5}, // same row, same batch
		{KeyID: a.ID, Day: day1, Model: "m2", Requests: 1, InputTokens: 1, OutputTokens: 1},
		{KeyID: b.ID, Day: day1, Model: "m1", Requests: 4, InputTokens: 40, OutputTokens: 400},
	}, nil)
	record(t, s, []keys.Usage{
		{KeyID: a.ID, Day: day1.Add(23*time.Hour + 59*time.Minute), Model: "m1", Requests: 3, InputTokens: 100, OutputTokens: 200},
		// 01:00 at UTC+5 is 20:00 UTC the day before: usage is kept by UTC day.
		{KeyID: a.ID, Day: time.Date(2030, 1, 3, 1, 0, 0, 0, time.FixedZone("UTC+5", 5*3600)), Model: "m1", Requests: 1, InputTokens: 2, OutputTokens: 3},
		{KeyID: keys.NewID(), Day: day1, Model: "m1", Requests: 1}, // a key that does not exist
	}, nil)
	sameUsage(t, "Usage a", usage(t, s, a.ID), []keys.Usage{
		{KeyID: a.ID, Day: day1, Model: "m1", Requests: 6, InputTokens: 115, OutputTokens: 225},
		{KeyID: a.ID, Day: day1, Model: "m2", Requests: 1, InputTokens: 1, OutputTokens: 1},
		{KeyID: a.ID, Day: day2, Model: "m1", Requests: 1, InputTokens: 2, OutputTokens: 3},
	})
	sameUsage(t, "Usage b", usage(t, s, b.ID), []keys.Usage{
		{KeyID: b.ID, Day: day1, Model: "m1", Requests: 4, InputTokens: 40, OutputTokens: 400},
	})
	if u := usage(t, s, keys.NewID()); len(u) != 0 {
		t.Errorf("Usage of an unknown key: %+v", u)
	}
}

func testLastUsed(t *testing.T, s keys.Store) {
	k, secret := newKey(t, s, "used", keys.Limits{})
	other, _ := newKey(t, s, "unused", keys.Limits{})
	t1 := time.Date(2030, 3, 4, 5, 6, 7, 891011000, time.FixedZone("UTC-3", -3*3600))
	lastUsed := func(what string, want time.Time) {
		t.Helper()
		sameTime(t, what, get(t, s, k.ID).LastUsedAt, want)
	}
	record(t, s, nil, map[string]time.Time{k.ID: t1, keys.NewID(): t1, "not-a-uuid": t1})
	lastUsed("LastUsedAt after first use", t1)
	if f, ok := find(t, s, secret); !ok || !f.LastUsedAt.Equal(t1) {
		t.Errorf("Find: LastUsedAt %v, want %v", f.LastUsedAt, t1)
	}
	record(t, s, nil, map[string]time.Time{k.ID: t1.Add(-time.Hour)})
	lastUsed("LastUsedAt after an earlier use", t1)
	record(t, s, nil, map[string]time.Time{k.ID: time.Time{}})
	lastUsed("LastUsedAt after a zero time", t1)
	t2 := t1.Add(90 * time.Second)
	record(t, s, []keys.Usage{{KeyID: k.ID, Day: t2, Model: "m", Requests: 1}}, map[string]time.Time{k.ID: t2})
	lastUsed("LastUsedAt after a later use", t2)
	if got := get(t, s, other.ID).LastUsedAt; !got.IsZero() {
		t.Errorf("LastUsedAt of a key never used: %v", got)
	}
}

func testUsageOrder(t *testing.T, s keys.Store) {
	k, _ := newKey(t, s, "ordered", keys.Limits{})
	day0 := day1.AddDate(0, 0, -1)
	var rows []keys.Usage
	for _, d := range []time.Time{day2, day0, day1} {
		for _, m := range []string{"b", "a-1", "B", "a", "Ω"} {
			rows = append(rows, keys.Usage{KeyID: k.ID, Day: d, Model: m, Requests: 1})
		}
	}
	record(t, s, rows, nil)
	want := slices.Clone(rows)
	keys.SortUsage(want)
	if want[0].Model != "B" || !want[0].Day.Equal(day0) {
		t.Fatalf("keys.SortUsage does not order by day, then model bytes: %+v", want)
	}
	sameUsage(t, "Usage", usage(t, s, k.ID), want)
}

// testConcurrentRecord records from several goroutines at once, the rows of each batch in a
// different order; the totals must be exact (no lost update, no deadlock).
func testConcurrentRecord(t *testing.T, s keys.Store) {
	a, _ := newKey(t, s, "a", keys.Limits{})
	b, _ := newKey(t, s, "b", keys.Limits{})
	const workers, batches = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers*batches)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range batches {
				rows := []keys.Usage{
					{KeyID: a.ID, Day: day1, Model: "m1", Requests: 1, InputTokens: 2, OutputTokens: 3},
					{KeyID: a.ID, Day: day1, Model: "m2", Requests: 1, InputTokens: 1, OutputTokens: 1},
					{KeyID: b.ID, Day: day2, Model: "m1", Requests: 2, InputTokens: 4, OutputTokens: 6},
				}
				if (w+i)%2 == 1 {
					slices.Reverse(rows)
				}
				at := day1.Add(time.Duration(w*batches+i) * time.Second)
				if err := s.Record(context.Background(), rows, map[string]time.Time{a.ID: at, b.ID: at}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Record: %v", err)
	}
	const n = workers * batches
	sameUsage(t, "Usage a", usage(t, s, a.ID), []keys.Usage{
		{KeyID: a.ID, Day: day1, Model: "m1", Requests: n, InputTokens: 2 * n, OutputTokens: 3 * n},
		{KeyID: a.ID, Day: day1, Model: "m2", Requests: n, InputTokens: n, OutputTokens: n},
	})
	sameUsage(t, "Usage b", usage(t, s, b.ID), []keys.Usage{
		{KeyID: b.ID, Day: day2, Model: "m1", Requests: 2 * n, InputTokens: 4 * n, OutputTokens: 6 * n},
	})
	last := day1.Add(time.Duration(n-1) * time.Second)
	sameTime(t, "LastUsedAt a", get(t, s, a.ID).LastUsedAt, last)
	sameTime(t, "LastUsedAt b", get(t, s, b.ID).LastUsedAt, last)
}
