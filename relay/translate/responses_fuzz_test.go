package translate

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzResponsesStream: any chat chunk sequence, cut anywhere, becomes a well-formed Responses
// stream (parseResponsesStream's checks: JSON events, sequence numbers from 0, every added
// item done, exactly one terminal event) whether it is closed or failed midway, and what
// comes out stays proportional to what went in.
func FuzzResponsesStream(f *testing.F) {
	f.Add([]byte(chunks(`{"reasoning_content":"r"}`, `{"content":"a"}`,
		`{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]}`,
		`{"tool_calls":[{"index":1,"id":"d","function":{"name":"apply_patch","arguments":"{\"input\":\"x\"}"}}]}`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`, "[DONE]")))
	f.Add([]byte(chunks(`{"content":"a"}`, `{"error":{"message":"boom"}}`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, failAt := range []int{-1, len(b) / 2} {
			m := testMeta
			m.IncludeEncrypted = failAt < 0
			s := NewResponsesStream(m)
			var out []byte
			for i, part := range [][]byte{b[:len(b)/3], b[len(b)/3 : len(b)/2], b[len(b)/2:]} {
				if i == 2 && failAt >= 0 {
					out = append(out, s.Fail("the target went away")...)
					break
				}
				o, err := s.Write(part)
				out = append(out, o...)
				if err != nil {
					out = append(out, s.Fail(err.Error())...)
					break
				}
			}
			out = append(out, s.Close()...)
			events := parseResponsesStream(t, string(out), true)
			completed := events[len(events)-1].Type != "response.failed"
			if completed != (s.Response() != nil) {
				t.Fatalf("ended %s with Response() %v", events[len(events)-1].Type, s.Response() != nil)
			}
			if len(out) > 64*len(b)+16<<10 {
				t.Fatalf("%d bytes in, %d out", len(b), len(out))
			}
		}
	})
}

// FuzzResponsesToChat: no body makes the Responses mappings panic; what they accept becomes
// JSON (a chat request, a history, a response echoing it), and an expanded body maps.
func FuzzResponsesToChat(f *testing.F) {
	f.Add([]byte(codexBody))
	f.Add([]byte(`{"model":"m","input":"hi","previous_response_id":"resp_1","tools":[{"type":"custom","name":"p"}],"text":{"format":{"type":"json_schema","schema":{}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := ResponsesToChat(b, true)
		checkRequest(t, b, out, err)
		items, err := InputItems(b)
		checkMapped(t, items, err)
		expanded, err := WithHistory(b, []byte(`[{"role":"user","content":"earlier"}]`))
		checkMapped(t, expanded, err)
		if err == nil {
			out, _, err := ResponsesToChat(expanded, false)
			checkMapped(t, out, err)
			if errors.Is(err, ErrPreviousResponse) {
				t.Fatalf("expanded body still names a previous response: %s", expanded)
			}
		}
		conv, err := ConversationItems(b, b)
		checkMapped(t, conv, err)
		if !json.Valid(OutputItems(b)) {
			t.Fatal("output items are not JSON")
		}
		m := ResponseMeta{ID: "resp_x", Model: "m", Request: b, IncludeEncrypted: true}
		resp, _, err := ChatResponseToResponses(b, m)
		checkMapped(t, resp, err)
		s := NewResponsesStream(m)
		o, _ := s.Write([]byte(chunks(`{"content":"a"}`, "[DONE]")))
		parseResponsesStream(t, string(o), true)
	})
}
