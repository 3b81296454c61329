package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"modelrelay/protocol"
	"modelrelay/relay"
)

// Client API keys, on the in-memory store: the Rust server's contract, the
// limits, the key's priority, and usage read from the answers.

// usageBackend is an OpenAI- and Anthropic-speaking backend that reports usage the way real
// servers do, and remembers what it was sent.
type usageBackend struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
	bodies  []map[string]any
}

// The tokens every answer of usageBackend reports.
const (
	backendIn  = 11
	backendOut = 7
)

func newUsageBackend(t *testing.T) *usageBackend {
	b := &usageBackend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		json.Unmarshal(raw, &body)
		b.mu.Lock()
		b.headers = append(b.headers, r.Header.Clone())
		b.bodies = append(b.bodies, body)
		b.mu.Unlock()
		stream, _ := body["stream"].(bool)
		anthropic := r.URL.Path == "/v1/messages"
		switch {
		case anthropic && stream:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":%q,\"usage\":{\"input_tokens\":%d,\"output_tokens\":1}}}\n\n", body["model"], backendIn)
			fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
			fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n")
			fmt.Fprint(w, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
			fmt.Fprintf(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":%d}}\n\n", backendOut)
			fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		case anthropic:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"m1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":%d,"output_tokens":%d}}`, body["model"], backendIn, backendOut)
		case stream:
			w.Header().Set("Content-Type", "text/event-stream")
			for _, piece := range []string{"h", "i"} {
				fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", piece)
			}
			fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
			if so, _ := body["stream_options"].(map[string]any); so["include_usage"] == true {
				fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n", backendIn, backendOut, backendIn+backendOut)
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, body["model"], backendIn, backendOut, backendIn+backendOut)
		}
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *usageBackend) calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.bodies)
}

func (b *usageBackend) last() (http.Header, map[string]any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.headers[len(b.headers)-1], b.bodies[len(b.bodies)-1]
}

// keyedRelay runs a relay requiring keys in front of a usage backend serving models.
func keyedRelay(t *testing.T, opts relay.Options, models ...string) (*httptest.Server, *usageBackend) {
	t.Helper()
	b := newUsageBackend(t)
	opts.RequireAPIKeys = true
	opts.AdminToken = adminToken
	opts.Timings = quietTimings()
	opts.Backends = append(opts.Backends, relay.Backend{Name: "b", URL: b.URL, Models: models, Dialects: []relay.Dialect{relay.OpenAI, relay.Anthropic}})
	_, ts := startServer(t, opts)
	return ts, b
}

// createKey creates a key with the given extra members and returns the admin API's answer.
func createKey(t *testing.T, ts *httptest.Server, members string) map[string]any {
	t.Helper()
	body := `{"name":"team-a"` + members + `}`
	status, v := callJSON(t, ts, http.MethodPost, "/admin/keys", adminToken, body)
	if status != http.StatusCreated {
		t.Fatalf("create key %s: status %d, body %v", body, status, v)
	}
	return v
}

func keyHeader(secret string) http.Header {
	return http.Header{"Authorization": {"Bearer " + secret}, "Content-Type": {"application/json"}}
}

func callWith(t *testing.T, ts *httptest.Server, path string, h http.Header, body string) result {
	t.Helper()
	return wait(t, goCall(context.Background(), http.MethodPost, ts.URL+path, body, h))
}

func anthropicBody(model string, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":16,"stream":%v,"messages":[{"role":"user","content":"hello"}]}`, model, stream)
}

