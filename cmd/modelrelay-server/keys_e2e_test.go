package main

// Client API keys from outside: the real server binary (and the real
// worker daemon) on a private PostgreSQL from pgtest — one shared cluster with a database per
// test, and a cluster of its own for the test that stops the database. Keys survive restarts,
// a Rust server's database works unchanged, relays on one database share keys and
// revocations, the Rust admin contract holds, limits answer in the route's dialect, usage
// equals what the model server reported, an outage loses neither service for cached keys nor
// usage, and SIGTERM writes what was pending.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"modelrelay/relay/keys/pgtest"
)

// keyConfig is a relay config with an OpenAI-only fake serving gpt-m and llama-3 and, when an
// is set, an Anthropic-only fake serving claude-m with a key of its own (the client's key is
// the relay's: it never reaches a model server). extra is more YAML at the top level.
func keyConfig(oa, an *fakeModel, extra string) string {
	cfg := extra + "backends:\n" + backendYAML("oa", oa.url, "gpt-m", "llama-3") + "    dialects: [openai]\n"
	if an != nil {
		cfg += backendYAML("an", an.url, "claude-m") + "    dialects: [anthropic]\n    api_key: sk-ant-backend-key\n"
	}
	return cfg
}

// keyEnv is the environment of a relay that requires keys, on the database at url.
func keyEnv(url string, more ...string) map[string]string {
	env := map[string]string{"DATABASE_URL": url, "MODELRELAY_REQUIRE_API_KEYS": "true"}
	for i := 0; i+1 < len(more); i += 2 {
		env[more[i]] = more[i+1]
	}
	return env
}

// served asserts a 200.
func served(t testing.TB, label string, a relayAnswer) {
	t.Helper()
	if a.err != nil || a.status != 200 {
		t.Errorf("%s: %s, want 200", label, a)
	}
}

// 1. Keys live in the database: a new process on it knows them.
func TestE2EKeysSurviveARestart(t *testing.T) {
	t.Parallel()
	oa := newFakeModel(t, "openai")
	db := pgtest.Shared(t).NewDatabase(t)
	cfg := keyConfig(oa, nil, "")
	first := startKeyRelay(t, cfg, keyEnv(db))
	k := createKey(t, first.addr, `{"name":"survivor"}`)
	served(t, "the new key on the first process", first.openai(k.Secret, "gpt-m"))
	first.sigterm()

	second := startKeyRelay(t, cfg, keyEnv(db))
	served(t, "the key on a new process on the same database", second.openai(k.Secret, "gpt-m"))
	check401(t, "a wrong key on the new process", second.openai(randomSecret(t), "gpt-m"), openAIKeyInvalid)
	got, ok := listKeys(t, second.addr)[k.ID]
	if !ok || got["name"] != "survivor" || got["prefix"] != k.Prefix || got["revoked"] != false {
		t.Errorf("GET /admin/keys on the new process: %v, want the key made by the first", got)
	}
}

