package translate

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// A whole chat completion becomes a response object: echo fields from the request, output in
// the order reasoning, message, calls (a custom tool's as custom_tool_call), usage with its
// details.
func TestChatResponseToResponses(t *testing.T) {
	chat := `{"id":"chatcmpl-9","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",` +
		`"content":"Patching.","reasoning_content":"need a patch","tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},` +
		`{"id":"call_2","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n\"}"}},` +
		`{"id":"","type":"function","function":{"name":"apply_patch","arguments":"not json"}}]},"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":5}}}`
	m := testMeta
	m.IncludeEncrypted = true
	b, u, err := ChatResponseToResponses([]byte(chat), m)
	if err != nil || u != (Usage{100, 20}) {
		t.Fatalf("%v %+v", err, u)
	}
	var r rResponse
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if r.ID != testMeta.ID || r.Object != "response" || r.Status != "completed" || r.Model != "asked" || r.CreatedAt != 1700000000 ||
		r.Error != nil || r.IncompleteDetails != nil {
		t.Fatalf("response %s", b)
	}
	types := make([]string, len(r.Output))
	for i, it := range r.Output {
		types[i] = it.Type + ":" + it.ID[:strings.IndexByte(it.ID, '_')]
	}
	if got := strings.Join(types, " "); got != "reasoning:rs message:msg function_call:fc custom_tool_call:ctc custom_tool_call:ctc" {
		t.Fatalf("output %s", got)
	}
	o := r.Output
	if o[0].Summary[0].Text != "need a patch" || o[1].Content[0].Text != "Patching." || o[1].Status != "completed" ||
		o[2].Arguments != `{"a":1}` || o[2].CallID != "call_1" || o[2].Status != "completed" ||
		o[3].Input != "*** Begin Patch\n" || o[3].CallID != "call_2" || o[3].Name != "apply_patch" ||
		o[4].Input != "not json" || o[4].CallID == "" {
		t.Fatalf("output %+v", o)
	}
	if text, ok := readReasoningToken([]byte(`"` + o[0].EncryptedContent + `"`)); !ok || string(text) != "need a patch" {
		t.Fatalf("encrypted_content %q", o[0].EncryptedContent)
	}
	if us := r.Usage; us.InputTokens != 100 || us.InputTokensDetails.CachedTokens != 64 || us.OutputTokens != 20 ||
		us.OutputTokensDetails.ReasoningTokens != 5 || us.TotalTokens != 120 {
		t.Fatalf("usage %+v", r.Usage)
	}
	var echo map[string]json.RawMessage
	json.Unmarshal(b, &echo)
	for k, want := range map[string]string{"instructions": `"be brief"`, "store": "false", "metadata": `{"k":"v"}`, "tool_choice": `"auto"`,
		"parallel_tool_calls": "true", "previous_response_id": "null", "temperature": "null", "max_output_tokens": "null",
		"text": `{"format":{"type":"text"}}`, "truncation": `"disabled"`} {
		if string(echo[k]) != want {
			t.Errorf("%s: %s, want %s", k, echo[k], want)
		}
	}
}

// A finish at the token limit is an incomplete response; an answer of nothing is an empty
// message; no encrypted_content unless asked for.
func TestChatResponseToResponsesIncomplete(t *testing.T) {
	b, _, err := ChatResponseToResponses([]byte(`{"choices":[{"message":{"content":"par","reasoning":"r"},"finish_reason":"length"}]}`), testMeta)
	var r rResponse
	json.Unmarshal(b, &r)
	if err != nil || r.Status != "incomplete" || r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" ||
		len(r.Output) != 2 || r.Output[1].Status != "incomplete" || r.Output[0].EncryptedContent != "" || r.Usage.TotalTokens != 0 {
		t.Fatalf("%v %s", err, b)
	}
	b, _, _ = ChatResponseToResponses([]byte(`{"choices":[]}`), testMeta)
	r = rResponse{}
	json.Unmarshal(b, &r)
	if len(r.Output) != 1 || r.Output[0].Type != "message" || r.Output[0].Content[0].Text != "" {
		t.Fatalf("%s", b)
	}
	if _, _, err := ChatResponseToResponses([]byte(`not json`), testMeta); err == nil {
		t.Fatal("not JSON mapped")
	}
}

func TestNewResponseID(t *testing.T) {
	a, b := NewResponseID(), NewResponseID()
	if !regexp.MustCompile(`^resp_[0-9a-f]{32}$`).MatchString(a) || a == b {
		t.Fatalf("%s %s", a, b)
	}
}

// A target's error, whatever its family, is the Responses error shape; a 429 says when to
// retry the way Codex reads it.
func TestResponsesErrorBody(t *testing.T) {
	for _, c := range []struct {
		status, retry int
		body, want    string
	}{
		{429, 7, `{"error":{"message":"slow down","type":"x"}}`,
			`{"error":{"code":"rate_limit_exceeded","message":"slow down. Please try again in 7s.","param":null,"type":"rate_limit_error"}}`},
		{429, 0, `busy`, `{"error":{"code":"rate_limit_exceeded","message":"busy. Please try again in 1s.","param":null,"type":"rate_limit_error"}}`},
		{429, 3, `{"error":{"message":"Rate limited. Try again in 20s."}}`,
			`{"error":{"code":"rate_limit_exceeded","message":"Rate limited. Try again in 20s.","param":null,"type":"rate_limit_error"}}`},
		{404, 0, `{"type":"error","error":{"type":"not_found_error","message":"no such model"}}`,
			`{"error":{"code":null,"message":"no such model","param":null,"type":"invalid_request_error"}}`},
		{500, 0, ``, `{"error":{"code":null,"message":"the model server answered 500","param":null,"type":"server_error"}}`},
		{400, 0, `{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}`,
			`{"error":{"code":"context_length_exceeded","message":"too long","param":null,"type":"invalid_request_error"}}`},
		{400, 0, `{"object":"error","message":"bad","type":"BadRequestError","code":400}`,
			`{"error":{"code":null,"message":"bad","param":null,"type":"invalid_request_error"}}`},
		{400, 0, `{"detail":"context too long"}`, `{"error":{"code":null,"message":"context too long","param":null,"type":"invalid_request_error"}}`},
	} {
		if got := string(ResponsesErrorBody(c.status, []byte(c.body), c.retry)); got != c.want {
			t.Errorf("%d %s:\n got %s\nwant %s", c.status, c.body, got, c.want)
		}
	}
	if !regexp.MustCompile(`(?i)try again in\s*(\d+(?:\.\d+)?)\s*(s|ms|seconds?)`).Match(ResponsesErrorBody(429, nil, 2)) {
		t.Fatal("Codex cannot read the delay")
	}
}
