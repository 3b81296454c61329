package cache

import (
	"strings"
	"testing"
)

const chat = `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],` +
	`"tools":[{"type":"function","function":{"name":"f"}}],"response_format":{"type":"json_object"},"temperature":0}`

func base() Request {
	return Request{Tenant: "key:1", Route: "/v1/chat/completions", Model: "m", Body: []byte(chat)}
}

// TestKeyVariants: whatever shapes the answer, or whose answer it is, changes the key;
// x_pool_options (Omit) does not.
func TestKeyVariants(t *testing.T) {
	want := base()
	withOptions := `{"model":"m","x_pool_options":{"priority":"high"},` + chat[len(`{"model":"m",`):]
	from := strings.Index(withOptions, `"x_pool_options"`)
	to := strings.Index(withOptions, `"messages"`)
	for _, tc := range []struct {
		name string
		edit func(r *Request)
		same bool
	}{
		{"the same request", func(r *Request) {}, true},
		{"x_pool_options left out", func(r *Request) { r.Body, r.Omit = []byte(withOptions), [2]int{from, to} }, true},
		{"an Omit out of range is ignored", func(r *Request) { r.Omit = [2]int{5, len(r.Body) + 1} }, true},
		{"another tenant", func(r *Request) { r.Tenant = "key:2" }, false},
		{"another route", func(r *Request) { r.Route = "/v1/messages" }, false},
		{"another model asked", func(r *Request) { r.Model = "m2" }, false},
		{"a stream", func(r *Request) { r.Stream = true }, false},
		{"with x_pool_meta", func(r *Request) { r.Meta = true }, false},
		{"another system prompt", func(r *Request) { r.Body = []byte(strings.Replace(chat, "be brief", "be long", 1)) }, false},
		{"other tools", func(r *Request) { r.Body = []byte(strings.Replace(chat, `"name":"f"`, `"name":"g"`, 1)) }, false},
		{"another response_format", func(r *Request) { r.Body = []byte(strings.Replace(chat, "json_object", "text", 1)) }, false},
		{"another temperature", func(r *Request) { r.Body = []byte(strings.Replace(chat, `"temperature":0`, `"temperature":0.5`, 1)) }, false},
		{"a field moved between route and model", func(r *Request) { r.Route, r.Model = r.Route+"m", "" }, false},
		{"the tenant's name in the route", func(r *Request) { r.Tenant, r.Route = "key:", "1"+r.Route }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base()
			tc.edit(&r)
			if same := r.Key() == want.Key(); same != tc.same {
				t.Fatalf("same key: %v, want %v", same, tc.same)
			}
		})
	}
}

func TestKeyNamesItsTenant(t *testing.T) {
	r := base()
	name := r.Key().String()
	if !strings.HasPrefix(name, "key:1:") || len(name) != len("key:1:")+64 {
		t.Fatalf("name %q, want the tenant then 64 hex digits", name)
	}
}
