package translate

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestAnthropicToOpenAIRequest(t *testing.T) {
	in := `{"model":"m","max_tokens":64,"stream":true,"system":[{"type":"text","text":"a"},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}],
	"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAA"}}]},
	{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]},
	{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"out","is_error":true},{"type":"text","text":"next"}]}],
	"tools":[{"name":"Bash","description":"run","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},
	"stop_sequences":["X"],"top_k":5,"metadata":{"user_id":"u"},"thinking":{"type":"enabled","budget_tokens":10}}`
	out, info, err := AnthropicToOpenAI([]byte(in))
	if err != nil || !info.Stream || info.Model != "m" {
		t.Fatalf("%v %+v", err, info)
	}
	want := `{"model":"m","messages":[{"role":"system","content":"a\n\nb"},` +
		`{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA"}}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls\"}"}}]},` +
		`{"role":"tool","content":"Error: out","tool_call_id":"t1"},{"role":"user","content":"next"}],` +
		`"max_tokens":64,"top_k":5,"stop":["X"],"stream":true,"stream_options":{"include_usage":true},` +
		`"tools":[{"type":"function","function":{"name":"Bash","description":"run","parameters":{"type":"object"}}}],` +
		`"tool_choice":"required","user":"u"}`
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
}

func TestOpenAIToAnthropicRequest(t *testing.T) {
	in := `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"},
	{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
	{"role":"tool","tool_call_id":"c1","content":"r"}],"stream":true,"stream_options":{"include_usage":true},"stop":"X",
	"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto"}`
	out, info, err := OpenAIToAnthropic([]byte(in), 4096)
	if err != nil || !info.IncludeUsage || !info.Stream {
		t.Fatalf("%v %+v", err, info)
	}
	var got map[string]any
	json.Unmarshal(out, &got)
	if got["max_tokens"] != 4096.0 || got["system"] != "s" || len(got["messages"].([]any)) != 3 {
		t.Fatalf("%s", out)
	}
	if _, _, err := OpenAIToAnthropic([]byte(`{"model":"m","n":2,"messages":[]}`), 1); err == nil {
		t.Fatal("n=2 accepted")
	}
}

var eventName = regexp.MustCompile(`(?m)^event: (\S+)$`)

// The OpenAI stream fed one byte at a time yields Anthropic's exact event order, with tool
// arguments as input_json_delta fragments.
func TestOpenAIStreamToAnthropicEventOrder(t *testing.T) {
	in := "data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
		"data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\r\n\r\n" +
		": keep-alive\n\n" +
		"data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n" +
		"data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n" +
		"data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n" +
		"data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n" +
		"data: {\"id\":\"x\",\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n" +
		"data: {\"id\":\"x\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}\n\n" +
		"data: [DONE]\n\n"
	s := NewAnthropicStream("asked")
	var out strings.Builder
	// The second argument fragment, and the end of the call, come after this point; the first
	// fragment must already be out (arguments are not held until the call ends).
	secondFragment := strings.Index(in, `:1}`)
	for i := range len(in) {
		if i == secondFragment && !strings.Contains(out.String(), `"partial_json":"{\"a\""`) {
			t.Fatalf("the first argument fragment was held back:\n%s", out.String())
		}
		b, err := s.Write([]byte{in[i]})
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
	}
	out.Write(s.Close())
	var names []string
	for _, m := range eventName.FindAllStringSubmatch(out.String(), -1) {
		names = append(names, m[1])
	}
	want := "message_start content_block_start content_block_delta content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %v\n%s", names, out.String())
	}
	for _, frag := range []string{`"partial_json":"{\"a\""`, `"stop_reason":"tool_use"`, `"output_tokens":3`, `"model":"asked"`, `"id":"msg_x"`} {
		if !strings.Contains(out.String(), frag) {
			t.Errorf("missing %s in\n%s", frag, out.String())
		}
	}
	if u := s.Usage(); u.InputTokens != 7 || u.OutputTokens != 3 {
		t.Errorf("usage %+v", u)
	}
}

