package translate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// rEvent is one Responses stream event as a client reads it.
type rEvent struct {
	Type        string          `json:"type"`
	Seq         *int            `json:"sequence_number"`
	ItemID      string          `json:"item_id"`
	OutputIndex *int            `json:"output_index"`
	Delta       string          `json:"delta"`
	Text        string          `json:"text"`
	Arguments   string          `json:"arguments"`
	Input       string          `json:"input"`
	Name        string          `json:"name"`
	Item        json.RawMessage `json:"item"`
	Response    json.RawMessage `json:"response"`
}

// rItem is an output item.
type rItem struct {
	ID, Type, Status, CallID, Name, Arguments, Input, EncryptedContent string
	Content                                                            []struct{ Type, Text string }
	Summary                                                            []struct{ Type, Text string }
}

func (it *rItem) UnmarshalJSON(b []byte) error {
	type plain rItem
	var v struct {
		plain
		CallID           string `json:"call_id"`
		EncryptedContent string `json:"encrypted_content"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*it = rItem(v.plain)
	it.CallID, it.EncryptedContent = v.CallID, v.EncryptedContent
	return nil
}

// rResponse is a response object.
type rResponse struct {
	ID, Object, Status, Model string
	CreatedAt                 int64 `json:"created_at"`
	Error                     *struct{ Code, Message string }
	IncompleteDetails         *struct{ Reason string } `json:"incomplete_details"`
	Output                    []rItem
	Usage                     *struct {
		InputTokens        int `json:"input_tokens"`
		OutputTokens       int `json:"output_tokens"`
		TotalTokens        int `json:"total_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	}
}

// terminalEvents end a Responses stream.
var terminalEvents = map[string]bool{"response.completed": true, "response.incomplete": true, "response.failed": true}

// parseResponsesStream reads a translated stream and checks what every client may rely on:
// well-formed events whose name is their type, with JSON data; sequence numbers 0, 1, 2…;
// response.created then response.in_progress first; every delta and part event about an item
// added before and not yet done; every added item done; and, when ended, exactly one terminal
// event, last. It returns the events.
func parseResponsesStream(t testing.TB, out string, ended bool) []rEvent {
	t.Helper()
	if out != "" && !strings.HasSuffix(out, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", out[max(0, len(out)-80):])
	}
	var events []rEvent
	for _, block := range strings.Split(strings.TrimSuffix(out, "\n\n"), "\n\n") {
		if block == "" {
			continue
		}
		name, data, ok := strings.Cut(block, "\n")
		name, okName := strings.CutPrefix(name, "event: ")
		data, okData := strings.CutPrefix(data, "data: ")
		if !ok || !okName || !okData || strings.Contains(data, "\n") {
			t.Fatalf("malformed event %q", block)
		}
		var e rEvent
		if !json.Valid([]byte(data)) || json.Unmarshal([]byte(data), &e) != nil {
			t.Fatalf("event data is not JSON: %q", data)
		}
		if e.Type != name {
			t.Fatalf("event %q carries type %q", name, e.Type)
		}
		if e.Seq == nil || *e.Seq != len(events) {
			t.Fatalf("event %d (%s) has sequence_number %v", len(events), name, e.Seq)
		}
		events = append(events, e)
	}
	if len(events) == 0 {
		if ended {
			t.Fatal("an ended stream sent nothing")
		}
		return nil
	}
	if events[0].Type != "response.created" || len(events) > 1 && events[1].Type != "response.in_progress" {
		t.Fatalf("stream starts with %s", events[0].Type)
	}
	added := map[string]int{} // item id -> output index
	done := map[string]bool{}
	terminals := 0
	for i, e := range events {
		if terminals > 0 {
			t.Fatalf("%s after the terminal event", e.Type)
		}
		switch {
		case terminalEvents[e.Type]:
			terminals++
			for id := range added {
				if !done[id] {
					t.Fatalf("item %s added, never done", id)
				}
			}
		case e.Type == "response.output_item.added", e.Type == "response.output_item.done":
			var it rItem
			if json.Unmarshal(e.Item, &it) != nil || it.ID == "" || e.OutputIndex == nil {
				t.Fatalf("event %d: %s without an item or index", i, e.Type)
			}
			if e.Type == "response.output_item.added" {
				if _, dup := added[it.ID]; dup || *e.OutputIndex != len(added) {
					t.Fatalf("event %d: item %s added again or at index %d", i, it.ID, *e.OutputIndex)
				}
				added[it.ID] = *e.OutputIndex
				continue
			}
			if idx, ok := added[it.ID]; !ok || idx != *e.OutputIndex || done[it.ID] {
				t.Fatalf("event %d: item %s done without being added, twice, or at another index", i, it.ID)
			}
			done[it.ID] = true
		case e.ItemID != "":
			if idx, ok := added[e.ItemID]; !ok || done[e.ItemID] || e.OutputIndex == nil || idx != *e.OutputIndex {
				t.Fatalf("event %d: %s for item %s, which is not open at that index", i, e.Type, e.ItemID)
			}
		}
	}
	if ended && (terminals != 1 || !terminalEvents[events[len(events)-1].Type]) {
		t.Fatalf("ended with %d terminal events, last %s", terminals, events[len(events)-1].Type)
	}
	return events
}

// terminal is the response the stream's terminal event carries.
func terminal(t testing.TB, events []rEvent) rResponse {
	t.Helper()
	var r rResponse
	if err := json.Unmarshal(events[len(events)-1].Response, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// chunks builds a chat completion stream of the given deltas (JSON objects), then tail.
func chunks(deltas ...string) string {
	var b strings.Builder
	for _, d := range deltas {
		if strings.HasPrefix(d, "{\"choices\"") || strings.HasPrefix(d, "{\"error\"") || strings.HasPrefix(d, "[") {
			b.WriteString("data: " + d + "\n\n")
			continue
		}
		b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + d + `}]}` + "\n\n")
	}
	return b.String()
}

// runResponses feeds in to a new stream one byte at a time (events cut anywhere), then closes
// it, and returns what a client got.
func runResponses(t testing.TB, m ResponseMeta, in string) (string, *ResponsesStream) {
	t.Helper()
	s := NewResponsesStream(m)
	var out strings.Builder
	for i := range len(in) {
		b, err := s.Write([]byte{in[i]})
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
	}
	out.Write(s.Close())
	return out.String(), s
}

var testMeta = ResponseMeta{ID: "resp_0123456789abcdef0123456789abcdef", Model: "asked", CreatedAt: 1700000000,
	Request: []byte(`{"model":"asked","instructions":"be brief","tools":[{"type":"function","name":"f"},{"type":"custom","name":"apply_patch"}],"store":false,"metadata":{"k":"v"}}`)}

func eventTypes(events []rEvent) string {
	names := make([]string, len(events))
	for i, e := range events {
		names[i] = strings.TrimPrefix(e.Type, "response.")
	}
	return strings.Join(names, " ")
}

// The stream follows OpenAI's order exactly: reasoning, then the message, then the calls, each
// item added, its part opened, its deltas, its part and text done, the item done; then the
// whole response with usage.
func TestResponsesStreamEventOrder(t *testing.T) {
	in := chunks(`{"role":"assistant","content":""}`, `{"reasoning_content":"Let me"}`, `{"reasoning":" think"}`,
		`{"content":"I will "}`, `{"content":"call f."}`,
		`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":""}}]}`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":"}}]}`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}`) +
		`data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
		`data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":16},"completion_tokens_details":{"reasoning_tokens":2}}}` + "\n\n" +
		"data: [DONE]\n\n"
	out, s := runResponses(t, testMeta, in)
	events := parseResponsesStream(t, out, true)
	want := "created in_progress " +
		"output_item.added reasoning_summary_part.added reasoning_summary_text.delta reasoning_summary_text.delta " +
		"reasoning_summary_text.done reasoning_summary_part.done output_item.done " +
		"output_item.added content_part.added output_text.delta output_text.delta output_text.done content_part.done output_item.done " +
		"output_item.added function_call_arguments.delta function_call_arguments.delta function_call_arguments.done output_item.done " +
		"completed"
	if got := eventTypes(events); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	r := terminal(t, events)
	if r.ID != testMeta.ID || r.Object != "response" || r.Status != "completed" || r.Model != "asked" || r.CreatedAt != 1700000000 || r.Error != nil {
		t.Fatalf("response %+v", r)
	}
	if len(r.Output) != 3 || r.Output[0].Type != "reasoning" || r.Output[0].Summary[0].Text != "Let me think" ||
		r.Output[1].Type != "message" || r.Output[1].Content[0].Text != "I will call f." || r.Output[1].Status != "completed" ||
		r.Output[2].Type != "function_call" || r.Output[2].Arguments != `{"x":1}` || r.Output[2].CallID != "call_a" || r.Output[2].Name != "f" {
		t.Fatalf("output %+v", r.Output)
	}
	for i, prefix := range []string{"rs_", "msg_", "fc_"} {
		if !strings.HasPrefix(r.Output[i].ID, prefix) {
			t.Errorf("item %d id %q, want prefix %s", i, r.Output[i].ID, prefix)
		}
	}
	if u := r.Usage; u == nil || u.InputTokens != 20 || u.OutputTokens != 9 || u.TotalTokens != 29 ||
		u.InputTokensDetails.CachedTokens != 16 || u.OutputTokensDetails.ReasoningTokens != 2 {
		t.Fatalf("usage %+v", r.Usage)
	}
	if s.Usage() != (Usage{20, 9}) {
		t.Fatalf("Usage() %+v", s.Usage())
	}
	if string(s.Response()) != string(events[len(events)-1].Response) {
		t.Fatalf("Response() is not the completed response:\n%s", s.Response())
	}
	// The echo fields come from the request.
	var echo struct {
		Instructions string
		Store        bool
		Metadata     map[string]string
		Tools        []map[string]any
		ToolChoice   string `json:"tool_choice"`
	}
	json.Unmarshal(s.Response(), &echo)
	if echo.Instructions != "be brief" || echo.Store || echo.Metadata["k"] != "v" || len(echo.Tools) != 2 || echo.ToolChoice != "auto" {
		t.Fatalf("echo %+v", echo)
	}
}

