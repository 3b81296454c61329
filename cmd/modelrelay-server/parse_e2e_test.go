package main

// What a body the relay will not take gets from the real binary: a member named twice is
// refused before any target sees it (parsers disagree on which one counts), and a value of the
// wrong type is named in the API's terms, never in Go's, in the answer and in the access log.

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// parseRelay is the real binary, logging JSON, with one fake model server of each family
// behind static backends that say which family they speak: oa-m is translated for an
// Anthropic client, an-m for an OpenAI one.
func parseRelay(t *testing.T) (*relayProc, *fakeModel, *fakeModel) {
	t.Helper()
	oa, an := newFakeModel(t, "openai"), newFakeModel(t, "anthropic")
	r := startRelay(t, "backends:\n"+
		backendYAML("oa", oa.url, "oa-m")+"    dialects: [openai]\n"+
		backendYAML("an", an.url, "an-m")+"    dialects: [anthropic]\n", map[string]string{"LOG_FORMAT": "json"})
	return r, oa, an
}

// sentOn counts the inference calls a fake got (its health checks aside).
func sentOn(f *fakeModel) int {
	return len(f.callsTo("/v1/chat/completions")) + len(f.callsTo("/v1/messages"))
}

// checkRefusal asserts a 400 in the route's dialect with exactly message.
func checkRefusal(t *testing.T, label, path string, a relayAnswer, message string) {
	t.Helper()
	checkDialectError(t, label, path, rawAnswer{status: a.status, header: a.header, body: a.body, err: a.err}, http.StatusBadRequest)
	var v struct{ Error struct{ Message string } }
	if json.Unmarshal(a.body, &v); v.Error.Message != message {
		t.Errorf("%s: message %q, want %q", label, v.Error.Message, message)
	}
}

// clientHeader is what an SDK of the route's family sends.
func clientHeader(path string) http.Header {
	if strings.HasPrefix(path, "/v1/messages") {
		return http.Header{"X-Api-Key": {"sk-client"}, "Anthropic-Version": {"2023-06-01"}}
	}
	return http.Header{"Authorization": {"Bearer sk-client"}}
}