func TestKeysRequiredAnswer401InTheRoutesDialect(t *testing.T) {
	ts, b := keyedRelay(t, relay.Options{}, "m")
	for _, tc := range []struct {
		path   string
		header http.Header
		want   string
	}{
		{"/v1/chat/completions", nil, `{"error":{"message":"API key required","type":"auth_error"}}`},
		{"/v1/chat/completions", keyHeader("mr_live_nope"), `{"error":{"message":"Invalid API key","type":"auth_error"}}`},
		{"/v1/messages", nil, `{"error":{"message":"API key required","type":"authentication_error"},"type":"error"}`},
		{"/v1/messages", http.Header{"X-Api-Key": {"wrong"}}, `{"error":{"message":"Invalid API key","type":"authentication_error"},"type":"error"}`},
	} {
		r := callWith(t, ts, tc.path, tc.header, chatBody("m", false))
		if r.resp.StatusCode != http.StatusUnauthorized || string(r.body) != tc.want {
			t.Errorf("%s with %v: %d %s, want 401 %s", tc.path, tc.header, r.resp.StatusCode, r.body, tc.want)
		}
	}
	if b.calls() != 0 {
		t.Fatalf("the backend was called %d times without a key", b.calls())
	}
	// /health and the model list stay open.
	for _, path := range []string{"/health", "/v1/models"} {
		if status, _ := getJSON(t, ts, path, ""); status != http.StatusOK {
			t.Errorf("GET %s without a key: %d", path, status)
		}
	}
	_, metrics := getText(t, ts, "/metrics")
	// Only the one that looked like a key of ours was a guess ("wrong" is no key at all).
	if !strings.Contains(metrics, `modelrelay_auth_failures_total{kind="api_key"} 1`) {
		t.Errorf("wrong keys not counted: %s", grepLines(metrics, "auth_failures"))
	}
}

func TestKeyInEitherHeaderIsNeverForwarded(t *testing.T) {
	ts, b := keyedRelay(t, relay.Options{}, "m")
	secret := createKey(t, ts, "")["secret"].(string)

	r := callWith(t, ts, "/v1/chat/completions", keyHeader(secret), chatBody("m", false))
	if r.resp.StatusCode != 200 {
		t.Fatalf("bearer key: %d %s", r.resp.StatusCode, r.body)
	}
	if h, _ := b.last(); h.Get("Authorization") != "" {
		t.Errorf("the relay's key reached the backend: %q", h.Get("Authorization"))
	}
	// The key in x-api-key, and another credential (a circuit token, say) in Authorization:
	// the key is the relay's, the other goes on.
	h := http.Header{"X-Api-Key": {secret}, "Authorization": {"Bearer not-a-relay-key"}, "Content-Type": {"application/json"}}
	r = callWith(t, ts, "/v1/messages", h, anthropicBody("m", false))
	if r.resp.StatusCode != 200 {
		t.Fatalf("x-api-key: %d %s", r.resp.StatusCode, r.body)
	}
	got, _ := b.last()
	if got.Get("X-Api-Key") != "" || got.Get("Authorization") != "Bearer not-a-relay-key" {
		t.Errorf("backend saw x-api-key %q, authorization %q", got.Get("X-Api-Key"), got.Get("Authorization"))
	}
}