// The bugs LiteLLM's bridge had, each a case: the stream stays well-formed and each call ends
// with exactly its own arguments.
func TestResponsesStreamCases(t *testing.T) {
	finish := func(reason string) string {
		return `{"choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
	}
	for _, c := range []struct {
		name   string
		in     string
		status string            // the terminal event
		calls  map[string]string // call_id -> arguments (or input) the response holds
		text   string            // the message's text
		check  func(t *testing.T, out string, events []rEvent)
	}{
		{name: "arguments only in the chunk that finishes",
			in: chunks(`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f"}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}`, "[DONE]"),
			status: "completed", calls: map[string]string{"c1": `{"a":1}`},
			check: func(t *testing.T, out string, events []rEvent) {
				if !strings.Contains(out, `"delta":"{\"a\":1}"`) {
					t.Error("the arguments were not sent as a delta")
				}
			}},
		{name: "a call in one piece",
			in:     chunks(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}`, finish("tool_calls"), "[DONE]"),
			status: "completed", calls: map[string]string{"c1": `{"a":1}`}},
		{name: "the name before any arguments, the id alone before it",
			in: chunks(`{"tool_calls":[{"index":0,"id":"c1","type":"function"}]}`, `{"tool_calls":[{"index":0,"function":{"name":"f"}}]}`,
				`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`, finish("tool_calls"), "[DONE]"),
			status: "completed", calls: map[string]string{"c1": `{}`},
			check: func(t *testing.T, out string, events []rEvent) {
				var it rItem
				json.Unmarshal(events[2].Item, &it)
				if events[2].Type != "response.output_item.added" || it.Name != "f" || it.CallID != "c1" {
					t.Errorf("the call was announced as %s %+v", events[2].Type, it)
				}
			}},
		{name: "a call that never carries arguments takes none",
			in:     chunks(`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":""}}]}`, finish("tool_calls")),
			status: "completed", calls: map[string]string{"c1": `{}`}},
		{name: "a call with no name nor arguments is still announced and closed",
			in:     chunks(`{"tool_calls":[{"index":0,"id":"c1"}]}`, finish("tool_calls"), "[DONE]"),
			status: "completed", calls: map[string]string{"c1": `{}`}},
		{name: "empty deltas are skipped, not fatal",
			in: chunks(`{"role":"assistant","content":""}`, `{"content":null}`, `{"content":"a"}`, `{}`, `{"reasoning_content":""}`, `{"content":""}`,
				`{"content":"b"}`, `{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":""}}]}`,
				`{"tool_calls":[{"index":0,"function":{"arguments":""}}]}`, `{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`,
				`{"tool_calls":[]}`, finish("tool_calls"), "[DONE]"),
			status: "completed", text: "ab", calls: map[string]string{"c1": `{}`},
			check: func(t *testing.T, out string, events []rEvent) {
				for _, e := range events {
					if strings.HasSuffix(e.Type, ".delta") && e.Delta == "" {
						t.Errorf("an empty %s was sent", e.Type)
					}
				}
				if strings.Count(out, "event: response.output_item.added") != 2 {
					t.Error("empty deltas opened items")
				}
			}},
		{name: "interleaved parallel calls keep their own arguments",
			in: chunks(`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{\"p\":"}}]}`,
				`{"tool_calls":[{"index":1,"id":"c2","function":{"name":"f","arguments":"{\"q\":"}}]}`,
				`{"tool_calls":[{"index":0,"function":{"arguments":"\"zero\"}"}}]}`,
				`{"tool_calls":[{"index":1,"function":{"arguments":"\"one\"}"}}]}`, finish("tool_calls"), "[DONE]"),
			status: "completed", calls: map[string]string{"c1": `{"p":"zero"}`, "c2": `{"q":"one"}`},
			check: func(t *testing.T, out string, events []rEvent) {
				args := map[string]string{}
				for _, e := range events {
					if e.Type == "response.function_call_arguments.delta" {
						args[e.ItemID] += e.Delta
					}
					if e.Type == "response.function_call_arguments.done" && args[e.ItemID] != e.Arguments {
						t.Errorf("%s: deltas %q, done %q", e.ItemID, args[e.ItemID], e.Arguments)
					}
				}
			}},
		{name: "reasoning after text opens its own item, added before its deltas",
			in:     chunks(`{"content":"a"}`, `{"reasoning_content":"r"}`, `{"content":"b"}`, finish("stop"), "[DONE]"),
			status: "completed",
			check: func(t *testing.T, out string, events []rEvent) {
				r := terminal(t, events)
				if len(r.Output) != 3 || r.Output[1].Type != "reasoning" || r.Output[2].Content[0].Text != "b" {
					t.Errorf("output %+v", r.Output)
				}
			}},
		{name: "a custom tool's call is a custom_tool_call with the input inside its arguments",
			in: chunks(`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin"}}]}`,
				`{"tool_calls":[{"index":0,"function":{"arguments":" Patch\\n\"}"}}]}`, finish("tool_calls"), "[DONE]"),
			status: "completed", calls: map[string]string{"c1": "*** Begin Patch\n"},
			check: func(t *testing.T, out string, events []rEvent) {
				if !strings.Contains(out, "response.custom_tool_call_input.done") || strings.Contains(out, "function_call_arguments") {
					t.Error("not streamed as a custom tool call")
				}
			}},
		{name: "the model's token limit ends the response incomplete",
			in:     chunks(`{"content":"a"}`, finish("length"), "[DONE]"),
			status: "incomplete", text: "a",
			check: func(t *testing.T, out string, events []rEvent) {
				r := terminal(t, events)
				if r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" || r.Output[0].Status != "incomplete" {
					t.Errorf("response %+v", r)
				}
			}},
		{name: "an upstream error chunk fails the response",
			in:     chunks(`{"content":"a"}`, `{"error":{"message":"CUDA out of memory","type":"server_error"}}`, `{"content":"b"}`),
			status: "failed",
			check: func(t *testing.T, out string, events []rEvent) {
				r := terminal(t, events)
				if r.Error == nil || r.Error.Message != "CUDA out of memory" || r.Error.Code != "server_error" || r.Status != "failed" {
					t.Errorf("response %+v", r)
				}
				if strings.Contains(out, "[error]") || strings.Contains(out, `"delta":"b"`) {
					t.Error("the error became text, or the stream went on")
				}
			}},
		{name: "vLLM's error object fails the response too",
			in:     chunks(`{"content":"a"}`) + "data: {\"object\":\"error\",\"message\":\"bad\",\"type\":\"BadRequestError\",\"code\":400}\n\n",
			status: "failed",
			check: func(t *testing.T, out string, events []rEvent) {
				if r := terminal(t, events); r.Error == nil || r.Error.Message != "bad" {
					t.Errorf("response %+v", r)
				}
			}},
		{name: "a stream cut before the model finished fails",
			in:     chunks(`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{\"a\""}}]}`),
			status: "failed",
			check: func(t *testing.T, out string, events []rEvent) {
				r := terminal(t, events)
				if r.Error == nil || !strings.Contains(r.Error.Message, "ended the stream") || r.Output[0].Status != "incomplete" {
					t.Errorf("response %+v", r)
				}
			}},
		{name: "a finish without [DONE] completes at Close", in: chunks(`{"content":"a"}`, finish("stop")), status: "completed", text: "a"},
		{name: "[DONE] without a finish completes", in: chunks(`{"content":"a"}`, "[DONE]"), status: "completed", text: "a"},
		{name: "nothing at all fails", in: "", status: "failed"},
		{name: "another choice than the first is not the answer",
			in:     chunks(`{"content":"a"}`, `{"choices":[{"index":1,"delta":{"content":"z"}}]}`, finish("stop"), "[DONE]"),
			status: "completed", text: "a"},
		{name: "text that is not valid JSON text is escaped",
			in:     "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\\u0001\\\"\xff\"}}]}\n\n" + chunks(finish("stop")),
			status: "completed", text: "a\x01\"\uFFFD"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, s := runResponses(t, testMeta, c.in)
			events := parseResponsesStream(t, out, true)
			r := terminal(t, events)
			if "response."+c.status != events[len(events)-1].Type || r.Status != c.status {
				t.Fatalf("ended with %s (%s)\n%s", events[len(events)-1].Type, r.Status, out)
			}
			if c.status == "failed" && s.Response() != nil {
				t.Error("a failed response is given to the store")
			}
			calls := map[string]string{}
			var text string
			for _, it := range r.Output {
				switch it.Type {
				case "function_call":
					calls[it.CallID] = it.Arguments
				case "custom_tool_call":
					calls[it.CallID] = it.Input
				case "message":
					text += it.Content[0].Text
				}
			}
			if c.calls != nil && fmt.Sprint(calls) != fmt.Sprint(c.calls) {
				t.Errorf("calls %v, want %v", calls, c.calls)
			}
			if c.text != "" && text != c.text {
				t.Errorf("text %q, want %q", text, c.text)
			}
			if c.check != nil {
				c.check(t, out, events)
			}
		})
	}
}

