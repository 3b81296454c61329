package main

// Client keys while keys are not required, through the real binary: a request that sends one
// of the relay's keys is checked (a wrong one is 401), limited (its models, its rate) and
// accounted (its usage) as if keys were required; a request without one is served as before;
// and no secret of ours reaches a model server in any header, on any route.

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// noRelaySecret fails the test when a header a model server received carries "mr_live_".
func noRelaySecret(t testing.TB, label string, calls []fakeCall) {
	t.Helper()
	for _, c := range calls {
		for name, values := range c.Header {
			for _, v := range values {
				if strings.Contains(v, "mr_live_") {
					t.Errorf("%s: a model server got %s: %q on %s", label, name, v, c.Path)
				}
			}
		}
	}
}

func TestE2EKeysNotRequiredStillApplyWhenSent(t *testing.T) {
	t.Parallel()
	oa, an := newFakeModel(t, "openai"), newFakeModel(t, "anthropic")
	r := startKeyRelay(t, keyConfig(oa, an, ""), nil)

	// Creating a key says what it does here, in the answer and in the log.
	st, b := adminCall(t, r.addr, "POST", "/admin/keys", e2eAdmin, `{"name":"llamas","allowed_models":["llama-*"]}`)
	var llamas struct {
		createdKey
		Warning string `json:"warning"`
	}
	if st != http.StatusCreated || json.Unmarshal(b, &llamas) != nil || llamas.Secret == "" {
		t.Fatalf("POST /admin/keys: %d %s", st, b)
	}
	const warning = "require_api_keys is off: a key is checked when a client sends it, but requests without a key are still served"
	if llamas.Warning != warning {
		t.Errorf("POST /admin/keys warning %q, want %q", llamas.Warning, warning)
	}
	eventually(t, 10*time.Second, "a WARN line for a key created while keys are not required", func() (bool, string) {
		return strings.Contains(r.logs.String(), `level=WARN msg="API key created while require_api_keys is off`), r.logs.tail(2000)
	})

	// Its models: 403 in the route's dialect, before any model server is asked.
	before := len(oa.calls())
	a := r.openai(llamas.Secret, "gpt-m")
	if top, typ, code, _ := errorOf(a.body); a.status != http.StatusForbidden || top != "" || typ != "permission_error" || code != "model_not_allowed" {
		t.Errorf("a model outside allowed_models (openai): %s; want 403 permission_error model_not_allowed", a)
	}
	a = r.anthropic(llamas.Secret, "gpt-m")
	if top, typ, _, _ := errorOf(a.body); a.status != http.StatusForbidden || top != "error" || typ != "permission_error" {
		t.Errorf("a model outside allowed_models (anthropic): %s; want 403 {type:error, error.type permission_error}", a)
	}
	if n := len(oa.calls()) - before; n != 0 {
		t.Errorf("the model server got %d requests for a model the key may not use", n)
	}

	// A wrong key of ours is refused, not served as if it were none.
	wrong := randomSecret(t)
	check401(t, "a wrong key (bearer, openai)", r.openai(wrong, "gpt-m"), openAIKeyInvalid)
	check401(t, "a wrong key (x-api-key, anthropic)", r.anthropic(wrong, "gpt-m"), anthropicKeyInvalid)
	check401(t, "a wrong key in x-api-key beside a foreign bearer token",
		r.send("/v1/chat/completions", http.Header{"X-Api-Key": {wrong}, "Authorization": {"Bearer sk-client-own"}}, chatJSON("gpt-m")),
		openAIKeyInvalid)

	// Its usage is recorded for it, by serving model.
	before = len(oa.calls())
	served(t, "an allowed model, key as bearer", r.openai(llamas.Secret, "llama-3"))
	used := lastReport(t, "an allowed model, key as bearer", oa, before)
	before = len(oa.calls())
	served(t, "an allowed model, key in x-api-key (translated)", r.anthropic(llamas.Secret, "llama-3"))
	used = used.plus(lastReport(t, "an allowed model, key in x-api-key", oa, before))
	checkUsage(t, "usage of the key", mustKeyUsage(t, r.addr, llamas.ID), map[string]tally{"llama-3": used})
	if got := listKeys(t, r.addr)[llamas.ID]; got["last_used_at"] == nil {
		t.Errorf("the key's last use is not recorded: %v", got)
	}

	// Its rate.
	rpm := createKey(t, r.addr, `{"name":"one a minute","rate_limit_rpm":1}`)
	served(t, "rpm 1, first request", r.openai(rpm.Secret, "gpt-m"))
	if a := r.openai(rpm.Secret, "gpt-m"); a.status != http.StatusTooManyRequests || a.retryAfter() < 1 {
		t.Errorf("rpm 1, second request: %s; want 429 with Retry-After", a)
	}

	// Without a key of ours, as before: served, and the client's own credential goes on.
	before = len(oa.calls())
	served(t, "no key", r.openai("", "gpt-m"))
	served(t, "a foreign bearer token", r.openai("sk-client-own", "gpt-m"))
	if calls := oa.calls()[before:]; len(calls) != 2 || calls[1].Header.Get("Authorization") != "Bearer sk-client-own" {
		t.Errorf("the client's own token did not reach the model server: %d calls", len(calls))
	}
	// A key of ours beside a foreign token: the key is checked and stays; the token goes on.
	before = len(oa.calls())
	h := http.Header{"X-Api-Key": {llamas.Secret}, "Authorization": {"Bearer sk-client-own"}}
	served(t, "a key in x-api-key beside a foreign token", r.send("/v1/chat/completions", h, chatJSON("llama-3")))
	if c := oa.calls()[before:]; len(c) != 1 || c[0].Header.Get("Authorization") != "Bearer sk-client-own" || c[0].Header.Get("X-Api-Key") != "" {
		t.Errorf("beside a foreign token, the model server got %d calls (want 1 with only the foreign token)", len(c))
	}
	// Keys of ours in both headers: neither goes on.
	h = http.Header{"X-Api-Key": {llamas.Secret}, "Authorization": {"Bearer " + rpm.Secret}}
	served(t, "keys in both headers", r.send("/v1/chat/completions", h, chatJSON("llama-3")))
	// An Anthropic backend with a key of its own gets its key, never ours.
	anyModel := createKey(t, r.addr, `{"name":"any model"}`)
	served(t, "an Anthropic backend, key in x-api-key", r.anthropic(anyModel.Secret, "claude-m"))
	served(t, "an Anthropic backend, key as bearer", r.send("/v1/messages", keyHeader(anyModel.Secret, "bearer"), anthropicJSON("claude-m")))
	if c := an.calls(); len(c) != 2 || c[1].Header.Get("X-Api-Key") != "sk-ant-backend-key" {
		t.Errorf("the Anthropic backend got %d calls; want 2, with its own key", len(c))
	}

	noRelaySecret(t, "OpenAI backend", oa.calls())
	noRelaySecret(t, "Anthropic backend", an.calls())
	for _, secret := range []string{llamas.Secret, rpm.Secret, anyModel.Secret, wrong} {
		if strings.Contains(r.logs.String(), secret) {
			t.Errorf("the log holds a key's secret")
		}
	}
}