// newUUID4 is a random UUID, made here as the Rust server would (not by the relay's code).
func newUUID4(t testing.TB) string {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		t.Fatal(err)
	}
	u[6], u[8] = u[6]&0x0f|0x40, u[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// 2. A database the Rust server made, with a key it made: the relay runs on it unchanged.
func TestE2EKeysOnARustServersDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	oa := newFakeModel(t, "openai")
	db := pgtest.Shared(t).NewDatabase(t)
	conn := pgConnect(t, db)
	if _, err := conn.Exec(ctx, pgtest.RustSchema); err != nil {
		t.Fatalf("the Rust schema: %v", err)
	}
	secret, id := randomSecret(t), newUUID4(t)
	hash := sha256.Sum256([]byte(secret))
	if _, err := conn.Exec(ctx, `INSERT INTO server_api_keys (id, name, prefix, hash, created_at) VALUES ($1, $2, $3, $4, now())`,
		id, "made by rust", secret[:16], hash[:]); err != nil {
		t.Fatalf("insert the Rust key: %v", err)
	}
	before := pgtest.DescribeRustSchema(t, conn)

	r := startKeyRelay(t, keyConfig(oa, nil, ""), nil, "--require-api-keys", "--database-url", db)
	var ours *string
	if err := conn.QueryRow(ctx, `SELECT to_regclass('modelrelay_key_usage')::text`).Scan(&ours); err != nil || ours == nil {
		t.Fatalf("the relay's migrations did not run (modelrelay_key_usage: %v, %v)", ours, err)
	}
	check401(t, "no key", r.send("/v1/chat/completions", nil, chatJSON("gpt-m")), openAIKeyRequired)
	served(t, "the Rust key as a bearer token", r.openai(secret, "gpt-m"))
	served(t, "the Rust key as x-api-key", r.anthropic(secret, "gpt-m"))

	got, ok := listKeys(t, r.addr)[id]
	if !ok || got["name"] != "made by rust" || got["prefix"] != secret[:16] || got["revoked"] != false {
		t.Errorf("GET /admin/keys: the Rust key is %v", got)
	}
	if _, isNum := got["created_at"].(float64); !isNum {
		t.Errorf("the Rust key's created_at is %v, want Unix seconds", got["created_at"])
	}
	if st, b := adminCall(t, r.addr, "DELETE", "/admin/keys/"+id, e2eAdmin, ""); st != http.StatusNoContent {
		t.Fatalf("revoke the Rust key: %d %s", st, b)
	}
	check401(t, "the revoked Rust key", r.openai(secret, "gpt-m"), openAIKeyInvalid)
	if got := listKeys(t, r.addr)[id]; got["revoked"] != true {
		t.Errorf("GET /admin/keys after the revoke: %v", got)
	}
	// A Rust server reads the revoke from its own column.
	var revoked bool
	if err := conn.QueryRow(ctx, `SELECT revoked_at IS NOT NULL FROM server_api_keys WHERE id = $1`, id).Scan(&revoked); err != nil || !revoked {
		t.Errorf("revoked_at of the Rust key set: %v, %v", revoked, err)
	}
	if after := pgtest.DescribeRustSchema(t, conn); after != before {
		t.Errorf("the relay changed the Rust server's schema:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// 3. Two relays on one database: keys and revocations made on one hold on the other, a
// revocation and a change within the other's cache TTL.
func TestE2EKeysTwoRelaysOnOneDatabase(t *testing.T) {
	t.Parallel()
	oa := newFakeModel(t, "openai")
	db := pgtest.Shared(t).NewDatabase(t)
	a := startKeyRelay(t, keyConfig(oa, nil, ""), keyEnv(db))
	b := startKeyRelay(t, keyConfig(oa, nil, ""), keyEnv(db, "KEY_CACHE_TTL", "1s"))

	k := createKey(t, a.addr, `{"name":"made on a"}`)
	served(t, "a key made on A, on B at once", b.openai(k.Secret, "gpt-m"))
	if _, ok := listKeys(t, b.addr)[k.ID]; !ok {
		t.Errorf("B does not list the key made on A")
	}
	if st, body := adminCall(t, a.addr, "DELETE", "/admin/keys/"+k.ID, e2eAdmin, ""); st != http.StatusNoContent {
		t.Fatalf("revoke on A: %d %s", st, body)
	}
	check401(t, "the key on A after its revoke there", a.openai(k.Secret, "gpt-m"), openAIKeyInvalid)
	eventually(t, 15*time.Second, "B refusing the key revoked on A (cache TTL 1s)", func() (bool, string) {
		ans := b.openai(k.Secret, "gpt-m")
		return ans.status == http.StatusUnauthorized && jsonEqual(ans.body, openAIKeyInvalid), ans.String()
	})
	if got := listKeys(t, b.addr)[k.ID]; got["revoked"] != true {
		t.Errorf("B lists the key revoked on A as %v", got)
	}

	k2 := createKey(t, a.addr, `{"name":"changed on a"}`)
	served(t, "the second key on B", b.openai(k2.Secret, "gpt-m"))
	if st, body := adminCall(t, a.addr, "PATCH", "/admin/keys/"+k2.ID, e2eAdmin, `{"allowed_models":["llama-*"]}`); st != 200 {
		t.Fatalf("PATCH on A: %d %s", st, body)
	}
	eventually(t, 15*time.Second, "B applying allowed_models changed on A (cache TTL 1s)", func() (bool, string) {
		ans := b.openai(k2.Secret, "gpt-m")
		return ans.status == http.StatusForbidden, ans.String()
	})
	served(t, "an allowed model on B after the change", b.openai(k2.Secret, "llama-3"))
}

var uuidShape = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// 4. The Rust server's contract: admin create/list/revoke, 401 bodies, open routes, the key in
// either header, and a relay worker joining with a key.
func TestE2EKeysRustContract(t *testing.T) {
	t.Parallel()
	oa, behindWorker := newFakeModel(t, "openai"), newFakeModel(t, "openai")
	db := pgtest.Shared(t).NewDatabase(t)
	r := startKeyRelay(t, keyConfig(oa, nil, ""), keyEnv(db)) // no worker secret at all

	// Admin without its token.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/admin/keys", `{"name":"x"}`}, {"GET", "/admin/keys", ""}, {"DELETE", "/admin/keys/" + newUUID4(t), ""},
	} {
		if st, b := adminCall(t, r.addr, c.method, c.path, "", c.body); st != http.StatusForbidden {
			t.Errorf("%s %s without the admin token: %d %s, want 403", c.method, c.path, st, b)
		}
	}

	// Create.
	st, body := adminCall(t, r.addr, "POST", "/admin/keys", e2eAdmin, `{"name":"contract key"}`)
	var made map[string]any
	if st != http.StatusCreated || json.Unmarshal(body, &made) != nil {
		t.Fatalf("POST /admin/keys: %d %s, want 201", st, body)
	}
	id, _ := made["id"].(string)
	secret, _ := made["secret"].(string)
	prefix, _ := made["prefix"].(string)
	created, isNum := made["created_at"].(float64)
	lastUsed, hasLastUsed := made["last_used_at"]
	switch {
	case !uuidShape.MatchString(id):
		t.Errorf("create: id %v is not a UUID", made["id"])
	case made["name"] != "contract key":
		t.Errorf("create: name %v", made["name"])
	case !secretShape.MatchString(secret):
		t.Errorf("create: secret %q, want mr_live_ and 32 alphanumerics", secret)
	case len(prefix) != 16 || !strings.HasPrefix(secret, prefix):
		t.Errorf("create: prefix %q, want the secret's first 16 characters", prefix)
	case !isNum || time.Since(time.Unix(int64(created), 0)).Abs() > 2*time.Minute:
		t.Errorf("create: created_at %v, want Unix seconds of now", made["created_at"])
	case !hasLastUsed || lastUsed != nil:
		t.Errorf("create: last_used_at %v (present %v), want null", lastUsed, hasLastUsed)
	case made["revoked"] != false:
		t.Errorf("create: revoked %v, want false", made["revoked"])
	}
	if t.Failed() {
		t.Fatalf("create answered %s", body)
	}

	// List: no secret, no hash.
	st, body = adminCall(t, r.addr, "GET", "/admin/keys", e2eAdmin, "")
	if st != 200 || strings.Contains(string(body), secret) || strings.Contains(string(body), `"secret"`) ||
		strings.Contains(string(body), `"hash"`) {
		t.Errorf("GET /admin/keys: %d %s; want 200 without secrets or hashes", st, body)
	}
	listed := listKeys(t, r.addr)[id]
	for _, field := range []string{"id", "name", "prefix", "created_at", "revoked"} {
		if fmt.Sprint(listed[field]) != fmt.Sprint(made[field]) {
			t.Errorf("listed %s = %v, created %v", field, listed[field], made[field])
		}
	}

	// Inference without a key, with a wrong one, with the key in either header.
	check401(t, "chat without a key", r.send("/v1/chat/completions", nil, chatJSON("gpt-m")), openAIKeyRequired)
	check401(t, "messages without a key", r.send("/v1/messages", keyHeader("", ""), anthropicJSON("gpt-m")), anthropicKeyRequired)
	check401(t, "chat with a wrong key", r.openai(randomSecret(t), "gpt-m"), openAIKeyInvalid)
	check401(t, "chat with a key of another shape", r.openai("sk-not-a-relay-key", "gpt-m"), openAIKeyInvalid)
	check401(t, "messages with a wrong key", r.anthropic(randomSecret(t), "gpt-m"), anthropicKeyInvalid)
	for _, path := range []string{"/health", "/v1/models"} {
		resp, err := fbClient.Get("http://" + r.addr + path)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("GET %s without a key: %v %v, want 200", path, resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
	before := len(oa.calls())
	served(t, "chat, key as Authorization: Bearer", r.openai(secret, "gpt-m"))
	served(t, "chat, key as x-api-key", r.send("/v1/chat/completions", keyHeader(secret, "x-api-key"), chatJSON("gpt-m")))
	served(t, "messages, key as x-api-key", r.anthropic(secret, "gpt-m"))
	served(t, "messages, key as Authorization: Bearer", r.send("/v1/messages", keyHeader(secret, "bearer"), anthropicJSON("gpt-m")))
	calls := oa.calls()
	if len(calls)-before != 4 {
		t.Errorf("the model server got %d of the 4 keyed calls", len(calls)-before)
	}
	for _, c := range calls[before:] {
		for name, values := range c.Header {
			for _, v := range values {
				if strings.Contains(v, secret) {
					t.Errorf("the client's API key reached the model server as %s", name)
				}
			}
		}
	}
	eventually(t, 15*time.Second, "last_used_at set after use", func() (bool, string) {
		got := listKeys(t, r.addr)[id]
		used, isNum := got["last_used_at"].(float64)
		return isNum && used >= created, fmt.Sprint(got)
	})

	// A relay worker joins with the key as its worker secret and serves; with a wrong key it
	// is refused.
	startWorkerDaemon(t, r.addr, secret, behindWorker.url, "worker-m")
	waitModel(t, r.addr, "worker-m")
	served(t, "a request to the worker that joined with a key", r.openai(secret, "worker-m"))
	if n := len(behindWorker.callsTo("/v1/chat/completions")); n != 1 {
		t.Errorf("the worker's model server got %d chat calls, want 1", n)
	}
	startWorkerDaemon(t, r.addr, randomSecret(t), behindWorker.url, "bad-m")
	eventually(t, 10*time.Second, "the worker with a wrong key refused", func() (bool, string) {
		n := metricSum(t, r.addr, "modelrelay_auth_failures_total", `kind="worker"`)
		return n >= 1 && strings.Contains(r.logs.String(), "worker rejected"), fmt.Sprintf("worker auth failures %v", n)
	})
	_, models := getFrom(t, r.addr, "/v1/models")
	_, health := getFrom(t, r.addr, "/health")
	var h struct {
		Workers int `json:"workers_connected"`
	}
	json.Unmarshal(health, &h)
	if strings.Contains(string(models), "bad-m") || h.Workers != 1 {
		t.Errorf("the worker with a wrong key joined: models %s, health %s", models, health)
	}

	// Revoke: 204, still listed as revoked, then 404; 404 for an unknown id.
	if st, b := adminCall(t, r.addr, "DELETE", "/admin/keys/"+id, e2eAdmin, ""); st != http.StatusNoContent {
		t.Errorf("revoke: %d %s, want 204", st, b)
	}
	if got, ok := listKeys(t, r.addr)[id]; !ok || got["revoked"] != true {
		t.Errorf("GET /admin/keys after the revoke: %v (listed %v), want revoked true", got, ok)
	}
	check401(t, "the revoked key", r.openai(secret, "gpt-m"), openAIKeyInvalid)
	for _, path := range []string{"/admin/keys/" + id, "/admin/keys/" + newUUID4(t), "/admin/keys/not-a-uuid"} {
		if st, b := adminCall(t, r.addr, "DELETE", path, e2eAdmin, ""); st != http.StatusNotFound {
			t.Errorf("DELETE %s: %d %s, want 404", path, st, b)
		}
	}
}

// 5. Limits: requests and tokens per minute (429 with Retry-After in the route's dialect),
// allowed models (403 in the route's dialect, before queueing) and expiry (401).
func TestE2EKeysLimits(t *testing.T) {
	t.Parallel()
	oa := newFakeModel(t, "openai")
	db := pgtest.Shared(t).NewDatabase(t)
	r := startKeyRelay(t, keyConfig(oa, nil, ""), keyEnv(db))

	check429 := func(label string, a relayAnswer, anthropic bool) {
		t.Helper()
		top, typ, _, msg := errorOf(a.body)
		wantTop := ""
		if anthropic {
			wantTop = "error"
		}
		if a.status != http.StatusTooManyRequests || a.retryAfter() < 1 || typ != "rate_limit_error" || top != wantTop || msg == "" {
			t.Errorf("%s: %s; want 429 with Retry-After ≥ 1 and a rate_limit_error (top-level type %q)", label, a, wantTop)
		}
	}

	rpm := createKey(t, r.addr, `{"name":"rpm","rate_limit_rpm":2}`)
	before := len(oa.calls())
	served(t, "rpm 2, first request", r.openai(rpm.Secret, "gpt-m"))
	served(t, "rpm 2, second request", r.openai(rpm.Secret, "gpt-m"))
	check429("rpm 2, third request (openai)", r.openai(rpm.Secret, "gpt-m"), false)
	check429("rpm 2, fourth request (anthropic)", r.anthropic(rpm.Secret, "gpt-m"), true)
	if n := len(oa.calls()) - before; n != 2 {
		t.Errorf("the model server got %d requests of the key limited to 2 a minute", n)
	}

	tpm := createKey(t, r.addr, `{"name":"tpm","token_limit_tpm":10}`)
	before = len(oa.calls())
	served(t, "tpm 10, first request", r.openai(tpm.Secret, "gpt-m"))
	if used := lastReport(t, "tpm 10, first request", oa, before); used.input+used.output <= 10 {
		t.Fatalf("the first request used %d tokens; the test needs more than 10", used.input+used.output)
	}
	check429("tpm 10, after a request that used more (openai)", r.openai(tpm.Secret, "gpt-m"), false)
	check429("tpm 10, after a request that used more (anthropic)", r.anthropic(tpm.Secret, "gpt-m"), true)

	globs := createKey(t, r.addr, `{"name":"llamas only","allowed_models":["llama-*"]}`)
	before = len(oa.calls())
	a := r.openai(globs.Secret, "gpt-m")
	if top, typ, code, _ := errorOf(a.body); a.status != http.StatusForbidden || top != "" || typ != "permission_error" || code != "model_not_allowed" {
		t.Errorf("a model outside allowed_models (openai): %s; want 403 permission_error model_not_allowed", a)
	}
	a = r.anthropic(globs.Secret, "gpt-m")
	if top, typ, _, _ := errorOf(a.body); a.status != http.StatusForbidden || top != "error" || typ != "permission_error" {
		t.Errorf("a model outside allowed_models (anthropic): %s; want 403 {type:error, error.type permission_error}", a)
	}
	if n := len(oa.calls()) - before; n != 0 {
		t.Errorf("the model server got %d requests for a model the key may not use", n)
	}
	served(t, "a model allowed by the glob", r.openai(globs.Secret, "llama-3"))

	soon := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	exp := createKey(t, r.addr, `{"name":"expiring","expires_at":"`+soon+`"}`)
	served(t, "a key expiring in an hour", r.openai(exp.Secret, "gpt-m"))
	if got := listKeys(t, r.addr)[exp.ID]; got["expires_at"] == nil {
		t.Errorf("GET /admin/keys shows no expires_at: %v", got)
	}
	if st, b := adminCall(t, r.addr, "PATCH", "/admin/keys/"+exp.ID, e2eAdmin, `{"expires_at":"2001-02-03T04:05:06Z"}`); st != 200 {
		t.Fatalf("PATCH expires_at: %d %s", st, b)
	}
	check401(t, "a key expired by PATCH (openai)", r.openai(exp.Secret, "gpt-m"), openAIKeyInvalid)
	check401(t, "a key expired by PATCH (anthropic)", r.anthropic(exp.Secret, "gpt-m"), anthropicKeyInvalid)
	past := createKey(t, r.addr, `{"name":"born expired","expires_at":"2020-01-01T00:00:00Z"}`)
	check401(t, "a key created expired", r.openai(past.Secret, "gpt-m"), openAIKeyInvalid)
}

// sseChunks are the JSON data events of an SSE body.
func sseChunks(body []byte) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(data), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// 6. Usage per key and serving model equals what the model server reported, in every answer
// shape, through the admin API and in the database.
func TestE2EKeysUsageEqualsWhatTheModelServerReported(t *testing.T) {
	t.Parallel()
	oa, an := newFakeModel(t, "openai"), newFakeModel(t, "anthropic")
	db := pgtest.Shared(t).NewDatabase(t)
	r := startKeyRelay(t, keyConfig(oa, an, "fallbacks:\n  ghost-m: [gpt-m]\n"), keyEnv(db))

	type usageCase struct {
		label string
		key   createdKey
		want  map[string]tally // model -> totals
	}
	var cases []*usageCase
	asked := map[string]tally{} // by the model the client asked, for the GenAI metrics
	newCase := func(label string) *usageCase {
		c := &usageCase{label: label, key: createKey(t, r.addr, fmt.Sprintf(`{"name":%q}`, label)), want: map[string]tally{}}
		cases = append(cases, c)
		return c
	}
	// run sends one request of c and adds what the fake reported to c's and the metrics' totals.
	run := func(c *usageCase, fake *fakeModel, askedModel, servedModel string, send func(secret string) relayAnswer) relayAnswer {
		t.Helper()
		before := len(fake.calls())
		a := send(c.key.Secret)
		if a.err != nil || a.status != 200 {
			t.Fatalf("%s: %s", c.label, a)
		}
		u := lastReport(t, c.label, fake, before)
		c.want[servedModel] = c.want[servedModel].plus(u)
		asked[askedModel] = asked[askedModel].plus(u)
		return a
	}

	c := newCase("openai json")
	for range 2 {
		run(c, oa, "gpt-m", "gpt-m", func(s string) relayAnswer { return r.openai(s, "gpt-m") })
	}

	c = newCase("openai stream with include_usage")
	a := run(c, oa, "gpt-m", "gpt-m", func(s string) relayAnswer {
		return r.openai(s, "gpt-m", `"stream":true`, `"stream_options":{"include_usage":true}`)
	})
	var sawUsage bool
	for _, ch := range sseChunks(a.body) {
		if u, ok := ch["usage"].(map[string]any); ok && ch["choices"] != nil && len(ch["choices"].([]any)) == 0 {
			sawUsage = u["prompt_tokens"] == float64(c.want["gpt-m"].input) && u["completion_tokens"] == float64(c.want["gpt-m"].output)
		}
	}
	if !sawUsage {
		t.Errorf("%s: the client did not get the usage chunk it asked for: %s", c.label, a.body)
	}

	c = newCase("openai stream without include_usage")
	a = run(c, oa, "gpt-m", "gpt-m", func(s string) relayAnswer { return r.openai(s, "gpt-m", `"stream":true`) })
	if strings.Contains(string(a.body), `"usage"`) || !strings.Contains(string(a.body), "data: [DONE]") {
		t.Errorf("%s: the client got a usage chunk it did not ask for, or no end: %s", c.label, a.body)
	}
	calls := oa.calls()
	if so, _ := calls[len(calls)-1].Body["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("%s: the relay did not ask the model server for usage: %v", c.label, calls[len(calls)-1].Body)
	}

	c = newCase("anthropic stream")
	a = run(c, an, "claude-m", "claude-m", func(s string) relayAnswer { return r.anthropic(s, "claude-m", `"stream":true`) })
	if !strings.Contains(string(a.body), "event: message_delta") {
		t.Errorf("%s: not an Anthropic stream: %.300s", c.label, a.body)
	}

	c = newCase("anthropic client on an openai-only backend")
	a = run(c, oa, "gpt-m", "gpt-m", func(s string) relayAnswer { return r.anthropic(s, "gpt-m", `"stream":true`) })
	if !strings.Contains(string(a.body), "event: message_delta") || a.header.Get("X-Modelrelay-Translated") != "anthropic->openai" {
		t.Errorf("%s: not a translated Anthropic stream: %v %.300s", c.label, a.header, a.body)
	}
	run(c, oa, "gpt-m", "gpt-m", func(s string) relayAnswer { return r.anthropic(s, "gpt-m") })

	c = newCase("fallback")
	a = run(c, oa, "ghost-m", "gpt-m", func(s string) relayAnswer { return r.openai(s, "ghost-m") })
	if a.header.Get("X-Modelrelay-Model") != "gpt-m" {
		t.Errorf("%s: served as %q, want the fallback gpt-m", c.label, a.header.Get("X-Modelrelay-Model"))
	}

	for _, c := range cases {
		checkUsage(t, c.label+", GET /admin/keys/{id}/usage", mustKeyUsage(t, r.addr, c.key.ID), c.want)
		checkUsage(t, c.label+", modelrelay_key_usage", dbUsage(t, db, c.key.ID), c.want)
	}

	// The GenAI metrics count tokens by the model asked.
	for model, u := range asked {
		for typ, n := range map[string]int64{"input": u.input, "output": u.output} {
			got := metricSum(t, r.addr, "gen_ai_client_token_usage_sum", `gen_ai_request_model="`+model+`"`,
				`gen_ai_token_type="`+typ+`"`, `gen_ai_operation_name="chat"`)
			if got != float64(n) {
				t.Errorf("gen_ai_client_token_usage_sum of %s %s tokens = %v, want %d", model, typ, got, n)
			}
		}
		if got := metricSum(t, r.addr, "gen_ai_client_token_usage_count", `gen_ai_request_model="`+model+`"`,
			`gen_ai_token_type="input"`); got != float64(u.requests) {
			t.Errorf("gen_ai_client_token_usage_count of %s = %v, want %d", model, got, u.requests)
		}
	}
}

// 7. The database goes down while the relay runs: cached keys keep working, others fail
// closed with 503, usage waits (bounded) and is written once the database is back.
func TestE2EKeysDatabaseDown(t *testing.T) {
	t.Parallel()
	oa := newFakeModel(t, "openai")
	cluster := pgtest.Start(t)
	dbA, dbB := cluster.NewDatabase(t), cluster.NewDatabase(t)
	cfg := keyConfig(oa, nil, "")
	a := startKeyRelay(t, cfg, keyEnv(dbA, "KEY_CACHE_TTL", "1s"))
	b := startKeyRelay(t, cfg, keyEnv(dbB, "KEY_CACHE_TTL", "1s", "USAGE_MAX_PENDING", "1"))

	used := createKey(t, a.addr, `{"name":"used before"}`)
	unused := createKey(t, a.addr, `{"name":"never used here"}`)
	bounded := createKey(t, b.addr, `{"name":"bounded pending"}`)
	var want tally
	send := func(label string) {
		t.Helper()
		before := len(oa.calls())
		served(t, label, a.openai(used.Secret, "gpt-m"))
		want = want.plus(lastReport(t, label, oa, before))
	}
	send("before the outage")
	served(t, "B before the outage", b.openai(bounded.Secret, "gpt-m"))
	for _, r := range []*keyRelay{a, b} {
		eventually(t, 15*time.Second, "usage written before the outage", func() (bool, string) {
			n := metricSum(t, r.addr, "modelrelay_usage_pending_rows")
			return n == 0, fmt.Sprintf("%v pending rows", n)
		})
	}

	cluster.Stop(t)
	send("during the outage, at once")
	eventually(t, 10*time.Second, "a failed usage write counted", func() (bool, string) {
		n := metricSum(t, a.addr, "modelrelay_usage_write_failures_total")
		return n > 0, fmt.Sprintf("modelrelay_usage_write_failures_total %v", n)
	})
	send("during the outage, past the cache TTL") // the failed write took at least a tick (1 s)

	ans := a.openai(unused.Secret, "gpt-m")
	if _, _, code, msg := errorOf(ans.body); ans.status != http.StatusServiceUnavailable || ans.retryAfter() < 1 ||
		code != "key_store_unavailable" || !strings.Contains(msg, "key store") {
		t.Errorf("a key never used here, database down (openai): %s; want 503 key_store_unavailable naming the key store", ans)
	}
	ans = a.anthropic(unused.Secret, "gpt-m")
	if top, _, _, msg := errorOf(ans.body); ans.status != http.StatusServiceUnavailable || top != "error" || !strings.Contains(msg, "key store") {
		t.Errorf("a key never used here, database down (anthropic): %s; want 503 naming the key store", ans)
	}

	// B holds one distinct row at most: a second (key, model) is dropped and counted. (Which
	// row goes is the ledger's business: a failing flush puts its batch back, and a row that
	// arrived meanwhile may hold the place. What is dropped is counted, what is not is
	// written: together they make every request.)
	served(t, "B during the outage, gpt-m", b.openai(bounded.Secret, "gpt-m"))
	served(t, "B during the outage, llama-3", b.openai(bounded.Secret, "llama-3"))
	served(t, "B during the outage, gpt-m again", b.openai(bounded.Secret, "gpt-m"))
	dropped := metricSum(t, b.addr, "modelrelay_usage_dropped_total")
	if dropped < 1 {
		t.Errorf("modelrelay_usage_dropped_total with USAGE_MAX_PENDING=1 and two rows = %v, want at least 1", dropped)
	}
	if n := metricSum(t, b.addr, "modelrelay_usage_pending_rows"); n > 1 {
		t.Errorf("modelrelay_usage_pending_rows with USAGE_MAX_PENDING=1 = %v", n)
	}

	cluster.Restart(t)
	send("after the outage")
	eventually(t, 20*time.Second, "the key never used working with the database back", func() (bool, string) {
		ans := a.openai(unused.Secret, "gpt-m")
		return ans.status == 200, ans.String()
	})
	eventually(t, 20*time.Second, "every request's usage written after the outage", func() (bool, string) {
		rows, ok, why := keyUsage(t, a.addr, used.ID)
		if !ok {
			return false, why
		}
		diff := usageDiff(rows, map[string]tally{"gpt-m": want})
		return diff == "", diff
	})
	checkUsage(t, "in the database after the outage", dbUsage(t, dbA, used.ID), map[string]tally{"gpt-m": want})
	eventually(t, 20*time.Second, "B's held row written after the outage", func() (bool, string) {
		rows, ok, why := keyUsage(t, b.addr, bounded.ID)
		if !ok {
			return false, why
		}
		written := 0.0
		for _, u := range rows {
			written += float64(u.Requests)
		}
		// 1 before the outage and 3 during it; the usual outcome is gpt-m 3, llama-3 dropped.
		return written+dropped == 4 && written >= 2, fmt.Sprintf("%v written (%s) and %v dropped, want 4 in all", written, why, dropped)
	})
}

// 8. SIGTERM right after requests, before the ledger's tick: their usage is in the database.
func TestE2EKeysUsageWrittenOnSIGTERM(t *testing.T) {
	t.Parallel()
	oa := newFakeModel(t, "openai")
	db := pgtest.Shared(t).NewDatabase(t)
	r := startKeyRelay(t, keyConfig(oa, nil, ""), keyEnv(db))
	k := createKey(t, r.addr, `{"name":"until the end"}`)
	var want tally
	pending := 0.0
	for i := 0; i < 3 || (pending == 0 && i < 8); i++ {
		before := len(oa.calls())
		served(t, "a request before SIGTERM", r.openai(k.Secret, "gpt-m"))
		want = want.plus(lastReport(t, "a request before SIGTERM", oa, before))
		if i >= 2 {
			pending = metricSum(t, r.addr, "modelrelay_usage_pending_rows")
		}
	}
	if pending == 0 {
		t.Logf("no usage pending at SIGTERM (a flush tick came first each time): the drain's flush is not exercised")
	}
	r.sigterm()
	checkUsage(t, "modelrelay_key_usage after SIGTERM", dbUsage(t, db, k.ID), map[string]tally{"gpt-m": want})
	var lastUsed *time.Time
	if err := pgConnect(t, db).QueryRow(context.Background(), `SELECT last_used_at FROM server_api_keys WHERE id = $1`, k.ID).
		Scan(&lastUsed); err != nil || lastUsed == nil {
		t.Errorf("server_api_keys.last_used_at after SIGTERM: %v, %v; want set", lastUsed, err)
	}
}

// 9. AppProxy mode: a circuit's host keeps its own auth (its JWT, no API key); the aggregation
// and relay hosts need a key.
func TestE2EKeysAppProxyCircuitHostsKeepTheirOwnAuth(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "keyed", "circ-m")
	circ := newCircuit("keyed", route{port: rep.port()})
	db := pgtest.Shared(t).NewDatabase(t)
	e := startE2E(t, e2eOptions{circuits: []json.RawMessage{circ.json()}, env: keyEnv(db)})
	tok := tokenFor(t, circ.id)
	host := circuitHost("keyed")
	e.waitServing(host, bearer(tok)) // the circuit's token and no API key

	for _, h := range []string{e2eAggHost, ""} {
		st, _, body := e.chat(h, "circ-m", nil)
		if st != http.StatusUnauthorized || !jsonEqual(body, openAIKeyRequired) {
			t.Errorf("host %q, no credential: %d %s; want 401 %s", h, st, body, openAIKeyRequired)
		}
		// As the Rust server reads it, a bearer token there is the key presented: not one.
		st, _, body = e.chat(h, "circ-m", bearer(tok))
		if st != http.StatusUnauthorized || !jsonEqual(body, openAIKeyInvalid) {
			t.Errorf("host %q, circuit token but no API key: %d %s; want 401 %s", h, st, body, openAIKeyInvalid)
		}
	}
	k := createKey(t, e.addr, `{"name":"aggregation"}`)
	withKey := bearer(tok)
	withKey.Set("X-Api-Key", k.Secret)
	st, h, body := e.chat(e2eAggHost, "circ-m", withKey)
	if st != 200 || h.Get("X-Replica") != "keyed" {
		t.Errorf("aggregation host with the circuit token and an API key: %s", st2s(st, h.Get("X-Replica"), body))
	}
	if seen, ok := rep.lastRequest("POST", "/v1/chat/completions"); !ok || seen.Header.Get("X-Api-Key") != "" ||
		seen.Header.Get("Authorization") != "Bearer "+tok {
		t.Errorf("the replica got x-api-key %q and authorization %q; want no key and the circuit token",
			seen.Header.Get("X-Api-Key"), seen.Header.Get("Authorization"))
	}
	st, _, body = e.chat(host, "circ-m", withJSON(http.Header{"Authorization": {"Bearer " + tok}}))
	if st != 200 {
		t.Errorf("circuit host again, token only: %d %s", st, body)
	}
}
