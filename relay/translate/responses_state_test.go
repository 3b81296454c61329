package translate

import (
	"errors"
	"testing"
)

func TestInputItems(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"model":"m","input":"hi \"you\""}`, `[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi \"you\""}]}]`},
		{`{"model":"m","input":[ {"role":"user", "content":"a"} ]}`, `[{"role":"user","content":"a"}]`},
		{`{"model":"m"}`, `[]`},
		{`{"model":"m","input":null}`, `[]`},
		{`{"input":"old","INPUT":"new"}`, `[{"type":"message","role":"user","content":[{"type":"input_text","text":"new"}]}]`},
	} {
		if got, err := InputItems([]byte(c.body)); err != nil || string(got) != c.want {
			t.Errorf("%s: %s %v, want %s", c.body, got, err, c.want)
		}
	}
	if _, err := InputItems([]byte(`{"input":5}`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("input 5: %v", err)
	}
}

func TestOutputItems(t *testing.T) {
	for resp, want := range map[string]string{
		`{"id":"r","output":[ {"type":"message"} ],"usage":null}`: `[{"type":"message"}]`,
		`{"id":"r"}`:             `[]`,
		`{"id":"r","output":{}}`: `[]`,
		`not json`:               `[]`,
	} {
		if got := string(OutputItems([]byte(resp))); got != want {
			t.Errorf("%s: %s, want %s", resp, got, want)
		}
	}
}

// A continued conversation: the stored history, then the new input; previous_response_id gone
// (however it is spelled), every other member as it was.
func TestWithHistory(t *testing.T) {
	history := `[{"role":"user","content":"q"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]}]`
	for _, c := range []struct{ body, history, want string }{
		{`{"model":"m","previous_response_id":"resp_1","input":"next","stream":true}`, history,
			`{"model":"m","stream":true,"input":[{"role":"user","content":"q"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]},` +
				`{"type":"message","role":"user","content":[{"type":"input_text","text":"next"}]}]}`},
		{`{ "Previous_Response_ID" : "r", "input" : [ {"type":"function_call_output","call_id":"c","output":"o"} ], "tools" : [ ] }`, ` [ {"x":1} ] `,
			`{"tools" : [ ],"input":[{"x":1},{"type":"function_call_output","call_id":"c","output":"o"}]}`},
		{`{"previous_response_id":"r"}`, `[]`, `{"input":[]}`},
		{`{"model":"m","input":[]}`, history, `{"model":"m","input":` + history + `}`},
	} {
		got, err := WithHistory([]byte(c.body), []byte(c.history))
		if err != nil || string(got) != c.want {
			t.Errorf("%s:\n got %s %v\nwant %s", c.body, got, err, c.want)
		}
	}
	if _, err := WithHistory([]byte(`{"input":"x"}`), []byte(`{"not":"an array"}`)); err == nil {
		t.Error("history that is not an array accepted")
	}
	if _, err := WithHistory([]byte(`{"input":`), []byte(`[]`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("a body that is not JSON: %v", err)
	}
}

// The store's round trip: what a stream answered, stored as input then output items, continues
// the conversation as chat messages (the call and its output in their turns).
func TestHistoryRoundTrip(t *testing.T) {
	first := []byte(`{"model":"m","input":"list files","tools":[{"type":"function","name":"ls"}],"stream":true}`)
	out, s := runResponses(t, ResponseMeta{ID: "resp_1", Model: "m", Request: first},
		chunks(`{"tool_calls":[{"index":0,"id":"call_9","function":{"name":"ls","arguments":"{}"}}]}`, `{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`, "[DONE]"))
	parseResponsesStream(t, out, true)
	in, err := InputItems(first)
	if err != nil || s.Response() == nil {
		t.Fatal(err)
	}
	stored, err := ConversationItems(first, s.Response())
	if err != nil || string(stored) != string(in[:len(in)-1])+","+string(OutputItems(s.Response())[1:]) {
		t.Fatalf("stored %s %v", stored, err)
	}
	next, err := WithHistory([]byte(`{"model":"m","previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"call_9","output":"a.txt"}],"tools":[{"type":"function","name":"ls"}]}`), stored)
	if err != nil {
		t.Fatal(err)
	}
	chat, _, err := ResponsesToChat(next, false)
	want := `{"model":"m","messages":[{"role":"user","content":"list files"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_9","type":"function","function":{"name":"ls","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"call_9","content":"a.txt"}],"tools":[{"type":"function","function":{"name":"ls","parameters":{"type":"object","properties":{}}}}]}`
	if err != nil || string(chat) != want {
		t.Fatalf("got %s %v\nwant %s", chat, err, want)
	}
}
