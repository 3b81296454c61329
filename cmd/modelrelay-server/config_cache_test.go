package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"modelrelay/relay/keys"
)

// The response cache's settings: the cache: section (each key also a flag and a
// MODELRELAY_CACHE_* variable) and the models: section.

func TestCacheConfig(t *testing.T) {
	cfg, warns := mustLoad(t, loadCase{
		env:  map[string]string{"WORKER_SECRET": "s", "MODELRELAY_CACHE_TTL": "90"},
		args: []string{"--cache-store=Redis"},
		file: `
redis_url: redis://127.0.0.1:6379/0
cache:
  enabled: true
  ttl: 5m
  max_bytes: 2097152
models:
  gpt-4o: {cache: default}
  Qwen/Qwen2.5-7B: {cache: default}
  "llama 3": {cache: false}
  other: {cache: "OFF"}
  plain: {}
`})
	want := CacheConfig{Enabled: true, TTL: 90 * time.Second, MaxBytes: 2 << 20, Store: "redis"}
	if cfg.Cache != want {
		t.Errorf("cache %+v, want %+v", cfg.Cache, want)
	}
	wantModels := map[string]ModelConfig{"gpt-4o": {Cache: keys.CacheDefault}, "Qwen/Qwen2.5-7B": {Cache: keys.CacheDefault},
		"llama 3": {Cache: keys.CacheOff},
		"other":   {Cache: keys.CacheOff}, "plain": {}}
	if !maps.Equal(cfg.Models, wantModels) {
		t.Errorf("models %v, want %v", cfg.Models, wantModels)
	}
	if len(warns) != 0 {
		t.Errorf("warnings %q", warns)
	}
	if got := cacheModels(cfg.Models); !maps.Equal(got, map[string]string{"gpt-4o": "default", "Qwen/Qwen2.5-7B": "default",
		"llama 3": "off", "other": "off"}) {
		t.Errorf("relay's models %v", got)
	}
	opts := relayOptions(cfg, nil, nil)
	if opts.Cache.TTL != 90*time.Second || opts.Cache.MaxBytes != 2<<20 || opts.Cache.Store != nil {
		t.Errorf("relay options %+v (the store is made by serve)", opts.Cache)
	}
}

func TestCacheConfigProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		lc   loadCase
		want string
	}{
		{"ttl zero", loadCase{args: []string{"--cache-ttl=0"}}, "config: cache.ttl: must be positive"},
		{"too small", loadCase{env: map[string]string{"MODELRELAY_CACHE_MAX_BYTES": "1000"}},
			"config: cache.max_bytes: must be at least 1048576 (1 MiB), got 1000"},
		{"unknown store", loadCase{file: "cache:\n  store: disk\n"}, `config: cache.store: unknown store "disk" (want memory or redis)`},
		{"redis without redis_url", loadCase{args: []string{"--cache-enabled", "--cache-store=redis"}}, "config: cache.store: redis needs redis_url"},
		{"not a mapping", loadCase{file: "cache: true\n"}, "config: cache: must be a mapping"},
		{"models not a mapping", loadCase{file: "models: [a]\n"}, "config: models: must be a mapping (model: {cache: default, reasoning: true})"},
		{"a model not a mapping", loadCase{file: "models:\n  m: default\n"}, "config: models.m: must be a mapping (cache: default)"},
		{"a model's cache true", loadCase{file: "models:\n  m: {cache: true}\n"}, "config: models.m.cache: must be default or false"},
		{"a model's cache unknown", loadCase{file: "models:\n  \"a b\": {cache: always}\n"},
			`config: models."a b".cache: must be default or false, got "always"`},
		// Problems keep the order of the settings table: cache.ttl before cache.store, the
		// models after every setting.
		{"in order", loadCase{file: "models:\n  m: {cache: 1}\ncache:\n  store: x\n  ttl: 0\n"},
			"config: cache.ttl: must be positive\nconfig: cache.store: unknown store \"x\" (want memory or redis)\n" +
				"config: models.m.cache: must be default or false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.lc.env = withSecret(tc.lc.env)
			_, _, err := tc.lc.load(t)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestCacheConfigWarnings(t *testing.T) {
	_, warns := mustLoad(t, loadCase{env: withSecret(nil), file: `
cache:
  enabled: false
  tll: 5m
models:
  m: {cache: default, ttl: 1m}
`})
	want := []string{
		`unknown key "cache.tll" ignored (did you mean "ttl"?)`,
		`unknown key "models.m.ttl" ignored`,
		"models.m.cache set but cache.enabled is false; no answer is cached",
	}
	if len(warns) != len(want) {
		t.Fatalf("warnings %q, want %d", warns, len(want))
	}
	for _, w := range want {
		if !slices.ContainsFunc(warns, func(got string) bool { return strings.Contains(got, w) }) {
			t.Errorf("no warning containing %q in %q", w, warns)
		}
	}
}

// withSecret adds a worker secret to env, so that no warning about joining workers comes.
func withSecret(env map[string]string) map[string]string {
	out := map[string]string{"WORKER_SECRET": "s"}
	maps.Copy(out, env)
	return out
}