// Fail ends the stream once, with response.failed; nothing after it.
func TestResponsesStreamFail(t *testing.T) {
	s := NewResponsesStream(testMeta)
	out, _ := s.Write([]byte(chunks(`{"content":"partial"}`)))
	all := string(out) // out is valid until the next call
	all += string(s.Fail("the target went away"))
	if more, _ := s.Write([]byte(chunks(`{"content":"x"}`, "[DONE]"))); len(more) != 0 {
		t.Fatalf("wrote after failing: %s", more)
	}
	all += string(s.Close()) + string(s.Fail("again"))
	events := parseResponsesStream(t, all, true)
	if r := terminal(t, events); r.Error == nil || r.Error.Message != "the target went away" {
		t.Fatalf("response %+v", r)
	}
}

// An event over MaxEventBytes breaks the stream (Write's error); the relay then sends Fail's
// response.failed.
func TestResponsesStreamEventTooLarge(t *testing.T) {
	s := NewResponsesStream(testMeta)
	out, _ := s.Write([]byte(chunks(`{"content":"a"}`)))
	all := string(out)
	_, err := s.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("x", MaxEventBytes) + "\"}}]}\n\n"))
	if err == nil {
		t.Fatal("no error")
	}
	all += string(s.Fail(err.Error()))
	if r := terminal(t, parseResponsesStream(t, all, true)); r.Status != "failed" {
		t.Fatalf("status %s", r.Status)
	}
}