func TestAdminKeysRustContract(t *testing.T) {
	ts, _ := keyedRelay(t, relay.Options{}, "m")
	if status, _ := callJSON(t, ts, http.MethodPost, "/admin/keys", "", `{"name":"x"}`); status != http.StatusForbidden {
		t.Fatalf("create without the admin token: %d", status)
	}
	k := createKey(t, ts, "")
	secret, _ := k["secret"].(string)
	if len(secret) != 40 || !strings.HasPrefix(secret, "mr_live_") || strings.Trim(secret[8:], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
		t.Fatalf("secret %q: want mr_live_ and 32 alphanumerics", secret)
	}
	if k["prefix"] != secret[:16] || k["name"] != "team-a" || k["revoked"] != false || k["last_used_at"] != nil {
		t.Fatalf("created key %v", k)
	}
	if _, ok := k["created_at"].(float64); !ok {
		t.Fatalf("created_at %v is not a number", k["created_at"])
	}
	id := k["id"].(string)

	callWith(t, ts, "/v1/chat/completions", keyHeader(secret), chatBody("m", false))
	_, list := getJSON(t, ts, "/admin/keys", adminToken)
	keys := list["keys"].([]any)
	if len(keys) != 1 {
		t.Fatalf("list %v", list)
	}
	listed := keys[0].(map[string]any)
	if _, ok := listed["secret"]; ok {
		t.Fatalf("list shows the secret: %v", listed)
	}
	if _, ok := k["warning"]; ok {
		t.Errorf("keys are required, yet the created key carries a warning: %v", k)
	}
	if _, ok := list["warning"]; ok {
		t.Errorf("keys are required, yet the list carries a warning: %v", list)
	}
	for _, field := range []string{"id", "name", "prefix", "created_at", "last_used_at", "revoked", "allowed_models",
		"rate_limit_rpm", "token_limit_tpm", "priority", "max_priority", "expires_at"} {
		if _, ok := listed[field]; !ok {
			t.Errorf("listed key has no %s: %v", field, listed)
		}
	}

	for _, tc := range []struct {
		id   string
		want int
	}{{id, 204}, {id, 404}, {"00000000-0000-4000-8000-000000000000", 404}, {"not-a-uuid", 404}} {
		r := wait(t, goCall(context.Background(), http.MethodDelete, ts.URL+"/admin/keys/"+tc.id, "", keyHeader(adminToken)))
		if r.resp.StatusCode != tc.want || len(r.body) != 0 {
			t.Errorf("DELETE %s: %d %q, want %d and no body", tc.id, r.resp.StatusCode, r.body, tc.want)
		}
	}
	_, list = getJSON(t, ts, "/admin/keys", adminToken)
	if got := list["keys"].([]any)[0].(map[string]any); got["revoked"] != true {
		t.Fatalf("revoked key listed as %v", got)
	}
	r := callWith(t, ts, "/v1/chat/completions", keyHeader(secret), chatBody("m", false))
	if r.resp.StatusCode != 401 {
		t.Fatalf("revoked key: %d %s", r.resp.StatusCode, r.body)
	}
}

func TestAdminKeysLimitsAndTheirValidation(t *testing.T) {
	ts, _ := keyedRelay(t, relay.Options{}, "m")
	k := createKey(t, ts, `,"allowed_models":["llama-*"],"rate_limit_rpm":60,"token_limit_tpm":1000,"priority":"low",`+
		`"max_priority":"normal","expires_at":"2099-01-02T03:04:05Z"`)
	if fmt.Sprint(k["allowed_models"]) != "[llama-*]" || k["rate_limit_rpm"] != 60.0 || k["token_limit_tpm"] != 1000.0 ||
		k["priority"] != "low" || k["max_priority"] != "normal" || k["expires_at"] != "2099-01-02T03:04:05Z" {
		t.Fatalf("created %v", k)
	}
	id := k["id"].(string)
	status, v := callJSON(t, ts, http.MethodPatch, "/admin/keys/"+id, adminToken, `{"rate_limit_rpm":null,"priority":"high"}`)
	if status != 200 || v["rate_limit_rpm"] != nil || v["priority"] != "high" || v["token_limit_tpm"] != 1000.0 || v["max_priority"] != "normal" {
		t.Fatalf("patch: %d %v", status, v)
	}
	status, v = callJSON(t, ts, http.MethodPatch, "/admin/keys/"+id, adminToken, `{"max_priority":null}`)
	if status != 200 || v["max_priority"] != nil || v["priority"] != "high" {
		t.Fatalf("patch max_priority null: %d %v", status, v)
	}
	for _, body := range []string{`{"name":1}`, `{}`, `not json`, `{"name":"x","priority":"urgent"}`, `{"name":"x","rate_limit_rpm":-1}`,
		`{"name":"x","max_priority":"urgent"}`, `{"name":"x","max_priority":2}`,
		`{"name":"x","expires_at":"tomorrow"}`, `{"name":"x","allowed_models":"llama"}`, `{"name":"x","allowed_models":[""]}`} {
		status, v := callJSON(t, ts, http.MethodPost, "/admin/keys", adminToken, body)
		if msg, _ := v["error"].(string); status != 400 || msg == "" {
			t.Errorf("create %s: %d %v, want 400 with an error", body, status, v)
		}
	}
	if status, _ := callJSON(t, ts, http.MethodPatch, "/admin/keys/"+id, adminToken, `{"priority":7}`); status != 400 {
		t.Errorf("bad patch: %d", status)
	}
	status, v = callJSON(t, ts, http.MethodPatch, "/admin/keys/"+id, adminToken, `{"max_priority":"highest"}`)
	if status != 400 || v["error"] != "max_priority must be high, normal, low or null" {
		t.Errorf("bad max_priority patch: %d %v", status, v)
	}
	if status, _ := callJSON(t, ts, http.MethodPatch, "/admin/keys/00000000-0000-4000-8000-000000000000", adminToken, `{}`); status != 404 {
		t.Errorf("patch of an unknown key: %d", status)
	}
	if status, _ := getJSON(t, ts, "/admin/keys/00000000-0000-4000-8000-000000000000/usage", adminToken); status != 404 {
		t.Errorf("usage of an unknown key: %d", status)
	}
}