func TestE2EDuplicateKeysAreRefusedBeforeAnyTarget(t *testing.T) {
	t.Parallel()
	r, oa, an := parseRelay(t)
	const msgs = `"max_tokens":16,"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct{ label, path, body, message string }{
		{"model twice, openai", "/v1/chat/completions", `{"model":"secret-model","model":"oa-m",` + msgs + `}`, `duplicate key "model" in the request body`},
		{"model twice, anthropic", "/v1/messages", `{"model":"secret-model","model":"an-m",` + msgs + `}`, `duplicate key "model" in the request body`},
		{"model twice, translated for openai", "/v1/messages", `{"model":"secret-model","model":"oa-m",` + msgs + `}`, `duplicate key "model" in the request body`},
		{"model twice, translated for anthropic", "/v1/chat/completions", `{"model":"secret-model","model":"an-m",` + msgs + `}`, `duplicate key "model" in the request body`},
		{"model in two spellings", "/v1/chat/completions", `{"Model":"secret-model","model":"oa-m",` + msgs + `}`, `duplicate key "model" in the request body`},
		{"model escaped", "/v1/messages", `{"model":"an-m","m\u006fdel":"secret-model",` + msgs + `}`, `duplicate key "model" in the request body`},
		{"messages twice", "/v1/messages", `{"model":"oa-m",` + msgs + `,"messages":[]}`, `duplicate key "messages" in the request body`},
	} {
		checkRefusal(t, c.label, c.path, r.send(c.path, clientHeader(c.path), c.body), c.message)
	}
	if n, m := sentOn(oa), sentOn(an); n+m != 0 {
		t.Fatalf("a body with a member named twice reached a model server (%d, %d calls)", n, m)
	}
	// The same bodies with each member once are served, by both families, on both routes.
	for _, c := range []struct{ path, model string }{
		{"/v1/chat/completions", "oa-m"}, {"/v1/messages", "an-m"}, {"/v1/messages", "oa-m"}, {"/v1/chat/completions", "an-m"},
	} {
		if a := r.send(c.path, clientHeader(c.path), `{"model":"`+c.model+`",`+msgs+`}`); a.status != http.StatusOK {
			t.Errorf("%s %s: %s", c.path, c.model, a)
		}
	}
	if sentOn(oa) != 2 || sentOn(an) != 2 {
		t.Errorf("the fakes got %d and %d calls, want 2 each", sentOn(oa), sentOn(an))
	}
}

func TestE2EWrongTypesAreNamedInTheAPIsTerms(t *testing.T) {
	t.Parallel()
	r, oa, an := parseRelay(t)
	for _, c := range []struct{ label, path, body, message string }{
		{"model a number, openai", "/v1/chat/completions", `{"model":5}`, "model must be a string"},
		{"model a number, anthropic", "/v1/messages", `{"model":5,"max_tokens":8,"messages":[]}`, "model must be a string"},
		{"messages a string, translated for openai", "/v1/messages", `{"model":"oa-m","max_tokens":8,"messages":"hi"}`, "messages must be an array"},
		{"messages a string, translated for anthropic", "/v1/chat/completions", `{"model":"an-m","messages":"hi"}`, "messages must be an array"},
		{"content a number, translated", "/v1/messages",
			`{"model":"oa-m","max_tokens":8,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":5}]}`,
			"messages[2].content must be a string or an array"},
		{"max_tokens a string, translated", "/v1/chat/completions",
			`{"model":"an-m","max_tokens":"8","messages":[{"role":"user","content":"hi"}]}`, "max_tokens must be an integer"},
	} {
		checkRefusal(t, c.label, c.path, r.send(c.path, clientHeader(c.path), c.body), c.message)
	}
	if n, m := sentOn(oa), sentOn(an); n+m != 0 {
		t.Errorf("an untranslatable body reached a model server (%d, %d calls)", n, m)
	}
	// Each refusal's access-log line says why, in the words the client was told.
	eventually(t, 10*time.Second, "access log lines with reasons", func() (bool, string) {
		reasons := accessReasons(t, r.logs.String())
		for _, want := range []string{"model must be a string", "messages must be an array",
			"messages[2].content must be a string or an array", "max_tokens must be an integer"} {
			if !reasons[want] {
				return false, "no access-log line with reason " + want
			}
		}
		return true, ""
	})
}

// The access-log line of a duplicate says so; the client's body (its prompt) is not in it.
func TestE2EAccessLogSaysWhyABodyWasRefused(t *testing.T) {
	t.Parallel()
	r, _, _ := parseRelay(t)
	const prompt = "keep-this-prompt-out-of-the-log"
	a := r.send("/v1/chat/completions", nil, `{"model":"oa-m","model":"oa-m","messages":[{"role":"user","content":"`+prompt+`"}]}`)
	checkRefusal(t, "model twice", "/v1/chat/completions", a, `duplicate key "model" in the request body`)
	eventually(t, 10*time.Second, "the refusal's access-log line", func() (bool, string) {
		return accessReasons(t, r.logs.String())[`duplicate key "model" in the request body`], r.logs.tail(2000)
	})
	for _, line := range strings.Split(r.logs.String(), "\n") {
		if strings.Contains(line, prompt) {
			t.Errorf("the log holds the client's prompt: %s", line)
		}
	}
}

// accessReasons reads the reasons of the access-log lines (JSON, msg "request") in logs.
func accessReasons(t *testing.T, logs string) map[string]bool {
	t.Helper()
	reasons := map[string]bool{}
	for _, line := range strings.Split(logs, "\n") {
		var v struct {
			Msg    string `json:"msg"`
			Status int    `json:"status"`
			Reason string `json:"reason"`
		}
		if json.Unmarshal([]byte(line), &v) == nil && v.Msg == "request" && v.Reason != "" {
			if v.Status != http.StatusBadRequest {
				t.Errorf("reason %q on a line of status %d", v.Reason, v.Status)
			}
			reasons[v.Reason] = true
		}
	}
	return reasons
}
