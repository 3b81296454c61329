package translate

import (
	"errors"
	"strings"
	"testing"
)

// codexBody is a request as Codex CLI 0.169 sends it mid-task: developer and user messages,
// a reasoning item it got from the relay, the assistant's text and two calls of one turn (a
// function and the custom apply_patch), their outputs, reasoning from another server, the
// final answer; function, custom, built-in and namespace tools.
var codexBody = `{"model":"gpt-5-codex","instructions":"You are Codex.","input":[
{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions>"}]},
{"type":"message","role":"user","content":[{"type":"input_text","text":"write a file"}]},
{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"thinking"}],"encrypted_content":"` + reasoningToken([]byte("I should \"run\" it\n")) + `"},
{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Running it."}]},
{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"touch a\"}","call_id":"call_1"},
{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch\n*** End Patch","call_id":"call_2"},
{"type":"function_call_output","call_id":"call_1","output":"done"},
{"type":"custom_tool_call_output","call_id":"call_2","output":[{"type":"input_text","text":"ok"},{"type":"input_text","text":"fine"}]},
{"type":"reasoning","id":"rs_2","summary":[],"encrypted_content":"gAAAAB-openai"},
{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}],
"tools":[{"type":"function","name":"exec_command","description":"run","strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}},
{"type":"custom","name":"apply_patch","description":"patch","format":{"type":"grammar","syntax":"lark","definition":"start: begin_patch\nbegin_patch: \"*** Begin Patch\""}},
{"type":"web_search"},{"type":"namespace","name":"mcp","tools":[]}],
"tool_choice":"auto","parallel_tool_calls":false,"reasoning":{"effort":"medium","summary":"auto"},"store":false,"stream":true,
"include":["reasoning.encrypted_content"],"prompt_cache_key":"sess-1","text":{"verbosity":"medium"},"client_metadata":{"x":"y"}}`