// While keys are not required, the admin API says so with every key it makes and lists: a
// key guards nothing there, it only applies to the clients that send it.
func TestKeysNotRequiredAdminWarns(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), AdminToken: adminToken})
	k := createKey(t, ts, "")
	const want = "require_api_keys is off: a key is checked when a client sends it, but requests without a key are still served"
	if k["warning"] != want || k["secret"] == nil {
		t.Errorf("created key %v; want its secret and the warning %q", k, want)
	}
	if _, list := getJSON(t, ts, "/admin/keys", adminToken); list["warning"] != want || len(list["keys"].([]any)) != 1 {
		t.Errorf("list %v; want the key and the warning", list)
	}
}

func TestKeyLimitsRefuseInTheRoutesDialect(t *testing.T) {
	ts, b := keyedRelay(t, relay.Options{}, "llama-3", "qwen")
	rpm := createKey(t, ts, `,"rate_limit_rpm":2`)["secret"].(string)
	for _, rt := range routes {
		body := chatBody("llama-3", false)
		if rt.anthropic {
			body = anthropicBody("llama-3", false)
		}
		fresh := createKey(t, ts, `,"rate_limit_rpm":1`)["secret"].(string)
		if r := callWith(t, ts, rt.path, keyHeader(fresh), body); r.resp.StatusCode != 200 {
			t.Fatalf("%s: first request %d %s", rt.name, r.resp.StatusCode, r.body)
		}
		r := callWith(t, ts, rt.path, keyHeader(fresh), body)
		checkLimited(t, rt, r, "API key over its rate_limit_rpm")
		if n, _ := strconv.Atoi(r.resp.Header.Get("Retry-After")); n < 30 {
			t.Errorf("%s: Retry-After %q after 1 of 1 rpm, want about a minute", rt.name, r.resp.Header.Get("Retry-After"))
		}
	}
	for i, want := range []int{200, 200, 429} {
		if r := callWith(t, ts, "/v1/chat/completions", keyHeader(rpm), chatBody("qwen", false)); r.resp.StatusCode != want {
			t.Fatalf("rpm request %d: %d %s", i, r.resp.StatusCode, r.body)
		}
	}

	// tpm: one answer uses 18 tokens of a 10-token minute; the next waits.
	tpm := createKey(t, ts, `,"token_limit_tpm":10`)["secret"].(string)
	if r := callWith(t, ts, "/v1/chat/completions", keyHeader(tpm), chatBody("qwen", false)); r.resp.StatusCode != 200 {
		t.Fatalf("tpm first: %d", r.resp.StatusCode)
	}
	r := callWith(t, ts, "/v1/chat/completions", keyHeader(tpm), chatBody("qwen", false))
	checkLimited(t, routes[0], r, "API key over its token_limit_tpm")

	// A model outside allowed_models: 403 before queueing (the backend never sees it).
	only := createKey(t, ts, `,"allowed_models":["llama-*"]`)["secret"].(string)
	before := b.calls()
	for _, rt := range routes {
		body := chatBody("qwen", false)
		if rt.anthropic {
			body = anthropicBody("qwen", false)
		}
		r := callWith(t, ts, rt.path, keyHeader(only), body)
		var v map[string]any
		json.Unmarshal(r.body, &v)
		e, _ := v["error"].(map[string]any)
		if r.resp.StatusCode != 403 || e["type"] != "permission_error" || e["message"] != "model qwen is not allowed for this API key" {
			t.Errorf("%s: disallowed model: %d %s", rt.name, r.resp.StatusCode, r.body)
		}
	}
	if b.calls() != before {
		t.Fatal("a disallowed model reached the backend")
	}
	if r := callWith(t, ts, "/v1/chat/completions", keyHeader(only), chatBody("llama-3", false)); r.resp.StatusCode != 200 {
		t.Fatalf("allowed model: %d", r.resp.StatusCode)
	}

	// An expired key is an invalid one.
	k := createKey(t, ts, `,"expires_at":"`+time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)+`"`)
	secret := k["secret"].(string)
	time.Sleep(1100 * time.Millisecond)
	r = callWith(t, ts, "/v1/chat/completions", keyHeader(secret), chatBody("qwen", false))
	if r.resp.StatusCode != 401 || !strings.Contains(string(r.body), "Invalid API key") {
		t.Fatalf("expired key: %d %s", r.resp.StatusCode, r.body)
	}
}