// In AppProxy mode with keys not required: a circuit's host keeps its own auth (a key of ours
// there is neither asked for nor checked) but never forwards a key of ours, on inference and
// pass-through paths alike; the aggregation host checks a key that is sent.
func TestE2EKeysNotRequiredOnCircuitHosts(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "open", "circ-m")
	circ := newCircuit("open", route{port: rep.port()})
	e := startE2E(t, e2eOptions{circuits: []json.RawMessage{circ.json()}})
	tok := tokenFor(t, circ.id)
	host := circuitHost("open")
	e.waitServing(host, bearer(tok))

	wrong := randomSecret(t)
	withKey := bearer(tok)
	withKey.Set("X-Api-Key", wrong)
	st, h, body := e.chat(host, "circ-m", withKey)
	if st != 200 || h.Get("X-Replica") != "open" {
		t.Errorf("circuit host, its token and a key of ours: %s", st2s(st, h.Get("X-Replica"), body))
	}
	if seen, ok := rep.lastRequest("POST", "/v1/chat/completions"); !ok || seen.Header.Get("X-Api-Key") != "" ||
		seen.Header.Get("Authorization") != "Bearer "+tok {
		t.Errorf("the replica got x-api-key %q and authorization %q; want no key and the circuit token",
			seen.Header.Get("X-Api-Key"), seen.Header.Get("Authorization"))
	}
	st, _, body = e.do("POST", host, "/echo", withKey, []byte(`{"x":1}`))
	if seen, ok := rep.lastRequest("POST", "/echo"); st != 201 || !ok || seen.Header.Get("X-Api-Key") != "" ||
		seen.Header.Get("Authorization") != "Bearer "+tok {
		t.Errorf("pass-through: %d %s; the replica got x-api-key %q and authorization %q; want no key and the circuit token",
			st, body, seen.Header.Get("X-Api-Key"), seen.Header.Get("Authorization"))
	}

	st, _, body = e.chat(e2eAggHost, "circ-m", withKey)
	if st != http.StatusUnauthorized || !jsonEqual(body, openAIKeyInvalid) {
		t.Errorf("aggregation host, a wrong key of ours: %d %s; want 401 %s", st, body, openAIKeyInvalid)
	}
	st, h, body = e.chat(e2eAggHost, "circ-m", bearer(tok))
	if st != 200 || h.Get("X-Replica") != "open" {
		t.Errorf("aggregation host, the circuit token and no key: %s", st2s(st, h.Get("X-Replica"), body))
	}
	for _, seen := range rep.requests() {
		for name, values := range seen.Header {
			for _, v := range values {
				if strings.Contains(v, "mr_live_") {
					t.Errorf("the replica got %s: %q on %s", name, v, seen.URI)
				}
			}
		}
	}
}
