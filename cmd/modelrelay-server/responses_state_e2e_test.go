package main

// Stored Responses API responses from outside: shared by two nodes through Redis, owned by the
// client key that created them, and a Redis outage answered honestly.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"modelrelay/appproxy/appproxytest"
)

// respond posts a Responses call to node with key secret ("" = none).
func respond(r *keyRelay, secret, body string) relayAnswer {
	return r.send("/v1/responses", keyHeader(secret, "bearer"), body)
}

// storedCall sends GET or DELETE /v1/responses/{id} with key secret.
func storedCall(t *testing.T, r *keyRelay, method, id, secret string) (int, []byte) {
	t.Helper()
	return adminCall(t, r.addr, method, "/v1/responses/"+id, secret, "")
}

func responseIDOf(t *testing.T, a relayAnswer) string {
	t.Helper()
	var v struct{ ID string }
	if a.status != http.StatusOK || json.Unmarshal(a.body, &v) != nil || !strings.HasPrefix(v.ID, "resp_") {
		t.Fatalf("no stored response: %s", a)
	}
	return v.ID
}

func TestE2EResponsesStoredAcrossNodesAndOwned(t *testing.T) {
	t.Parallel()
	fake := newFakeModel(t, "openai")
	redisAddr, stop := appproxytest.StartRedis(t)
	t.Cleanup(stop)
	config := fmt.Sprintf("backends:\n  - name: llama\n    url: %s\n    models: [\"*\"]\n    dialects: [openai]\n", fake.url)
	env := map[string]string{"REDIS_URL": "redis://" + redisAddr}
	a := startKeyRelay(t, config, env)
	b := startKeyRelay(t, config, env)

	// Node a stores; node b reads it, continues it and deletes it; node a then finds nothing.
	id := responseIDOf(t, respond(a, "", `{"model":"m","input":"Say hello."}`))
	if st, body := storedCall(t, b, "GET", id, ""); st != 200 || !strings.Contains(string(body), id) {
		t.Fatalf("GET on the other node: %d %s", st, body)
	}
	next := respond(b, "", fmt.Sprintf(`{"model":"m","previous_response_id":%q,"input":"And again?"}`, id))
	if next.status != 200 {
		t.Fatalf("continued on the other node: %s", next)
	}
	calls := fake.callsTo("/v1/chat/completions")
	if msgs, _ := json.Marshal(calls[len(calls)-1].Body["messages"]); !strings.Contains(string(msgs), "Say hello.") {
		t.Errorf("the continued call lost the first turn: %s", msgs)
	}
	if st, body := storedCall(t, b, "DELETE", id, ""); st != 200 || !jsonEqual(body, fmt.Sprintf(`{"id":%q,"object":"response","deleted":true}`, id)) {
		t.Errorf("DELETE: %d %s", st, body)
	}
	if st, body := storedCall(t, a, "GET", id, ""); st != 404 {
		t.Errorf("GET after DELETE: %d %s", st, body)
	}
	if ans := respond(a, "", fmt.Sprintf(`{"model":"m","previous_response_id":%q,"input":"Hi"}`, id)); ans.status != 404 ||
		!strings.Contains(string(ans.body), `"previous_response_not_found"`) {
		t.Errorf("continuing a deleted response: %s", ans)
	}

	// A stored response belongs to the key that created it: another key, or none, gets 404.
	one := createKey(t, a.addr, `{"name":"one"}`)
	two := createKey(t, a.addr, `{"name":"two"}`)
	mine := responseIDOf(t, respond(a, one.Secret, `{"model":"m","input":"Say hello."}`))
	if st, body := storedCall(t, a, "GET", mine, one.Secret); st != 200 {
		t.Errorf("the owner's GET: %d %s", st, body)
	}
	for _, other := range []string{two.Secret, ""} {
		if st, body := storedCall(t, a, "GET", mine, other); st != 404 {
			t.Errorf("GET with another key %q: %d %s", other[:min(len(other), 12)], st, body)
		}
		if ans := respond(a, other, fmt.Sprintf(`{"model":"m","previous_response_id":%q,"input":"Hi"}`, mine)); ans.status != 404 {
			t.Errorf("continuing another key's response: %s", ans)
		}
	}

	// Redis gone: a call that does not continue anything is served (and its response not
	// kept); one that does is told the store is unavailable, never that the id is unknown.
	stop()
	if ans := respond(a, "", `{"model":"m","input":"Say hello."}`); ans.status != 200 {
		t.Errorf("a plain call while Redis is down: %s", ans)
	}
	if ans := respond(a, one.Secret, fmt.Sprintf(`{"model":"m","previous_response_id":%q,"input":"Hi"}`, mine)); ans.status != 503 {
		t.Errorf("continuing while Redis is down: %s", ans)
	}
	if st, body := storedCall(t, a, "GET", mine, one.Secret); st != 503 {
		t.Errorf("GET while Redis is down: %d %s", st, body)
	}
}
