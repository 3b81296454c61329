package main

import (
	"net/http"
	"testing"
	"time"

	"modelrelay/appproxy/appproxytest"
	"modelrelay/relay/keys/pgtest"
)

// With a top-level redis_url, a key's limits hold across relay nodes: two relays on one
// database and one Redis admit the key's rpm between them, not each.
func TestE2EKeysLimitsSharedAcrossNodes(t *testing.T) {
	t.Parallel()
	oa := newFakeModel(t, "openai")
	db := pgtest.Shared(t).NewDatabase(t)
	redisAddr, stop := appproxytest.StartRedis(t)
	t.Cleanup(stop)
	env := keyEnv(db, "REDIS_URL", "redis://"+redisAddr)
	a := startKeyRelay(t, keyConfig(oa, nil, ""), env)
	b := startKeyRelay(t, keyConfig(oa, nil, ""), env)

	k := createKey(t, a.addr, `{"name":"shared","rate_limit_rpm":6}`)
	start := time.Now()
	served, limited := 0, 0
	for i := range 12 {
		node := a
		if i%2 == 1 {
			node = b
		}
		switch ans := node.openai(k.Secret, "gpt-m"); ans.status {
		case http.StatusOK:
			served++
		case http.StatusTooManyRequests:
			limited++
			if ans.retryAfter() < 1 {
				t.Errorf("429 without a Retry-After: %s", ans)
			}
		default:
			t.Fatalf("request %d: %s", i, ans)
		}
	}
	// A request's worth refills every 10 s: a slow run may see more.
	refilled := int(time.Since(start) / (10 * time.Second))
	if served < 6 || served > 6+refilled || limited != 12-served {
		t.Fatalf("served %d and limited %d of 12 over two nodes in %v; want the key's 6 (+%d refilled) served between them",
			served, limited, time.Since(start), refilled)
	}
}
