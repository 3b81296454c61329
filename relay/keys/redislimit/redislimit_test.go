package redislimit

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelrelay/appproxy/appproxytest"
	"modelrelay/relay/keys"
)

// twoNodes returns two budgets on one real Redis, as two relay nodes would hold them.
func twoNodes(t *testing.T) (a, b *Budget, stop func()) {
	addr, stop := appproxytest.StartRedis(t)
	t.Cleanup(stop)
	node := func() *Budget {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { rdb.Close() })
		return New(rdb, nil)
	}
	return node(), node(), stop
}

func TestRequestLimitIsSharedAcrossNodes(t *testing.T) {
	a, b, _ := twoNodes(t)
	ctx, now := context.Background(), time.Now()
	lim := keys.Limits{RateLimitRPM: 10}
	admitted := 0
	var last keys.Refusal
	for i := range 30 {
		node := a
		if i%2 == 1 {
			node = b
		}
		if no, ok := node.Admit(ctx, "k1", lim, now); ok {
			admitted++
		} else {
			last = no
		}
	}
	if admitted != 10 {
		t.Fatalf("%d of 30 requests admitted over two nodes, want the key's 10", admitted)
	}
	if last.Limit != "rate_limit_rpm" || last.Wait <= 0 || last.Wait > 6*time.Second {
		t.Fatalf("refusal %+v, want rate_limit_rpm with a wait of about 6 s (one request's refill)", last)
	}
	// Another key has its own budget.
	if _, ok := a.Admit(ctx, "k2", lim, now); !ok {
		t.Fatal("another key was refused")
	}
}

func TestTokenLimitIsSharedAcrossNodes(t *testing.T) {
	a, b, _ := twoNodes(t)
	ctx, now := context.Background(), time.Now()
	lim := keys.Limits{TokenLimitTPM: 60} // one token a second refills
	if _, ok := a.Admit(ctx, "k", lim, now); !ok {
		t.Fatal("first request refused")
	}
	a.Charge(ctx, "k", lim, 500, now) // more than the minute's budget, used on node a
	no, ok := b.Admit(ctx, "k", lim, now)
	if ok || no.Limit != "token_limit_tpm" {
		t.Fatalf("node b admitted a key that spent its minute on node a: %+v %v", no, ok)
	}
}

func TestRedisDownFallsBackToTheNodesOwnBuckets(t *testing.T) {
	a, _, stop := twoNodes(t)
	stop()
	ctx, now := context.Background(), time.Now()
	lim := keys.Limits{RateLimitRPM: 2}
	admitted := 0
	for range 5 {
		if _, ok := a.Admit(ctx, "k", lim, now); ok {
			admitted++
		}
	}
	if admitted != 2 {
		t.Fatalf("with Redis down, %d of 5 admitted; want the node's own 2", admitted)
	}
}