// The encrypted reasoning the stream issues, when asked for, reads back into the next
// request as the assistant's reasoning_content: no state on any node.
func TestResponsesStreamEncryptedReasoning(t *testing.T) {
	m := testMeta
	m.IncludeEncrypted = true
	out, s := runResponses(t, m, chunks(`{"reasoning_content":"step \"1\"\n"}`, `{"content":"ok"}`, "[DONE]"))
	r := terminal(t, parseResponsesStream(t, out, true))
	if r.Output[0].EncryptedContent == "" {
		t.Fatal("no encrypted_content")
	}
	next, err := WithHistory([]byte(`{"model":"m","input":"next"}`), OutputItems(s.Response()))
	if err != nil {
		t.Fatal(err)
	}
	chat, _, err := ResponsesToChat(next, false)
	want := `{"model":"m","messages":[{"role":"assistant","content":"ok","reasoning_content":"step \"1\"\n"},{"role":"user","content":"next"}]}`
	if err != nil || string(chat) != want {
		t.Fatalf("got %s %v\nwant %s", chat, err, want)
	}
	// Without include, no token: the item carries only its summary.
	out, _ = runResponses(t, testMeta, chunks(`{"reasoning_content":"r"}`, "[DONE]"))
	if strings.Contains(out, "encrypted_content") {
		t.Fatal("encrypted_content without include")
	}
}