// Codex's body maps cleanly: one assistant message for the turn (text, the reasoning the relay
// issued, both calls), a tool message per output, built-in tools and foreign reasoning gone.
func TestResponsesToChatCodexBody(t *testing.T) {
	out, info, err := ResponsesToChat([]byte(codexBody), true)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"gpt-5-codex","messages":[{"role":"system","content":"You are Codex."},{"role":"system","content":"<permissions>"},` +
		`{"role":"user","content":"write a file"},` +
		`{"role":"assistant","content":"Running it.","reasoning_content":"I should \"run\" it\n","tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\":\"touch a\"}"}},` +
		`{"id":"call_2","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** End Patch\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"done"},{"role":"tool","tool_call_id":"call_2","content":"ok\nfine"},` +
		`{"role":"assistant","content":"Done."}],` +
		`"stream":true,"stream_options":{"include_usage":true},"tools":[` +
		`{"type":"function","function":{"name":"exec_command","description":"run","strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}}},` +
		`{"type":"function","function":{"name":"apply_patch","description":"patch","parameters":{"type":"object","properties":{"input":{"type":"string","description":"The input, written in this lark grammar:\nstart: begin_patch\nbegin_patch: \"*** Begin Patch\""}},"required":["input"]}}}],` +
		`"tool_choice":"auto","parallel_tool_calls":false,"reasoning_effort":"medium"}`
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	wantInfo := ResponsesRequest{Request: Request{Model: "gpt-5-codex", Stream: true}, SessionKey: "sess-1", Store: false, IncludeEncrypted: true}
	if info != wantInfo {
		t.Fatalf("info %+v", info)
	}
}

// Each row of the mapping, as the smallest body that shows it.
func TestResponsesToChatRows(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		reasoning      bool
	}{
		{"a string input is one user message", `{"model":"m","input":"hi"}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false},
		{"instructions come first; system and developer messages stay where they are",
			`{"model":"m","instructions":"I","input":[{"role":"user","content":"a"},{"type":"message","role":"system","content":"S"},{"role":"developer","content":[{"type":"input_text","text":"D"}]}]}`,
			`{"model":"m","messages":[{"role":"system","content":"I"},{"role":"user","content":"a"},{"role":"system","content":"S"},{"role":"system","content":"D"}]}`, false},
		{"parts: one text is a string; texts and images are parts; an image's detail is kept",
			`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:image/png;base64,AA","detail":"low"},{"type":"input_text","text":"b"}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA","detail":"low"}},{"type":"text","text":"b"}]}]}`, false},
		{"an empty message is an empty string; unknown parts are dropped",
			`{"model":"m","input":[{"role":"user","content":[]},{"role":"user","content":[{"type":"input_audio"},{"type":"input_text","text":"x"}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":""},{"role":"user","content":"x"}]}`, false},
		{"each run of calls is one assistant message; outputs are tool messages",
			`{"model":"m","input":[{"role":"user","content":"go"},` +
				`{"type":"function_call","call_id":"a","name":"f","arguments":"{\"n\":1}"},{"type":"function_call","call_id":"b","name":"f","arguments":"{\"n\":2}"},` +
				`{"type":"function_call_output","call_id":"a","output":"1"},{"type":"function_call_output","call_id":"b","output":"2"},` +
				`{"type":"function_call","call_id":"c","name":"g","arguments":""},{"type":"function_call_output","call_id":"c","output":"3"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"go"},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"n\":1}"}},{"id":"b","type":"function","function":{"name":"f","arguments":"{\"n\":2}"}}]},` +
				`{"role":"tool","tool_call_id":"a","content":"1"},{"role":"tool","tool_call_id":"b","content":"2"},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"g","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"c","content":"3"}]}`, false},
		{"a turn's texts are its parts, its reasoning joined; reasoning alone, or not the relay's, is dropped",
			`{"model":"m","input":[{"type":"reasoning","summary":[],"encrypted_content":null},{"role":"user","content":"q"},` +
				`{"type":"reasoning","summary":[],"encrypted_content":"` + reasoningToken([]byte("r")) + `"},` +
				`{"role":"assistant","content":"a"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"},{"type":"refusal","refusal":"c"}]},` +
				`{"type":"reasoning","summary":[],"encrypted_content":"` + reasoningToken([]byte("alone")) + `"},{"role":"user","content":"z"},` +
				`{"type":"reasoning","summary":[],"encrypted_content":"` + reasoningToken([]byte("lonely")) + `"},{"role":"user","content":"w"},` +
				`{"type":"reasoning","summary":[],"encrypted_content":"modelrelay.reasoning.1.!!"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"q"},` +
				`{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"text","text":"c"}],"reasoning_content":"r\n\nalone"},` +
				`{"role":"user","content":"z"},{"role":"user","content":"w"}]}`, false},
		{"built-in calls and their outputs, and unknown items, are dropped",
			`{"model":"m","input":[{"role":"user","content":"q"},{"type":"web_search_call","id":"ws","status":"completed"},` +
				`{"type":"local_shell_call","call_id":"l","action":{}},{"type":"compaction","encrypted_content":"x"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"q"}]}`, false},
		{"a tool output of parts is their text",
			`{"model":"m","input":[{"type":"function_call_output","call_id":"a","output":[{"type":"input_text","text":"x"},{"type":"input_image","image_url":"u"},{"type":"input_text","text":"y"}]}]}`,
			`{"model":"m","messages":[{"role":"tool","tool_call_id":"a","content":"x\ny"}]}`, false},
		{"a custom tool is a function of one string, input; a format without grammar says nothing more",
			`{"model":"m","input":"x","tools":[{"type":"custom","name":"p","format":{"type":"text"}},{"type":"function","name":"f"}],"tool_choice":{"type":"custom","name":"p"}}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[` +
				`{"type":"function","function":{"name":"p","parameters":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}}},` +
				`{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}],` +
				`"tool_choice":{"type":"function","function":{"name":"p"}}}`, false},
		{"tool_choice naming a function, and allowed_tools by its mode",
			`{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":true}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],` +
				`"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":true}`, false},
		{"allowed_tools is its mode",
			`{"model":"m","input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"f"}]}}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}],"tool_choice":"required"}`, false},
		{"only built-in tools: no tools, no tool_choice, no parallel_tool_calls",
			`{"model":"m","input":"x","tools":[{"type":"web_search"},{"type":"file_search","vector_store_ids":[]},{"type":"local_shell"}],"tool_choice":"auto","parallel_tool_calls":true}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}]}`, false},
		{"sampling, limits and the user; metadata, store, include and the rest are not sent",
			`{"model":"m","input":"x","max_output_tokens":64,"temperature":0.2,"top_p":0.9,"user":"u","metadata":{"a":"b"},"store":true,` +
				`"include":[],"service_tier":"auto","truncation":"auto","background":false,"previous_response_id":null,"prompt_cache_key":"k","text":{"verbosity":"low"}}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":64,"temperature":0.2,"top_p":0.9,"user":"u"}`, false},
		{"reasoning.effort is reasoning_effort for a reasoning model",
			`{"model":"m","input":"x","reasoning":{"effort":"high","summary":"auto"}}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"reasoning_effort":"high"}`, true},
		{"and dropped for any other",
			`{"model":"m","input":"x","reasoning":{"effort":"high"}}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}]}`, false},
		{"text.format json_schema is response_format",
			`{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"out","schema":{ "type" : "object" },"strict":true}}}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"out","schema":{"type":"object"},"strict":true}}}`, false},
		{"and json_object",
			`{"model":"m","input":"x","text":{"format":{"type":"json_object"}}}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`, false},
		{"keys in any case, escapes kept",
			`{"MODEL":"m","Input":[{"ROLE":"user","Content":"caf\u00e9 \"q\""}]}`,
			`{"model":"m","messages":[{"role":"user","content":"caf\u00e9 \"q\""}]}`, false},
	} {
		out, _, err := ResponsesToChat([]byte(c.in), c.reasoning)
		if err != nil || string(out) != c.want {
			t.Errorf("%s:\n got %s %v\nwant %s", c.name, out, err, c.want)
		}
	}
}

func TestResponsesToChatInfo(t *testing.T) {
	_, info, err := ResponsesToChat([]byte(`{"model":"m","input":"x"}`), false)
	if err != nil || !info.Store || info.Stream || info.SessionKey != "" || info.IncludeEncrypted || info.Model != "m" {
		t.Fatalf("defaults %+v %v", info, err)
	}
	_, info, _ = ResponsesToChat([]byte(`{"model":"m","input":"x","store":false,"stream":true,"prompt_cache_key":"k\u00e9","include":["file_search_call.results","reasoning.encrypted_content"]}`), false)
	if info.Store || !info.Stream || info.IncludeUsage || info.SessionKey != "ké" || !info.IncludeEncrypted {
		t.Fatalf("info %+v", info)
	}
}

// What cannot be mapped is the client's 400, said in the API's terms; a previous_response_id
// left is the relay's to resolve (ErrPreviousResponse); too many items is a 413.
func TestResponsesToChatErrors(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"model":"m","input":5}`, "input must be a string or an array"},
		{`{"model":"m","input":[5]}`, "input[0] must be an object"},
		{`{"model":"m","input":[{"role":"robot","content":"x"}]}`, "input[0].role must be one of user, assistant, system or developer"},
		{`{"model":"m","input":[{"role":"user","content":{}}]}`, "input[0].content must be a string or an array"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":1}]}]}`, "input[0].content[0].text must be a string"},
		{`{"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "input[0].call_id must be a non-empty string"},
		{`{"model":"m","input":[{"type":"function_call","call_id":"c","arguments":"{}"}]}`, "input[0].name must be a non-empty string"},
		{`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":{}}]}`, "input[0].arguments must be a string"},
		{`{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id must be a non-empty string"},
		{`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":5}]}`, "input[0].output must be a string or an array"},
		{`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":5}]}]}`, "input[0].output[0].text must be a string"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}]}`,
			"input_image with a file_id is not supported by this model's server: send image_url"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_data":"x"}]}]}`, "input_file is not supported by this model's server"},
		{`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "item_reference is not supported: send the item itself"},
		{`{"model":"m","input":"x","background":true}`, "background mode is not supported by this model's server"},
		{`{"model":"m","input":"x","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search_preview"}}`,
			"tool_choice forces the built-in tool web_search_preview, which this model's server does not have"},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function"}}`, "tool_choice.name is missing"},
		{`{"model":"m","input":"x","tools":[{"type":"function"}]}`, "tools[0].name is missing"},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":"x"}]}`, "tools[0].parameters must be an object"},
		{`{"model":"m","input":"x","max_output_tokens":1.5}`, "max_output_tokens must be an integer"},
		{`{"model":"m","input":"x","reasoning":{"effort":1}}`, "reasoning.effort must be a string"},
		{`{"model":"m","input":"x","text":{"format":"json"}}`, "text.format must be an object"},
		{`{"model":"m","input":"x","store":"no"}`, "store must be a boolean"},
		{`{"model":"m","input":"x","tool_choice":5}`, "tool_choice must be a string or an object"},
		{`[1]`, "request body must be a JSON object"},
	} {
		_, _, err := ResponsesToChat([]byte(c.body), false)
		if err == nil || err.Error() != c.want || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want %q (an ErrInvalid)", c.body, err, c.want)
		}
	}
	for _, body := range []string{`{"model":"m","input":"x","previous_response_id":"resp_1"}`, `{"model":"m","PREVIOUS_RESPONSE_ID":"r"}`} {
		if _, _, err := ResponsesToChat([]byte(body), false); !errors.Is(err, ErrPreviousResponse) || errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", body, err)
		}
	}
	many := `{"model":"m","input":[` + strings.Repeat(`{"role":"user","content":"x"},`, MaxItems) + `{"role":"user","content":"x"}]}`
	if _, _, err := ResponsesToChat([]byte(many), false); !errors.Is(err, ErrTooLarge) {
		t.Errorf("%d items: %v", MaxItems+1, err)
	}
}
