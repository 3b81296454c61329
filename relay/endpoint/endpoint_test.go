package endpoint

import (
	"strings"
	"testing"
)

// TestTable pins what every stage reads of each inference call.
func TestTable(t *testing.T) {
	want := []Endpoint{
		{"/v1/chat/completions", OpenAI, RouteChat, "/v1/messages", "chat", true, true, true},
		{"/v1/completions", OpenAI, RouteNone, "", "text_completion", true, true, true},
		{"/v1/embeddings", OpenAI, RouteNone, "", "embeddings", false, true, false},
		{"/v1/messages", Anthropic, RouteMessages, "/v1/chat/completions", "chat", true, true, false},
		{"/v1/messages/count_tokens", Anthropic, RouteCountTokens, "/tokenize", "", false, false, false},
		{"/v1/responses", Responses, RouteResponses, "/v1/chat/completions", "chat", true, true, false},
	}
	all := All()
	if len(all) != len(want) {
		t.Fatalf("%d endpoints, want %d", len(all), len(want))
	}
	for i, w := range want {
		if all[i] != w {
			t.Errorf("row %d: %+v, want %+v", i, all[i], w)
		}
		if got, ok := For(w.Path); !ok || got != w {
			t.Errorf("For(%q) = %+v, %v; want %+v", w.Path, got, ok, w)
		}
	}
	all[0].Path = "/changed"
	if got, _ := For("/v1/chat/completions"); got.Path != "/v1/chat/completions" {
		t.Error("All's slice writes through to the table")
	}
}

func TestDialectOfOtherPaths(t *testing.T) {
	for p, want := range map[string]Dialect{"/v1/messages/batches": Anthropic, "/v1/messages?beta=true": Anthropic,
		"/tokenize": OpenAI, "/v1/models": OpenAI, "/v1/responses/resp_1": Responses, "/": OpenAI, "": OpenAI, "/v1/message": OpenAI} {
		if got := DialectOf(p); got != want {
			t.Errorf("DialectOf(%q) = %d, want %d", p, got, want)
		}
	}
}

// Only exact paths are inference calls: a query string, a trailing slash or another case is
// some other path (the mux sees them so too).
func TestForOtherPaths(t *testing.T) {
	for _, p := range []string{"", "/", "/v1/models", "/v1/chat/completions/", "/v1/chat/completions?x=1",
		"/V1/messages", "/v1/messages/batches", "/v1/message", "v1/messages", "/v1/completion"} {
		if e, ok := For(p); ok || e != (Endpoint{}) {
			t.Errorf("For(%q) = %+v, %v; want the zero Endpoint, false", p, e, ok)
		}
	}
}

// The rows agree with one another: a translated call has a counterpart in the other family,
// only OpenAI calls are asked for usage, and what reports usage is accounted.
func TestTableRules(t *testing.T) {
	for _, e := range All() {
		if (e.Route == RouteNone) != (e.Counterpart == "") {
			t.Errorf("%s: route %d with counterpart %q", e.Path, e.Route, e.Counterpart)
		}
		if c, ok := For(e.Counterpart); ok && c.Dialect == e.Dialect {
			t.Errorf("%s: counterpart %s speaks the same family", e.Path, c.Path)
		}
		if e.AskUsage && (e.Dialect != OpenAI || !e.Usage) {
			t.Errorf("%s: asks for usage but is not an OpenAI call that reports it", e.Path)
		}
		if e.Usage != (e.Operation != "") {
			t.Errorf("%s: usage %v but operation %q", e.Path, e.Usage, e.Operation)
		}
		if DialectOf(e.Path) != e.Dialect || DialectOf(e.Path+"?beta=true") != e.Dialect {
			t.Errorf("%s: family %d, but DialectOf says %d", e.Path, e.Dialect, DialectOf(e.Path))
		}
		if c := e.Counterpart; c != "" && DialectOf(c) == e.Dialect {
			t.Errorf("%s: DialectOf its counterpart %s is its own family", e.Path, c)
		}
	}
}

func TestErrorType(t *testing.T) {
	for _, c := range []struct {
		status            int
		openAI, anthropic string
	}{
		{400, "invalid_request_error", "invalid_request_error"},
		{401, "authentication_error", "authentication_error"},
		{403, "permission_error", "permission_error"},
		{404, "invalid_request_error", "not_found_error"},
		{405, "invalid_request_error", "invalid_request_error"},
		{408, "invalid_request_error", "api_error"},
		{413, "invalid_request_error", "invalid_request_error"},
		{422, "invalid_request_error", "invalid_request_error"},
		{429, "rate_limit_error", "rate_limit_error"},
		{499, "invalid_request_error", "api_error"},
		{500, "server_error", "api_error"},
		{502, "upstream_error", "api_error"},
		{503, "server_error", "overloaded_error"},
		{504, "timeout_error", "api_error"},
		{529, "server_error", "overloaded_error"},
		{200, "server_error", "api_error"},
	} {
		if got := OpenAI.ErrorType(c.status); got != c.openAI {
			t.Errorf("OpenAI %d: %s, want %s", c.status, got, c.openAI)
		}
		if got := Anthropic.ErrorType(c.status); got != c.anthropic {
			t.Errorf("Anthropic %d: %s, want %s", c.status, got, c.anthropic)
		}
	}
}

func TestForAllocatesNothing(t *testing.T) {
	paths := []string{"/v1/messages/count_tokens", "/v1/unknown"}
	if n := testing.AllocsPerRun(100, func() {
		for _, p := range paths {
			For(p)
		}
	}); n != 0 {
		t.Errorf("For allocates %v times per call", n)
	}
}

var sink Endpoint

func BenchmarkFor(b *testing.B) {
	for _, p := range []string{"/v1/chat/completions", "/v1/messages/count_tokens", "/v1/models"} {
		b.Run(strings.TrimPrefix(p, "/v1/"), func(b *testing.B) {
			for b.Loop() {
				sink, _ = For(p)
			}
		})
	}
}