// Chain carries a Responses client to an Anthropic-only target: Anthropic events become chat
// chunks, which become Responses events.
func TestChainAnthropicToResponses(t *testing.T) {
	in := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":1}\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	rs := NewResponsesStream(testMeta)
	s := Chain(NewOpenAIStream("asked", true), rs)
	var out strings.Builder
	for i := range len(in) {
		b, err := s.Write([]byte{in[i]})
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
	}
	out.Write(s.Close())
	r := terminal(t, parseResponsesStream(t, out.String(), true))
	if r.Status != "completed" || len(r.Output) != 2 || r.Output[0].Content[0].Text != "Hi" || r.Output[1].Arguments != `{"a":1}` ||
		r.Output[1].CallID != "toolu_1" || r.Usage.InputTokens != 5 || r.Usage.OutputTokens != 9 {
		t.Fatalf("response %+v", r)
	}
	if s.Usage() != (Usage{5, 9}) || rs.Response() == nil {
		t.Fatalf("usage %+v", s.Usage())
	}
	// Cut short: the first stream's error chunk becomes response.failed; Fail fails the last.
	s = Chain(NewOpenAIStream("asked", true), NewResponsesStream(testMeta))
	b, _ := s.Write([]byte(in[:strings.Index(in, "event: message_delta")]))
	all := string(b)
	all += string(s.Close())
	if r := terminal(t, parseResponsesStream(t, all, true)); r.Status != "failed" {
		t.Fatalf("cut chain ended %s", r.Status)
	}
	s = Chain(NewOpenAIStream("asked", true), NewResponsesStream(testMeta))
	b, _ = s.Write([]byte(in[:200]))
	all = string(b)
	all += string(s.Fail("gone")) + string(s.Close())
	if r := terminal(t, parseResponsesStream(t, all, true)); r.Error == nil || r.Error.Message != "gone" {
		t.Fatalf("failed chain: %+v", r)
	}
}

// The answer a stream holds is bounded: past MaxResponseBytes of text, or maxOutputItems
// items, Write fails and the relay sends Fail's response.failed.
func TestResponsesStreamBounds(t *testing.T) {
	const limit = 64 << 10 // MaxResponseBytes, made small
	text := strings.Repeat("x", 1000)
	tooLarge := strings.Repeat(chunks(`{"content":"`+text+`"}`), limit/len(text)+1)
	var calls strings.Builder
	for i := range maxOutputItems + 1 {
		calls.WriteString(chunks(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"c","function":{"name":"f"}}]}`, i)))
	}
	for name, c := range map[string]struct {
		in   string
		want error
	}{"text": {tooLarge, errResponseTooLarge}, "items": {calls.String(), errTooManyItems}} {
		s := NewResponsesStream(testMeta)
		s.limit = limit
		out, err := s.Write([]byte(c.in))
		if err != c.want {
			t.Fatalf("%s: %v, want %v", name, err, c.want)
		}
		all := string(out)
		all += string(s.Fail(err.Error()))
		if r := terminal(t, parseResponsesStream(t, all, true)); r.Status != "failed" || r.Error.Message != c.want.Error() {
			t.Fatalf("%s: %+v", name, r.Error)
		}
	}
}
