package keys

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// flaky wraps a store: it counts lookups and can be made to fail like a database that is down.
type flaky struct {
	Store
	finds atomic.Int64
	down  atomic.Bool
}

func (f *flaky) Find(ctx context.Context, h Hash) (Key, bool, error) {
	f.finds.Add(1)
	if f.down.Load() {
		return Key{}, false, fmt.Errorf("%w: connection refused", ErrUnavailable)
	}
	return f.Store.Find(ctx, h)
}

func (f *flaky) Record(ctx context.Context, rows []Usage, used map[string]time.Time) error {
	if f.down.Load() {
		return fmt.Errorf("%w: connection refused", ErrUnavailable)
	}
	return f.Store.Record(ctx, rows, used)
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newKey(t *testing.T, s Store, l Limits) (Key, string) {
	t.Helper()
	secret, prefix := NewSecret()
	k, err := s.Insert(context.Background(), Key{ID: NewID(), Name: "k", Prefix: prefix, Limits: l}, HashOf(secret))
	if err != nil {
		t.Fatal(err)
	}
	return k, secret
}

func TestAuthCachesValidKeysForTheTTL(t *testing.T) {
	ctx := context.Background()
	f := &flaky{Store: NewMemory()}
	c := &clock{t: time.Unix(1e9, 0)}
	a := NewAuth(f, 2*time.Second)
	a.now = c.now
	k, secret := newKey(t, f, Limits{})

	for range 100 {
		got, err := a.Check(ctx, secret, c.now())
		if err != nil || got.ID != k.ID {
			t.Fatalf("Check = %v, %v", got, err)
		}
	}
	if n := f.finds.Load(); n != 1 {
		t.Fatalf("%d store lookups for 100 checks within the TTL, want 1", n)
	}
	// Revoked in the store (by another node): still trusted within the TTL, refused after it.
	if ok, _ := f.Revoke(ctx, k.ID); !ok {
		t.Fatal("revoke")
	}
	c.add(time.Second)
	if _, err := a.Check(ctx, secret, c.now()); err != nil {
		t.Fatalf("within the TTL: %v", err)
	}
	c.add(time.Second)
	if _, err := a.Check(ctx, secret, c.now()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("after the TTL: err = %v, want ErrInvalid", err)
	}
	if _, err := a.Check(ctx, secret, c.now()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("after the TTL, again: err = %v, want ErrInvalid", err)
	}
}

func TestAuthUnknownSecrets(t *testing.T) {
	ctx := context.Background()
	f := &flaky{Store: NewMemory()}
	a := NewAuth(f, 0)
	if a.ttl != MaxCacheTTL {
		t.Fatalf("default TTL %v, want %v", a.ttl, MaxCacheTTL)
	}
	for range 3 {
		if _, err := a.Check(ctx, "mr_live_nope", time.Now()); !errors.Is(err, ErrInvalid) {
			t.Fatalf("err = %v", err)
		}
	}
	if n := f.finds.Load(); n != 3 {
		t.Fatalf("unknown secrets are not cached: %d lookups, want 3", n)
	}
	// A key created after a miss works at once.
	k, secret := newKey(t, f, Limits{})
	if got, err := a.Check(ctx, secret, time.Now()); err != nil || got.ID != k.ID {
		t.Fatalf("new key: %v, %v", got, err)
	}
}

func TestAuthStoreDown(t *testing.T) {
	ctx := context.Background()
	f := &flaky{Store: NewMemory()}
	c := &clock{t: time.Unix(1e9, 0)}
	a := NewAuth(f, time.Second)
	a.now = c.now
	_, cached := newKey(t, f, Limits{})
	_, fresh := newKey(t, f, Limits{})
	if _, err := a.Check(ctx, cached, c.now()); err != nil {
		t.Fatal(err)
	}
	f.down.Store(true)
	for range 5 {
		c.add(700 * time.Millisecond)
		if _, err := a.Check(ctx, cached, c.now()); err != nil {
			t.Fatalf("cached key while the store is down: %v", err)
		}
	}
	if _, err := a.Check(ctx, fresh, c.now()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("uncached key while the store is down: err = %v, want ErrUnavailable", err)
	}
	// Asked about once a second while down, not on every request.
	if n := f.finds.Load(); n > 6 {
		t.Fatalf("%d lookups while down", n)
	}
	f.down.Store(false)
	if _, err := a.Check(ctx, fresh, c.now()); err != nil {
		t.Fatalf("store back: %v", err)
	}
}

func TestAuthExpiryAndForget(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	c := &clock{t: time.Unix(1e9, 0)}
	a := NewAuth(m, time.Second)
	a.now = c.now
	_, secret := newKey(t, m, Limits{ExpiresAt: c.now().Add(time.Minute)})
	if _, err := a.Check(ctx, secret, c.now()); err != nil {
		t.Fatal(err)
	}
	c.add(time.Minute)
	if _, err := a.Check(ctx, secret, c.now()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("expired: err = %v", err)
	}

	k, secret := newKey(t, m, Limits{})
	a.Check(ctx, secret, c.now())
	m.Revoke(ctx, k.ID)
	a.Forget(k.ID)
	if _, err := a.Check(ctx, secret, c.now()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("forgotten after revoke: err = %v", err)
	}
}

func TestAuthSweep(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	c := &clock{t: time.Unix(1e9, 0)}
	a := NewAuth(m, time.Second)
	a.now = c.now
	k, secret := newKey(t, m, Limits{RateLimitRPM: 1})
	a.Check(ctx, secret, c.now())
	var budget Local
	budget.Admit(ctx, k.ID, k.Limits, c.now())
	c.add(30 * time.Second)
	a.Sweep(10 * time.Second)
	budget.Sweep(c.now())
	if _, ok := (*a.entries.Load())[HashOf(secret)]; ok {
		t.Fatal("an idle key stayed cached")
	}
	if _, ok := budget.limiters.Load(k.ID); !ok {
		t.Fatal("a limiter that has not refilled was dropped")
	}
	c.add(time.Minute)
	budget.Sweep(c.now())
	if _, ok := budget.limiters.Load(k.ID); ok {
		t.Fatal("a refilled limiter stayed")
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		glob, name string
		want       bool
	}{
		{"*", "meta-llama/Llama-3-8B", true},
		{"llama-*", "llama-3", true},
		{"llama-*", "qwen", false},
		{"*-8b", "llama-3-8b", true},
		{"*/*", "org/model", true},
		{"*/*", "model", false},
		{"gpt-?o", "gpt-4o", true},
		{"gpt-?o", "gpt-40o", false},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"", "", true},
		{"", "x", false},
		{"**", "", true},
	} {
		if got := Match(tc.glob, tc.name); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.glob, tc.name, got, tc.want)
		}
	}
}

func BenchmarkAuthCached(b *testing.B) {
	m := NewMemory()
	secret, prefix := NewSecret()
	m.Insert(context.Background(), Key{ID: NewID(), Prefix: prefix}, HashOf(secret))
	a := NewAuth(m, MaxCacheTTL)
	ctx := context.Background()
	now := time.Now()
	if _, err := a.Check(ctx, secret, now); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := a.Check(ctx, secret, now); err != nil {
				b.Fatal(err)
			}
		}
	})
}