func TestFallbacksStayWithinTheKeysModels(t *testing.T) {
	ts, b := keyedRelay(t, relay.Options{Fallbacks: map[string][]string{"gone": {"secret-model", "m"}}}, "m", "secret-model")
	secret := createKey(t, ts, `,"allowed_models":["gone","m"]`)["secret"].(string)
	r := callWith(t, ts, "/v1/chat/completions", keyHeader(secret), chatBody("gone", false))
	if r.resp.StatusCode != 200 || r.resp.Header.Get("X-Modelrelay-Model") != "m" {
		t.Fatalf("fallback: %d served by %q", r.resp.StatusCode, r.resp.Header.Get("X-Modelrelay-Model"))
	}
	if _, body := b.last(); body["model"] != "m" {
		t.Fatalf("the chain went to %v, a model the key may not use", body["model"])
	}
}

// usageOf reads a key's usage rows from the admin API, keyed by model.
func usageOf(t *testing.T, ts *httptest.Server, id string) map[string]map[string]any {
	t.Helper()
	status, v := getJSON(t, ts, "/admin/keys/"+id+"/usage", adminToken)
	if status != 200 || v["key_id"] != id {
		t.Fatalf("usage: %d %v", status, v)
	}
	out := map[string]map[string]any{}
	for _, row := range v["usage"].([]any) {
		r := row.(map[string]any)
		if r["day"] != time.Now().UTC().Format(time.DateOnly) {
			t.Errorf("usage day %v", r["day"])
		}
		out[r["model"].(string)] = r
	}
	return out
}

