package responses

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelrelay/appproxy/appproxytest"
)

// A real redis-server: records round-trip, expire with the TTL, and an outage is ErrUnavailable.
func TestRedisStore(t *testing.T) {
	addr, stop := appproxytest.StartRedis(t)
	t.Cleanup(stop)
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	s := NewRedis(rdb, "test:responses:", time.Minute)
	if err := s.Put(ctx, "resp_1", record(10)); err != nil {
		t.Fatal(err)
	}
	r, ok, err := s.Get(ctx, "resp_1")
	if !ok || err != nil || r.Owner != "key:k" || string(r.Items) != "[]" {
		t.Fatalf("Get after Put: %+v %v %v", r, ok, err)
	}
	if ttl := rdb.TTL(ctx, "test:responses:resp_1").Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("TTL %v, want up to a minute", ttl)
	}
	if _, ok, err := s.Get(ctx, "resp_2"); ok || err != nil {
		t.Errorf("an unknown id: %v %v", ok, err)
	}
	rdb.Set(ctx, "test:responses:torn", "{not json", 0)
	if _, ok, err := s.Get(ctx, "torn"); ok || err != nil {
		t.Errorf("a torn record: %v %v, want unknown", ok, err)
	}
	if ok, err := s.Delete(ctx, "resp_1"); !ok || err != nil {
		t.Errorf("Delete: %v %v", ok, err)
	}
	stop()
	if _, _, err := s.Get(ctx, "resp_1"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Get with Redis gone: %v, want ErrUnavailable", err)
	}
	if err := s.Put(ctx, "resp_1", record(10)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Put with Redis gone: %v, want ErrUnavailable", err)
	}
}
