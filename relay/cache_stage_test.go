package relay

import (
	"net/http"
	"testing"

	"modelrelay/relay/keys"
)

func TestCacheDecide(t *testing.T) {
	c := newResponseCache(CacheOptions{Models: map[string]string{"d": keys.CacheDefault, "off": keys.CacheOff}})
	byDefault, never, plain := &keys.Key{ID: "1"}, &keys.Key{ID: "2"}, &keys.Key{ID: "3"}
	byDefault.Cache, never.Cache = keys.CacheDefault, keys.CacheOff
	for _, tc := range []struct {
		name    string
		header  string
		noStore bool
		key     *keys.Key
		model   string
		sampled bool
		use     cacheUse
		result  string
		err     bool
	}{
		{name: "nobody asks", key: plain, model: "m"},
		{name: "nobody asks, no key", model: "m"},
		{name: "use", header: "use", model: "m", use: cacheRead},
		{name: "use, in any case and blanks", header: " Use ", model: "m", use: cacheRead},
		{name: "refresh", header: "refresh", model: "m", use: cacheWrite, result: cacheMiss},
		{name: "a wrong header", header: "always", model: "m", err: true},
		{name: "a wrong header, even when nothing else asks", header: "no", key: never, model: "off", err: true},
		{name: "the key's default", key: byDefault, model: "m", use: cacheRead},
		{name: "the model's default", model: "d", use: cacheRead},
		{name: "the key off", header: "use", key: never, model: "m", result: cacheSkip},
		{name: "the model off", header: "use", key: byDefault, model: "off", result: cacheSkip},
		{name: "the key off, the model's default", key: never, model: "d", result: cacheSkip},
		{name: "a key off that does not ask", key: never, model: "m"},
		{name: "no-store", header: "use", noStore: true, model: "m", result: cacheSkip},
		{name: "sampled, by default", key: byDefault, model: "m", sampled: true, result: cacheSkip},
		{name: "sampled, refresh", header: "refresh", model: "m", sampled: true, result: cacheSkip},
		{name: "sampled, use", header: "use", model: "m", sampled: true, use: cacheRead},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set(cacheHeader, tc.header)
		}
		if tc.noStore {
			h.Add("Cache-Control", "private")
			h.Add("Cache-Control", "max-age=0, NO-STORE")
		}
		use, result, err := c.decide(h, tc.key, tc.model, tc.sampled)
		if use != tc.use || result != tc.result || (err != nil) != tc.err {
			t.Errorf("%s: %v %q %v, want %v %q (error %v)", tc.name, use, result, err, tc.use, tc.result, tc.err)
		}
	}
}

func TestSampled(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"model":"m"}`, false},
		{`{"model":"m","temperature":0}`, false},
		{`{"model":"m","temperature":0.0}`, false},
		{`{"model":"m","temperature":null}`, false},
		{`{"model":"m","temperature":0.7}`, true},
		{`{"model":"m","Temperature":1}`, true},
		{`{"model":"m","temperature":1e-3,"seed":null}`, true},
		{`{"model":"m","temperature":0.7,"seed":42}`, false},
		{`{"seed":0,"model":"m","temperature":2}`, false},
		{`{"model":"m","temperature":"0.7"}`, false}, // not a number: the target refuses it
		{`{"model":"m","messages":[{"temperature":1}]}`, false},
	} {
		v, err := parseInference([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if got := v.sampled([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: sampled %v, want %v", tc.body, got, tc.want)
		}
	}
}