func TestUsageIsReadFromEveryKindOfAnswer(t *testing.T) {
	ts, b := keyedRelay(t, relay.Options{}, "json", "asked", "unasked", "anthropic", "anthropic-json")
	k := createKey(t, ts, "")
	secret, id := k["secret"].(string), k["id"].(string)
	send := func(path, body string) string {
		r := callWith(t, ts, path, keyHeader(secret), body)
		if r.resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, r.resp.StatusCode, r.body)
		}
		return string(r.body)
	}
	send("/v1/chat/completions", chatBody("json", false))
	asked := send("/v1/chat/completions", `{"model":"asked","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`)
	if !strings.Contains(asked, `"usage":{"prompt_tokens":11`) {
		t.Errorf("a client that asked for usage did not get it:\n%s", asked)
	}
	unasked := send("/v1/chat/completions", chatBody("unasked", true))
	if strings.Contains(unasked, "usage") || !strings.HasSuffix(unasked, "data: [DONE]\n\n") {
		t.Errorf("a client that did not ask for usage saw it, or the stream lost its end:\n%s", unasked)
	}
	if _, body := b.last(); body["stream_options"] == nil {
		t.Error("the relay did not ask the backend for the usage chunk")
	}
	send("/v1/messages", anthropicBody("anthropic", true))
	send("/v1/messages", anthropicBody("anthropic-json", false))

	got := usageOf(t, ts, id)
	for _, model := range []string{"json", "asked", "unasked", "anthropic", "anthropic-json"} {
		row := got[model]
		if row == nil || row["requests"] != 1.0 || row["input_tokens"] != float64(backendIn) || row["output_tokens"] != float64(backendOut) {
			t.Errorf("usage of %s = %v, want 1 request, %d in, %d out", model, row, backendIn, backendOut)
		}
	}
	_, metrics := getText(t, ts, "/metrics")
	for _, want := range []string{
		`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_request_model="anthropic",gen_ai_token_type="input"} 11`,
		`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_request_model="json",gen_ai_token_type="output"} 7`,
		`gen_ai_server_time_to_first_token_seconds_count{gen_ai_operation_name="chat",gen_ai_request_model="unasked"} 1`,
		`gen_ai_server_time_per_output_token_seconds_count{gen_ai_operation_name="chat",gen_ai_request_model="anthropic"} 1`,
		`gen_ai_server_request_duration_seconds_count{gen_ai_operation_name="chat",gen_ai_request_model="json"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s\n%s", want, grepLines(metrics, "gen_ai"))
		}
	}
}

// A query string (Azure-style clients send ?api-version=) does not make a call free: the call
// is the path's, and its usage is charged to the key all the same.
func TestUsageIsChargedWhateverTheQueryString(t *testing.T) {
	ts, _ := keyedRelay(t, relay.Options{}, "json", "anthropic")
	k := createKey(t, ts, "")
	secret, id := k["secret"].(string), k["id"].(string)
	for path, body := range map[string]string{
		"/v1/chat/completions?api-version=2024-06-01": chatBody("json", false),
		"/v1/messages?beta=true":                      anthropicBody("anthropic", true),
	} {
		if r := callWith(t, ts, path, keyHeader(secret), body); r.resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, r.resp.StatusCode, r.body)
		}
	}
	got := usageOf(t, ts, id)
	for _, model := range []string{"json", "anthropic"} {
		if row := got[model]; row == nil || row["requests"] != 1.0 || row["input_tokens"] != float64(backendIn) {
			t.Errorf("usage of %s = %v, want 1 request, %d in", model, row, backendIn)
		}
	}
}

func TestGenAIModelLabelsAreBounded(t *testing.T) {
	b := newUsageBackend(t)
	_, ts := startServer(t, relay.Options{Timings: quietTimings(),
		Backends: []relay.Backend{{Name: "any", URL: b.URL, Models: []string{"*"}}}})
	for i := range 5 {
		r := callWith(t, ts, "/v1/chat/completions", http.Header{"Content-Type": {"application/json"}}, chatBody(fmt.Sprintf("made-up-%d", i), false))
		if r.resp.StatusCode != 200 {
			t.Fatalf("%d %s", r.resp.StatusCode, r.body)
		}
	}
	_, metrics := getText(t, ts, "/metrics")
	if strings.Contains(metrics, "made-up") {
		t.Fatalf("client-chosen model names became labels:\n%s", grepLines(metrics, "made-up"))
	}
	if !strings.Contains(metrics, `gen_ai_server_request_duration_seconds_count{gen_ai_operation_name="chat",gen_ai_request_model="other"} 5`) {
		t.Fatalf("unknown models not counted as other:\n%s", grepLines(metrics, "gen_ai_server_request_duration_seconds_count"))
	}
}

func TestKeyPriorityIsTheDefaultClass(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), RequireAPIKeys: true, AdminToken: adminToken})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	plain := createKey(t, ts, "")["secret"].(string)
	urgent := createKey(t, ts, `,"priority":"high"`)["secret"].(string)

	first := goCall(context.Background(), http.MethodPost, ts.URL+"/v1/chat/completions", markedBody("m", false, "holder"), keyHeader(plain))
	held := w.request()
	normal := goCall(context.Background(), http.MethodPost, ts.URL+"/v1/chat/completions", markedBody("m", false, "normal"), keyHeader(plain))
	waitQueueDepth(t, ts, 1)
	high := goCall(context.Background(), http.MethodPost, ts.URL+"/v1/chat/completions", markedBody("m", false, "high"), keyHeader(urgent))
	waitQueueDepth(t, ts, 2)
	w.complete(held.RequestID, 200, nil, `{}`)
	wait(t, first)
	next := w.request()
	if !strings.Contains(string(next.Body), "high") {
		t.Fatalf("after the holder, the worker got %s; want the high-priority key's request", next.Body)
	}
	w.complete(next.RequestID, 200, nil, `{}`)
	wait(t, high)
	last := w.request()
	w.complete(last.RequestID, 200, nil, `{}`)
	wait(t, normal)
}

func TestWorkersMayJoinWithAKey(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), AdminToken: adminToken, WorkerSecret: "other"})
	secret := createKey(t, ts, "")["secret"].(string)
	conn := dialRaw(t, ts, "?provider=local", http.Header{"X-Worker-Secret": {secret}})
	if err := conn.WriteMessage(1, []byte(reg("keyed", []string{"m"}, 1))); err != nil {
		t.Fatal(err)
	}
	_, data, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("a worker with a valid key was refused: %v", err)
	}
	if msg, err := protocol.DecodeServerMessage(data); err != nil {
		t.Fatalf("first frame %s: %v", data, err)
	} else if _, ok := msg.(protocol.RegisterAck); !ok {
		t.Fatalf("first frame %s, want register_ack", data)
	}
	conn.Close()

	bad := dialRaw(t, ts, "?provider=local", http.Header{"X-Worker-Secret": {"mr_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}})
	if code, _ := expectClose(t, bad); code == 0 {
		t.Fatal("a worker with an unknown key was not refused")
	}
}

// checkLimited asserts a key's 429: the route's error shape, rate_limit_error, the message,
// code rate_limit_exceeded on OpenAI routes, and a Retry-After of whole seconds.
func checkLimited(t *testing.T, rt route, r result, message string) {
	t.Helper()
	if r.resp.StatusCode != 429 {
		t.Fatalf("%s: %d %s, want 429", rt.name, r.resp.StatusCode, r.body)
	}
	if n, err := strconv.Atoi(r.resp.Header.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("%s: Retry-After %q", rt.name, r.resp.Header.Get("Retry-After"))
	}
	var v map[string]any
	json.Unmarshal(r.body, &v)
	e, _ := v["error"].(map[string]any)
	if e["type"] != "rate_limit_error" || e["message"] != message {
		t.Errorf("%s: body %s", rt.name, r.body)
	}
	if rt.anthropic && v["type"] != "error" || !rt.anthropic && e["code"] != "rate_limit_exceeded" {
		t.Errorf("%s: body %s", rt.name, r.body)
	}
}

// getText fetches path and returns its body as text.
func getText(t *testing.T, ts *httptest.Server, path string) (int, string) {
	t.Helper()
	r := wait(t, goCall(context.Background(), http.MethodGet, ts.URL+path, "", nil))
	return r.resp.StatusCode, string(r.body)
}

// grepLines keeps the lines of text that contain s (for failure messages).
func grepLines(text, s string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