func TestAnthropicStreamToOpenAIChunks(t *testing.T) {
	in := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: ping\ndata: {\"type\":\"ping\"}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	s := NewOpenAIStream("asked", true)
	out, err := s.Write([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	text := string(out) + string(s.Close())
	for _, frag := range []string{`"delta":{"role":"assistant","content":""}`, `"delta":{"content":"Hi"}`,
		`"tool_calls":[{"index":0,"id":"t","type":"function","function":{"name":"f","arguments":""}}]`,
		`"finish_reason":"tool_calls"`, `"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}`} {
		if !strings.Contains(text, frag) {
			t.Errorf("missing %s in\n%s", frag, text)
		}
	}
	if !strings.HasSuffix(text, "data: [DONE]\n\n") {
		t.Errorf("no [DONE]:\n%s", text)
	}
}

func TestStreamCutShortEndsWithAnError(t *testing.T) {
	s := NewAnthropicStream("m")
	s.Write([]byte("data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"))
	if out := string(s.Close()); !strings.Contains(out, "event: error") {
		t.Fatalf("cut stream ended with %q", out)
	}
}

func TestErrorBody(t *testing.T) {
	got := string(ErrorBody(429, []byte(`{"error":{"message":"slow down","type":"x"}}`), true))
	if got != `{"error":{"message":"slow down","type":"rate_limit_error"},"type":"error"}` {
		t.Fatal(got)
	}
	got = string(ErrorBody(404, []byte(`{"type":"error","error":{"type":"not_found_error","message":"no"}}`), false))
	if got != `{"error":{"code":null,"message":"no","type":"invalid_request_error"}}` {
		t.Fatal(got)
	}
}

// Fuzz: nothing panics on any bytes, for both mappers and both streams.
// The fuzz targets: one per mapper and stream translator of untrusted bytes. Their corpora hold
// hand-made seeds and real captures of the SDKs' and Claude Code's traffic through the fakes of
// the end-to-end tests (MODELRELAY_CAPTURE_SEEDS, see cmd/modelrelay-server).

func FuzzAnthropicRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
	f.Add(items("blocks", MaxItems+1)) // over the cost bound
	f.Add(items("tool results", MaxItems))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := AnthropicToOpenAI(b)
		checkRequest(t, b, out, err)
		if n, err := EstimateTokens(b); err == nil && n < 0 {
			t.Fatalf("estimate %d", n)
		}
		out, err = TokenizeRequest(b)
		checkRequest(t, b, out, err)
	})
}

func FuzzOpenAIRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add(items("parts", MaxItems+1)) // over the cost bound
	f.Add(items("tool calls", MaxItems))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := OpenAIToAnthropic(b, 16)
		checkRequest(t, b, out, err)
	})
}

// checkRequest: a request mapping fails or yields JSON, no larger than a few times its input
// plus what each of its (bounded) items may add (a tool's default schema, a role).
func checkRequest(t *testing.T, in, out []byte, err error) {
	t.Helper()
	checkMapped(t, out, err)
	if err == nil && len(out) > 3*len(in)+128*MaxItems {
		t.Fatalf("%d bytes mapped to %d", len(in), len(out))
	}
}

func FuzzResponses(f *testing.F) {
	f.Add([]byte(`{"id":"x","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, _, err := OpenAIResponseToAnthropic(b, "m")
		checkMapped(t, out, err)
		out, _, err = AnthropicResponseToOpenAI(b, "m")
		checkMapped(t, out, err)
		if !json.Valid(ErrorBody(500, b, true)) || !json.Valid(ErrorBody(500, b, false)) {
			t.Fatal("error body is not JSON")
		}
	})
}

func FuzzAnthropicStream(f *testing.F) {
	f.Add([]byte("data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) { checkStream(t, NewAnthropicStream("m"), b) })
}

func FuzzOpenAIStream(f *testing.F) {
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) { checkStream(t, NewOpenAIStream("m", true), b) })
}

// checkMapped: a mapping either fails or yields JSON.
func checkMapped(t *testing.T, out []byte, err error) {
	t.Helper()
	if err == nil && !json.Valid(out) {
		t.Fatalf("mapped to invalid JSON: %q", out)
	}
}

// checkStream feeds b in three uneven writes. What comes out stays proportional to what went
// in (no state that grows on its own), and every event carries JSON.
func checkStream(t *testing.T, s Stream, b []byte) {
	t.Helper()
	var out []byte
	for _, part := range [][]byte{b[:len(b)/3], b[len(b)/3 : len(b)/2], b[len(b)/2:]} {
		o, err := s.Write(part)
		out = append(out, o...)
		if err != nil {
			out = append(out, s.Fail(err.Error())...)
			break
		}
	}
	out = append(out, s.Close()...)
	if len(out) > 64*len(b)+8192 {
		t.Fatalf("%d bytes in, %d out", len(b), len(out))
	}
	for _, line := range strings.Split(string(out), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && data != "[DONE]" && !json.Valid([]byte(data)) {
			t.Fatalf("event data is not JSON: %q", data)
		}
	}
}

// Control characters and invalid UTF-8 in a streamed delta stay valid JSON in the translated
// event.
func TestAnthropicStreamQuotesControlCharacters(t *testing.T) {
	s := NewAnthropicStream("claude")
	in := "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\\u0001b\\\"c\xff\"}}]}\n\n"
	out, err := s.Write([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var sawDelta bool
	for _, line := range strings.Split(string(out), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if !json.Valid([]byte(data)) {
			t.Errorf("not JSON: %s", data)
		}
		if strings.Contains(data, "text_delta") {
			var ev struct{ Delta struct{ Text string } }
			json.Unmarshal([]byte(data), &ev)
			sawDelta = ev.Delta.Text == "a\x01b\"c\uFFFD"
		}
	}
	if !sawDelta {
		t.Errorf("the delta's text did not survive: %s", out)
	}
}
