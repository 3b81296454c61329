package relay_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"modelrelay/relay"
	"modelrelay/relay/cache"
)

// The response cache, black box: a real relay with a memory cache in front of real backends.
// Who may use it, what it stores (complete successes only), what a hit looks like (byte for
// byte the miss's answer, no target, no tokens) and what tells entries apart.

// cachedRelay runs a relay that requires keys, with a memory cache, in front of a usage
// backend serving models.
func cachedRelay(t *testing.T, opts relay.Options, models ...string) (*httptest.Server, *usageBackend) {
	t.Helper()
	if opts.Cache.Store == nil {
		opts.Cache.Store = cache.NewMemory(64 << 20)
	}
	return keyedRelay(t, opts, models...)
}

// cacheHeader is a key's header asking for the cache with how ("" = not asking).
func cacheHeader(secret, how string) http.Header {
	h := keyHeader(secret)
	if how != "" {
		h.Set("X-Modelrelay-Cache", how)
	}
	return h
}

// cachedChat is a chat body for model with extra top-level members.
func cachedChat(model string, stream bool, extra string) string {
	return fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]%s}`,
		model, stream, extra)
}

// cacheResult is what an answer says the cache did.
func cacheResult(r result) string { return r.resp.Header.Get("X-Modelrelay-Cache") }

// TestCacheAnswersAnIdenticalRequestOnce: the second of two identical requests is a hit: the
// target sees one, the client gets the same bytes and headers that describe the answer, with
// Age; the hit counts no tokens and no request in the key's usage.
func TestCacheAnswersAnIdenticalRequestOnce(t *testing.T) {
	ts, b := cachedRelay(t, relay.Options{}, "m")
	k := createKey(t, ts, "")
	h := cacheHeader(k["secret"].(string), "use")
	body := cachedChat("m", false, "")
	miss := callWith(t, ts, "/v1/chat/completions", h, body)
	if miss.resp.StatusCode != 200 || cacheResult(miss) != "miss" || miss.resp.Header.Get("Age") != "" {
		t.Fatalf("first: %d %q %v", miss.resp.StatusCode, cacheResult(miss), miss.resp.Header)
	}
	hit := callWith(t, ts, "/v1/chat/completions", h, body)
	if hit.resp.StatusCode != 200 || cacheResult(hit) != "hit" || hit.resp.Header.Get("Age") == "" {
		t.Fatalf("second: %d %q %v", hit.resp.StatusCode, cacheResult(hit), hit.resp.Header)
	}
	if b.calls() != 1 {
		t.Fatalf("the target saw %d requests, want 1", b.calls())
	}
	if string(hit.body) != string(miss.body) {
		t.Fatalf("hit body %q, miss body %q", hit.body, miss.body)
	}
	for _, name := range []string{"Content-Type", "X-Modelrelay-Model"} {
		if got, want := hit.resp.Header.Get(name), miss.resp.Header.Get(name); got != want || want == "" {
			t.Errorf("%s: hit %q, miss %q", name, got, want)
		}
	}
	if hit.resp.Header.Get("X-Modelrelay-Target") != "" || hit.resp.Header.Get("X-Modelrelay-Queue-Ms") != "" {
		t.Errorf("a hit names a target: %v", hit.resp.Header)
	}
	if row := usageOf(t, ts, k["id"].(string))["m"]; row["requests"] != 1.0 || row["input_tokens"] != float64(backendIn) {
		t.Errorf("usage %v, want the miss alone", row)
	}
	m := scrape(t, ts)
	for result, want := range map[string]float64{"hit": 1, "miss": 1, "skip": 0} {
		if got := m[`modelrelay_cache_requests_total{result="`+result+`"}`]; got != want {
			t.Errorf("cache requests %s = %v, want %v", result, got, want)
		}
	}
}

// TestCacheVariantsMiss: a request that differs in anything that shapes the answer, or comes
// from another tenant, is another entry.
func TestCacheVariantsMiss(t *testing.T) {
	ts, b := cachedRelay(t, relay.Options{}, "m", "m2")
	a := cacheHeader(createKey(t, ts, "")["secret"].(string), "use")
	other := cacheHeader(createKey(t, ts, "")["secret"].(string), "use")
	base := cachedChat("m", false, `,"tools":[{"type":"function","function":{"name":"f"}}],"response_format":{"type":"json_object"}`)
	options := `,"x_pool_options":{"priority":"low"}`
	if r := callWith(t, ts, "/v1/chat/completions", a, base); cacheResult(r) != "miss" {
		t.Fatalf("base: %q", cacheResult(r))
	}
	for _, tc := range []struct {
		name, body string
		h          http.Header
	}{
		{"another model", strings.Replace(base, `"m"`, `"m2"`, 1), a},
		{"other tools", strings.Replace(base, `"name":"f"`, `"name":"g"`, 1), a},
		{"another system prompt", strings.Replace(base, "be brief", "be thorough", 1), a},
		{"another response_format", strings.Replace(base, "json_object", "text", 1), a},
		{"another tenant", base, other},
		{"a stream", strings.Replace(base, `"stream":false`, `"stream":true`, 1), a},
		{"with x_pool_options (its answer has x_pool_meta)", base[:len(base)-1] + options + "}", a},
	} {
		before := b.calls()
		if r := callWith(t, ts, "/v1/chat/completions", tc.h, tc.body); r.resp.StatusCode != 200 || cacheResult(r) != "miss" {
			t.Errorf("%s: %d %q, want a miss", tc.name, r.resp.StatusCode, cacheResult(r))
		}
		if b.calls() != before+1 {
			t.Errorf("%s: the target was not asked", tc.name)
		}
	}
	// x_pool_options itself is not part of the key: other options, the same entry.
	if r := callWith(t, ts, "/v1/chat/completions", a, base[:len(base)-1]+`,"x_pool_options":{"priority":"high"}}`); cacheResult(r) != "hit" {
		t.Errorf("other x_pool_options: %q, want a hit", cacheResult(r))
	}
	if r := callWith(t, ts, "/v1/chat/completions", a, base); cacheResult(r) != "hit" {
		t.Errorf("base again: %q, want a hit", cacheResult(r))
	}
}

// TestCacheNeverStoresAFailure: a 503 and a 429 are answered, and the next identical request
// goes to the target again.
func TestCacheNeverStoresAFailure(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		var calls atomic.Int32
		be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if calls.Add(1) == 1 {
				w.WriteHeader(status)
				io.WriteString(w, `{"error":{"message":"busy"}}`)
				return
			}
			io.WriteString(w, `{"id":"ok"}`)
		})
		_, ts := startServer(t, relay.Options{Timings: quietTimings(), Cache: relay.CacheOptions{Store: cache.NewMemory(1 << 20)},
			Backends: []relay.Backend{{Name: "b", URL: be.URL, Models: []string{"m"}}}})
		h := http.Header{"X-Modelrelay-Cache": {"use"}}
		for i, want := range []struct {
			status int
			result string
		}{{status, "miss"}, {200, "miss"}, {200, "hit"}} {
			r := callWith(t, ts, "/v1/chat/completions", h, chatBody("m", false))
			if r.resp.StatusCode != want.status || cacheResult(r) != want.result {
				t.Fatalf("target answering %d, request %d: %d %q, want %d %q", status, i+1, r.resp.StatusCode,
					cacheResult(r), want.status, want.result)
			}
		}
		if calls.Load() != 2 {
			t.Fatalf("target answering %d: it saw %d requests, want 2", status, calls.Load())
		}
	}
}

// openAIStream streams a chat answer in pieces; complete ends it as a model server does
// (finish_reason, [DONE]), else it stops after the pieces, or is torn when abort.
func openAIStream(complete, abort bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, piece := range []string{"he", "llo"} {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", piece)
			w.(http.Flusher).Flush()
		}
		switch {
		case abort:
			panic(http.ErrAbortHandler)
		case complete:
			io.WriteString(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
			io.WriteString(w, "data: [DONE]\n\n")
		}
	}
}

// TestCacheNeverStoresACutStream: a stream that ended before its terminal event (in the
// client's family or translated for it) or was torn is not replayed.
func TestCacheNeverStoresACutStream(t *testing.T) {
	for _, tc := range []struct {
		name       string
		abort      bool
		path, body string
	}{
		{"ended early", false, "/v1/chat/completions", chatBody("m", true)},
		{"torn", true, "/v1/chat/completions", chatBody("m", true)},
		{"ended early, translated", false, "/v1/messages", anthropicBody("m", true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := newBackend(t, openAIStream(false, tc.abort))
			_, ts := startServer(t, relay.Options{Timings: quietTimings(), Cache: relay.CacheOptions{Store: cache.NewMemory(1 << 20)},
				Backends: []relay.Backend{{Name: "b", URL: be.URL, Models: []string{"m"}, Dialects: []relay.Dialect{relay.OpenAI}}}})
			h := http.Header{"X-Modelrelay-Cache": {"use"}}
			for i := range 2 {
				// A torn stream tears the client's answer too: the body may not read whole.
				r := <-goCall(t.Context(), http.MethodPost, ts.URL+tc.path, tc.body, h)
				if r.resp == nil || r.resp.StatusCode != 200 || cacheResult(r) != "miss" {
					t.Fatalf("request %d: %+v, want a 200 miss", i+1, r)
				}
			}
			if n := countPath(be.requests(), "/v1/chat/completions"); n != 2 {
				t.Fatalf("the target saw %d requests, want 2", n)
			}
		})
	}
}

// TestCacheStreamingHitIsByteIdentical: a stream is replayed byte for byte as the miss's
// client received it: as the target sent it, and translated for the client's family.
func TestCacheStreamingHitIsByteIdentical(t *testing.T) {
	be := newBackend(t, openAIStream(true, false))
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Cache: relay.CacheOptions{Store: cache.NewMemory(1 << 20)},
		Backends: []relay.Backend{{Name: "b", URL: be.URL, Models: []string{"m"}, Dialects: []relay.Dialect{relay.OpenAI}}}})
	h := http.Header{"X-Modelrelay-Cache": {"use"}}
	for _, c := range []struct{ path, body, last string }{
		{"/v1/chat/completions", chatBody("m", true), "data: [DONE]\n\n"},
		{"/v1/messages", anthropicBody("m", true), "event: message_stop"},
	} {
		miss := callWith(t, ts, c.path, h, c.body)
		hit := callWith(t, ts, c.path, h, c.body)
		if cacheResult(miss) != "miss" || cacheResult(hit) != "hit" {
			t.Fatalf("%s: %q then %q", c.path, cacheResult(miss), cacheResult(hit))
		}
		if string(hit.body) != string(miss.body) || !strings.Contains(string(miss.body), c.last) {
			t.Fatalf("%s: hit\n%q\nmiss\n%q", c.path, hit.body, miss.body)
		}
		if ct := hit.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Errorf("%s: hit Content-Type %q", c.path, ct)
		}
		if c.path == "/v1/messages" && hit.resp.Header.Get("X-Modelrelay-Translated") == "" {
			t.Errorf("a translated hit does not say so: %v", hit.resp.Header)
		}
	}
	if n := countPath(be.requests(), "/v1/chat/completions"); n != 2 {
		t.Fatalf("the target saw %d requests, want one per family", n)
	}
}

// TestCacheWhoUsesIt: a key or model configured default uses the cache without asking; a model
// configured off never does; refresh stores without reading; a wrong header is refused.
func TestCacheWhoUsesIt(t *testing.T) {
	ts, b := cachedRelay(t, relay.Options{Cache: relay.CacheOptions{Models: map[string]string{"d": "default", "off": "off"}}},
		"m", "d", "off")
	plain := createKey(t, ts, "")["secret"].(string)
	byDefault := createKey(t, ts, `,"cache":"default"`)["secret"].(string)
	never := createKey(t, ts, `,"cache":"off"`)["secret"].(string)
	for _, tc := range []struct {
		name, secret, how, body string
		want                    []string // what the cache did, request after request ("" = nothing)
		calls                   int      // requests that reached the target
	}{
		{"a key that does not ask", plain, "", cachedChat("m", false, ""), []string{"", ""}, 2},
		{"a key configured default", byDefault, "", cachedChat("m", false, `,"n":1`), []string{"miss", "hit"}, 1},
		{"a model configured default", plain, "", cachedChat("d", false, ""), []string{"miss", "hit"}, 1},
		{"a model configured off", plain, "use", cachedChat("off", false, ""), []string{"skip", "skip"}, 2},
		{"a key configured off", never, "use", cachedChat("m", false, `,"n":2`), []string{"skip", "skip"}, 2},
		{"sampled, by default", byDefault, "", cachedChat("m", false, `,"temperature":0.7`), []string{"skip", "skip"}, 2},
		{"sampled with a seed, by default", byDefault, "", cachedChat("m", false, `,"temperature":0.7,"seed":1`), []string{"miss", "hit"}, 1},
		{"sampled, asked with use", byDefault, "use", cachedChat("m", false, `,"temperature":0.7,"n":3`), []string{"miss", "hit"}, 1},
		{"refresh stores, use reads", plain, "refresh", cachedChat("m", false, `,"n":4`), []string{"miss", "miss"}, 2},
	} {
		before := b.calls()
		for i, want := range tc.want {
			r := callWith(t, ts, "/v1/chat/completions", cacheHeader(tc.secret, tc.how), tc.body)
			if r.resp.StatusCode != 200 || cacheResult(r) != want {
				t.Errorf("%s, request %d: %d %q, want %q", tc.name, i+1, r.resp.StatusCode, cacheResult(r), want)
			}
		}
		if got := b.calls() - before; got != tc.calls {
			t.Errorf("%s: the target saw %d requests, want %d", tc.name, got, tc.calls)
		}
	}
	if r := callWith(t, ts, "/v1/chat/completions", cacheHeader(plain, "use"), cachedChat("m", false, `,"n":4`)); cacheResult(r) != "hit" {
		t.Errorf("use after refresh: %q, want a hit", cacheResult(r))
	}
	h := cacheHeader(byDefault, "")
	h.Set("Cache-Control", "max-age=0, No-Store")
	if r := callWith(t, ts, "/v1/chat/completions", h, cachedChat("m", false, `,"n":1`)); cacheResult(r) != "skip" {
		t.Errorf("Cache-Control: no-store: %q, want skip", cacheResult(r))
	}
	r := callWith(t, ts, "/v1/messages", cacheHeader(plain, "always"), anthropicBody("m", false))
	if r.resp.StatusCode != 400 || !strings.Contains(string(r.body), "x-modelrelay-cache must be use or refresh") ||
		!strings.Contains(string(r.body), `"type":"error"`) {
		t.Errorf("a wrong x-modelrelay-cache: %d %s", r.resp.StatusCode, r.body)
	}
}

// TestAdminKeysCacheField: a key's cache is default, off or null, set by POST and PATCH and
// shown by both and by the list.
func TestAdminKeysCacheField(t *testing.T) {
	ts, _ := cachedRelay(t, relay.Options{}, "m")
	k := createKey(t, ts, `,"cache":"default"`)
	id := k["id"].(string)
	if k["cache"] != "default" {
		t.Fatalf("created %v", k)
	}
	if status, v := callJSON(t, ts, http.MethodPatch, "/admin/keys/"+id, adminToken, `{"cache":"off"}`); status != 200 || v["cache"] != "off" {
		t.Fatalf("patch off: %d %v", status, v)
	}
	status, v := callJSON(t, ts, http.MethodPatch, "/admin/keys/"+id, adminToken, `{"cache":null}`)
	if _, shown := v["cache"]; status != 200 || !shown || v["cache"] != nil {
		t.Fatalf("patch null: %d %v", status, v)
	}
	for _, body := range []string{`{"cache":"always"}`, `{"cache":true}`, `{"cache":"Default"}`} {
		status, v := callJSON(t, ts, http.MethodPatch, "/admin/keys/"+id, adminToken, body)
		if status != 400 || v["error"] != "cache must be default, off or null" {
			t.Errorf("patch %s: %d %v", body, status, v)
		}
	}
}

// TestCacheKeepsTheRateLimit: a hit still counts against the key's requests per minute.
func TestCacheKeepsTheRateLimit(t *testing.T) {
	ts, b := cachedRelay(t, relay.Options{}, "m")
	h := cacheHeader(createKey(t, ts, `,"rate_limit_rpm":2`)["secret"].(string), "use")
	for i, want := range []int{200, 200, 429} {
		if r := callWith(t, ts, "/v1/chat/completions", h, chatBody("m", false)); r.resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i+1, r.resp.StatusCode, want)
		}
	}
	if b.calls() != 1 {
		t.Fatalf("the target saw %d requests, want 1", b.calls())
	}
}

// TestCacheClear: DELETE /admin/cache empties it (the next request misses); without a cache
// it is 404, and it takes the admin token.
func TestCacheClear(t *testing.T) {
	ts, b := cachedRelay(t, relay.Options{}, "m")
	h := cacheHeader(createKey(t, ts, "")["secret"].(string), "use")
	callWith(t, ts, "/v1/chat/completions", h, chatBody("m", false))
	if status, _ := callJSON(t, ts, http.MethodDelete, "/admin/cache", "", ""); status != http.StatusForbidden {
		t.Fatalf("DELETE /admin/cache without the token: %d", status)
	}
	if status, v := callJSON(t, ts, http.MethodDelete, "/admin/cache", adminToken, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE /admin/cache: %d %v", status, v)
	}
	if r := callWith(t, ts, "/v1/chat/completions", h, chatBody("m", false)); cacheResult(r) != "miss" || b.calls() != 2 {
		t.Fatalf("after the clear: %q, %d calls", cacheResult(r), b.calls())
	}
	_, plain := startServer(t, relay.Options{Timings: quietTimings(), AdminToken: adminToken})
	if status, v := callJSON(t, plain, http.MethodDelete, "/admin/cache", adminToken, ""); status != http.StatusNotFound {
		t.Fatalf("DELETE /admin/cache without a cache: %d %v", status, v)
	}
}

// TestCacheWithoutKeysIsThePools: without keys, the tenant is the pool, and an answer larger
// than one entry may hold passes unstored.
func TestCacheWithoutKeysIsThePools(t *testing.T) {
	big := strings.Repeat("x", 2048)
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.RawQuery, "big") {
			io.WriteString(w, `{"content":"`+big+`"}`)
			return
		}
		io.WriteString(w, `{"content":"small"}`)
	})
	// A 16 KiB cache: one entry holds at most 1 KiB.
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Cache: relay.CacheOptions{Store: cache.NewMemory(16 << 10), MaxBytes: 16 << 10},
		Backends: []relay.Backend{{Name: "b", URL: be.URL, Models: []string{"m"}}}})
	h := http.Header{"X-Modelrelay-Cache": {"use"}}
	for _, c := range []struct {
		path string
		want []string
	}{
		{"/v1/chat/completions", []string{"miss", "hit"}},
		{"/v1/chat/completions?big", []string{"miss", "miss"}},
	} {
		for i, want := range c.want {
			r := callWith(t, ts, c.path, h, chatBody("m", false))
			if r.resp.StatusCode != 200 || cacheResult(r) != want {
				t.Errorf("%s, request %d: %d %q, want %q", c.path, i+1, r.resp.StatusCode, cacheResult(r), want)
			}
			if c.path != "/v1/chat/completions" && len(r.body) < len(big) {
				t.Errorf("%s: a body of %d bytes, want it whole", c.path, len(r.body))
			}
		}
	}
}
