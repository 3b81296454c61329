package cache

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelrelay/appproxy/appproxytest"
)

// redisNode is a store on the Redis at addr, as one relay node holds it.
func redisNode(t *testing.T, addr string) (*Redis, *redis.Client) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return NewRedis(rdb, nil), rdb
}

// TestRedisSharedBetweenNodes: what one node stores, another reads; Clear deletes only the
// cache's names.
func TestRedisSharedBetweenNodes(t *testing.T) {
	addr, stop := appproxytest.StartRedis(t)
	t.Cleanup(stop)
	a, rdb := redisNode(t, addr)
	b, _ := redisNode(t, addr)
	ctx := context.Background()
	k := keyOf("key:1", "hello")
	e := sampleEntry("data: [DONE]\n\n", true)
	a.Put(ctx, k, e, time.Minute)
	got, ok := b.Get(ctx, k)
	if !ok || !bytes.Equal(got.Body, e.Body) || !got.Stream || got.Header.Get("X-Modelrelay-Model") != "m" || !got.Stored.Equal(e.Stored) {
		t.Fatalf("the other node read %+v, %v", got, ok)
	}
	if _, ok := b.Get(ctx, keyOf("key:2", "hello")); ok {
		t.Fatal("another tenant's request hit the entry")
	}
	if ttl := rdb.PTTL(ctx, KeyPrefix+k.String()).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("the entry's TTL in Redis is %v, want at most a minute", ttl)
	}
	rdb.Set(ctx, "modelrelay:tpm:k", "7", 0) // another part of the relay's, on the same database
	for i := range 1200 {                    // more than one step of Clear
		a.Put(ctx, keyOf("key:1", strconv.Itoa(i)), e, time.Minute)
	}
	if err := b.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Get(ctx, k); ok {
		t.Fatal("a hit after Clear")
	}
	if n := len(rdb.Keys(ctx, KeyPrefix+"*").Val()); n != 0 {
		t.Fatalf("%d entries left after Clear", n)
	}
	if v := rdb.Get(ctx, "modelrelay:tpm:k").Val(); v != "7" {
		t.Fatalf("Clear deleted a name outside the cache (value now %q)", v)
	}
	if a.Failures() != 0 || b.Failures() != 0 {
		t.Fatalf("failures %d, %d on a Redis that answered", a.Failures(), b.Failures())
	}
}

// TestRedisOutageIsAMiss: with Redis gone, Get misses and Put drops, at once and counted;
// once it is back (after the pause), entries are stored and read again.
func TestRedisOutageIsAMiss(t *testing.T) {
	addr, stop := appproxytest.StartRedis(t)
	s, _ := redisNode(t, addr)
	ctx := context.Background()
	k := keyOf("key:1", "hello")
	e := sampleEntry(`{"id":"x"}`, false)
	s.Put(ctx, k, e, time.Minute)
	stop()
	if _, ok := s.Get(ctx, k); ok {
		t.Fatal("a hit with Redis gone")
	}
	s.Put(ctx, k, e, time.Minute)
	if s.Failures() != 1 {
		t.Fatalf("failures %d, want 1 (the Get; the Put came during the pause)", s.Failures())
	}
	if err := s.Clear(ctx); err == nil {
		t.Fatal("Clear with Redis gone reported no error")
	}
	t.Cleanup(appproxytest.StartRedisAt(t, addr))
	s.retryAt.Store(0) // the pause is over
	s.Put(ctx, k, e, time.Minute)
	if got, ok := s.Get(ctx, k); !ok || !bytes.Equal(got.Body, e.Body) {
		t.Fatalf("after Redis came back: %v, %v", got, ok)
	}
}

// TestRedisDamagedEntryIsAMiss: a value under a cache name that does not decode is a miss.
func TestRedisDamagedEntryIsAMiss(t *testing.T) {
	addr, stop := appproxytest.StartRedis(t)
	t.Cleanup(stop)
	s, rdb := redisNode(t, addr)
	ctx := context.Background()
	k := keyOf("key:1", "hello")
	rdb.Set(ctx, KeyPrefix+k.String(), "\x01\x00short", time.Minute)
	if _, ok := s.Get(ctx, k); ok {
		t.Fatal("a damaged entry was a hit")
	}
	if s.Failures() != 1 {
		t.Fatalf("failures %d, want 1", s.Failures())
	}
}
