package cache

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

func keyOf(tenant, body string) Key {
	r := Request{Tenant: tenant, Route: "/v1/chat/completions", Model: "m", Body: []byte(body)}
	return r.Key()
}

func entryOf(size int) *Entry { return &Entry{Body: []byte(strings.Repeat("x", size))} }

// Len is how many entries the store holds, and their size.
func (m *Memory) Len() (entries int, bytes int64) {
	for _, s := range m.shards {
		entries, bytes = entries+s.Len(), bytes+s.Bytes()
	}
	return entries, bytes
}

// clock is a settable time for a store.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestMemoryGetPut(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(1 << 20)
	k := keyOf("a", "1")
	if _, ok := m.Get(ctx, k); ok {
		t.Fatal("a hit in an empty store")
	}
	e := entryOf(10)
	m.Put(ctx, k, e, time.Minute)
	if got, ok := m.Get(ctx, k); !ok || got != e {
		t.Fatalf("Get = %v, %v; want the entry put", got, ok)
	}
	if _, ok := m.Get(ctx, keyOf("b", "1")); ok {
		t.Fatal("another tenant's request hit the entry")
	}
	// A Put replaces.
	e2 := entryOf(20)
	m.Put(ctx, k, e2, time.Minute)
	if got, _ := m.Get(ctx, k); got != e2 {
		t.Fatal("a second Put did not replace the entry")
	}
	if n, used := m.Len(); n != 1 || used != e2.size()+1 {
		t.Fatalf("Len = %d, %d; want one entry of %d", n, used, e2.size()+1)
	}
	if err := m.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get(ctx, k); ok {
		t.Fatal("a hit after Clear")
	}
	if n, used := m.Len(); n != 0 || used != 0 {
		t.Fatalf("Len after Clear = %d, %d", n, used)
	}
}

func TestMemoryTTL(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Unix(1000, 0)}
	m := NewMemory(1 << 20)
	m.now = c.now
	k := keyOf("a", "1")
	m.Put(ctx, k, entryOf(10), time.Minute)
	c.t = c.t.Add(time.Minute - time.Nanosecond)
	if _, ok := m.Get(ctx, k); !ok {
		t.Fatal("an entry expired before its TTL")
	}
	c.t = c.t.Add(time.Nanosecond)
	if _, ok := m.Get(ctx, k); ok {
		t.Fatal("an entry outlived its TTL")
	}
	if n, used := m.Len(); n != 0 || used != 0 {
		t.Fatalf("an expired entry read stays: Len = %d, %d", n, used)
	}
	m.Put(ctx, k, entryOf(10), 0)
	if _, ok := m.Get(ctx, k); ok {
		t.Fatal("an entry with no TTL was kept")
	}
}

// sameShard returns n keys of tenant "a" that fall in one shard.
func sameShard(n int) []Key {
	var out []Key
	for i := 0; len(out) < n; i++ {
		if k := keyOf("a", strconv.Itoa(i)); k.Sum[0]%shards == 0 {
			out = append(out, k)
		}
	}
	return out
}

// TestMemoryOldestOut: the bound holds, and what goes to make room is the oldest stored.
func TestMemoryOldestOut(t *testing.T) {
	ctx := context.Background()
	one := entryOf(1000).size() + 1
	m := NewMemory(3 * one * shards) // three entries a shard
	keys := sameShard(7)
	for i := range 5 {
		m.Put(ctx, keys[i], entryOf(1000), time.Minute)
		if n, used := m.Len(); used > 3*one || n > 3 {
			t.Fatalf("after %d puts: %d entries of %d bytes, over the shard's bound %d", i+1, n, used, 3*one)
		}
	}
	for i := range 5 {
		_, ok := m.Get(ctx, keys[i])
		if want := i >= 2; ok != want {
			t.Errorf("entry %d kept: %v, want %v", i, ok, want)
		}
	}
	// Replacing the oldest makes it the newest: the next Put pushes out another.
	m.Put(ctx, keys[2], entryOf(1000), time.Minute)
	m.Put(ctx, keys[5], entryOf(1000), time.Minute)
	if _, ok := m.Get(ctx, keys[2]); !ok {
		t.Error("the replaced entry was pushed out")
	}
	if _, ok := m.Get(ctx, keys[3]); ok {
		t.Error("the oldest entry stayed")
	}
	// An entry larger than a shard is not kept, and pushes nothing out.
	m.Put(ctx, keys[6], entryOf(int(4*one)), time.Minute)
	if n, _ := m.Len(); n != 3 {
		t.Errorf("%d entries after a Put too large to keep, want 3", n)
	}
	if got := MaxEntryBytes(3 * one * shards); got != 3*one {
		t.Errorf("MaxEntryBytes = %d, want a shard's %d", got, 3*one)
	}
	if got := MaxEntryBytes(1 << 40); got != 8<<20 {
		t.Errorf("MaxEntryBytes of a huge store = %d, want 8 MiB", got)
	}
}
