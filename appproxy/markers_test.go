package appproxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelrelay/appproxy"
	"modelrelay/appproxy/appproxytest"
)

func TestMarkersFlushToLiveDB(t *testing.T) {
	addr, _ := appproxytest.StartRedis(t)
	_, live, err := appproxy.RedisClients("redis://" + addr + "/4")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	m := appproxy.NewMarkers(live, time.Hour, nil)
	for range 3 {
		m.MarkUsed("c1", "s1")
	}
	m.MarkUsed("c2", "")
	m.MarkUsed("", "ignored")
	ctx := context.Background()
	if err := m.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	db2 := redis.NewClient(&redis.Options{Addr: addr, DB: 2})
	defer db2.Close()
	if n, _ := db2.Get(ctx, "circuit.c1.requests").Int(); n != 3 {
		t.Fatalf("c1 requests = %d", n)
	}
	if n, _ := db2.Get(ctx, "circuit.c2.requests").Int(); n != 1 {
		t.Fatalf("c2 requests = %d", n)
	}
	for key, ttl := range map[string]time.Duration{
		"circuit.c1.last_access": 48 * time.Hour, "session.s1.last_access": 48 * time.Hour, "circuit.c1.requests": time.Hour,
	} {
		got, err := db2.TTL(ctx, key).Result()
		if err != nil || got <= ttl-time.Minute || got > ttl {
			t.Errorf("%s ttl %v %v", key, got, err)
		}
	}
	ts, err := db2.Get(ctx, "circuit.c1.last_access").Float64()
	if err != nil || time.Since(time.Unix(int64(ts), 0)) > time.Minute {
		t.Fatalf("last_access %v %v", ts, err)
	}
	if n, _ := db2.Exists(ctx, "session.ignored.last_access").Result(); n != 0 {
		t.Fatal("marker without circuit written")
	}
	db0 := redis.NewClient(&redis.Options{Addr: addr, DB: 4})
	defer db0.Close()
	if n, _ := db0.DBSize(ctx).Result(); n != 0 {
		t.Fatal("markers written outside DB 2")
	}
	// The batch was cleared: a second flush adds nothing.
	if err := m.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := db2.Get(ctx, "circuit.c1.requests").Int(); n != 3 {
		t.Fatalf("c1 requests = %d after empty flush", n)
	}
}

func TestMarkersRunFlushesOnShutdown(t *testing.T) {
	addr, _ := appproxytest.StartRedis(t)
	_, live, _ := appproxy.RedisClients("redis://" + addr)
	defer live.Close()
	m := appproxy.NewMarkers(live, time.Hour, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	m.MarkUsed("c9", "s9")
	cancel()
	<-done
	db2 := redis.NewClient(&redis.Options{Addr: addr, DB: 2})
	defer db2.Close()
	if n, _ := db2.Get(context.Background(), "circuit.c9.requests").Int(); n != 1 {
		t.Fatalf("requests = %d", n)
	}
}

// MarkUsed sits on the request path.
func BenchmarkMarkUsed(b *testing.B) {
	m := appproxy.NewMarkers(nil, time.Hour, nil)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.MarkUsed("3f1c0c8e-6b2a-4b8e-9a51-0d2f5e7c9a10", "c2d4e6f8-0a1b-4c3d-8e5f-7a9b1c3d5e7f")
		}
	})
}
