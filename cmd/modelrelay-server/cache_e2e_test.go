package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelrelay/appproxy/appproxytest"
)

// TestE2ECacheSharedThroughRedis: two relay binaries with cache.store: redis on one real
// Redis share their entries (what one stored, the other serves, a stream byte for byte), a
// Redis killed makes every request a miss served by the target (never an error), Redis back
// makes entries shared again, and DELETE /admin/cache on one node empties the cache of both.
func TestE2ECacheSharedThroughRedis(t *testing.T) {
	t.Parallel()
	oa := newFakeModel(t, "openai")
	redisAddr, stop := appproxytest.StartRedis(t)
	config := "cache:\n  enabled: true\n  store: redis\nbackends:\n" + backendYAML("oa", oa.url, "gpt-m") + "    dialects: [openai]\n"
	env := map[string]string{"REDIS_URL": "redis://" + redisAddr}
	a := startKeyRelay(t, config, env)
	b := startKeyRelay(t, config, env)
	use := http.Header{"Content-Type": {"application/json"}, "X-Modelrelay-Cache": {"use"}}
	calls := func() int { return len(oa.callsTo("/v1/chat/completions")) }
	ask := func(node *keyRelay, body string) relayAnswer {
		t.Helper()
		ans := node.send("/v1/chat/completions", use, body)
		if ans.err != nil || ans.status != 200 {
			t.Fatalf("%s", ans)
		}
		return ans
	}

	stream := chatJSON("gpt-m", `"seed":1`, `"stream":true`)
	whole := chatJSON("gpt-m", `"seed":1`)
	for _, body := range []string{stream, whole} {
		before := calls()
		miss, hit := ask(a, body), ask(b, body)
		if miss.header.Get("X-Modelrelay-Cache") != "miss" || hit.header.Get("X-Modelrelay-Cache") != "hit" {
			t.Fatalf("node a %q, node b %q; want a miss, then a hit", miss.header.Get("X-Modelrelay-Cache"), hit.header.Get("X-Modelrelay-Cache"))
		}
		if !bytes.Equal(hit.body, miss.body) || hit.header.Get("Content-Type") != miss.header.Get("Content-Type") {
			t.Fatalf("the hit on node b differs from the miss on node a:\n%q\n%q", hit.body, miss.body)
		}
		if calls() != before+1 {
			t.Fatalf("the target saw %d requests for two nodes, want 1", calls()-before)
		}
	}
	if !strings.Contains(string(ask(b, stream).body), "data: [DONE]") {
		t.Fatal("the stored stream lacks its end")
	}

	// Redis killed: misses, answered by the target, on both nodes.
	stop()
	for _, node := range []*keyRelay{a, b, a} {
		before := calls()
		if ans := ask(node, whole); ans.header.Get("X-Modelrelay-Cache") != "miss" || calls() != before+1 {
			t.Fatalf("with Redis gone: %q, the target saw %d", ans.header.Get("X-Modelrelay-Cache"), calls()-before)
		}
	}
	eventually(t, 10*time.Second, "node a logs the outage", func() (bool, string) {
		return strings.Count(a.logs.String(), "response cache: Redis unavailable") == 1, a.logs.tail(2000)
	})
	st, metrics := getFrom(t, a.addr, "/metrics")
	if st != 200 || !strings.Contains(string(metrics), "modelrelay_cache_store_failures_total ") ||
		strings.Contains(string(metrics), "modelrelay_cache_store_failures_total 0\n") {
		t.Fatalf("node a counts no store failure: %d", st)
	}

	// Redis back (empty): after the pause, entries are shared again.
	t.Cleanup(appproxytest.StartRedisAt(t, redisAddr))
	other := chatJSON("gpt-m", `"seed":2`)
	eventually(t, 20*time.Second, "an entry stored through Redis again", func() (bool, string) {
		ask(a, other)
		ans := ask(b, other)
		return ans.header.Get("X-Modelrelay-Cache") == "hit", ans.String()
	})
	if st, body := adminCall(t, b.addr, "DELETE", "/admin/cache", e2eAdmin, ""); st != http.StatusNoContent {
		t.Fatalf("DELETE /admin/cache: %d %s", st, body)
	}
	if ans := ask(a, other); ans.header.Get("X-Modelrelay-Cache") != "miss" {
		t.Fatalf("after node b cleared the cache, node a: %q", ans.header.Get("X-Modelrelay-Cache"))
	}
}
