package translate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// collect feeds stream to a collector one byte at a time (events split anywhere) and returns
// its answer.
func collect(anthropic bool, limit int, stream string) ([]byte, error) {
	c := NewCollector(anthropic, limit)
	for i := range len(stream) {
		if err := c.Write([]byte{stream[i]}); err != nil {
			return nil, err
		}
	}
	return c.Answer()
}

func TestCollectOpenAIStreamIntoAChatCompletion(t *testing.T) {
	stream := "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
		": keep-alive\n\n" +
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think\"}}]}\r\n\r\n" +
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo \\\"you\\\"\"}}]}\n\n" +
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"Bash\",\"arguments\":\"\"}}]}}]}\n\n" +
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"cmd\\\":\"}}]}}]}\n\n" +
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"ls\\\"}\"}}]}}]}\n\n" +
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n" +
		"data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":5,\"total_tokens\":12}}\n\n" +
		"data: [DONE]\n\n"
	body, err := collect(false, 1<<20, stream)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello \"you\"",` +
		`"reasoning_content":"think","tool_calls":[{"id":"call_1","type":"function","function":{"name":"Bash","arguments":"{\"cmd\":\"ls\"}"}}]},` +
		`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}`
	if string(body) != want {
		t.Fatalf("got\n%s\nwant\n%s", body, want)
	}
	// The whole answer's mapping takes it from here, as it takes an answer that was not streamed.
	msg, u, bad, err := OpenAIResponseToAnthropic(body, "m")
	if err != nil || len(bad) != 0 || u != (Usage{7, 5}) {
		t.Fatalf("mapping: %v %v %v", err, bad, u)
	}
	var m struct {
		ID         string
		StopReason string `json:"stop_reason"`
		Content    []map[string]any
	}
	json.Unmarshal(msg, &m)
	if m.ID != "msg_c1" || m.StopReason != "tool_use" || len(m.Content) != 3 || m.Content[0]["thinking"] != "think" ||
		m.Content[1]["text"] != `Hello "you"` || m.Content[2]["name"] != "Bash" || m.Content[2]["input"].(map[string]any)["cmd"] != "ls" {
		t.Fatalf("mapped answer %s", msg)
	}
}

func TestCollectAnthropicStreamIntoAMessage(t *testing.T) {
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_9\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":11,\"output_tokens\":1}}}\n\n" +
		"event: ping\ndata: {\"type\":\"ping\"}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"sig\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi \"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"there\"}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":9}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	body, err := collect(true, 1<<20, stream)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"content":[{"thinking":"hmm","type":"thinking"},{"text":"Hi there","type":"text"},` +
		`{"id":"toolu_1","input":{"a":1},"name":"f","type":"tool_use"}],"id":"msg_9","role":"assistant",` +
		`"stop_reason":"tool_use","type":"message","usage":{"input_tokens":11,"output_tokens":9}}`
	if string(body) != want {
		t.Fatalf("got\n%s\nwant\n%s", body, want)
	}
	chat, u, err := AnthropicResponseToOpenAI(body, "m")
	if err != nil || u != (Usage{11, 9}) {
		t.Fatalf("mapping: %v %v", err, u)
	}
	for _, part := range []string{`"id":"chatcmpl-9"`, `"content":"Hi there"`, `"reasoning_content":"hmm"`,
		`"arguments":"{\"a\":1}"`, `"finish_reason":"tool_calls"`} {
		if !strings.Contains(string(chat), part) {
			t.Errorf("mapped answer lacks %s: %s", part, chat)
		}
	}
}

// A stream that cannot become an answer says why: the caller answers 502 with it.
func TestCollectFailures(t *testing.T) {
	big := strings.Repeat("x", MaxEventBytes)
	cases := []struct {
		name      string
		anthropic bool
		limit     int
		stream    string
		want      string // the error's message
	}{
		{"openai: an event over 1 MiB", false, 64 << 20, "data: {\"choices\":[{\"delta\":{\"content\":\"" + big + "\"}}]}\n\n", errEventTooLarge.Error()},
		{"anthropic: an event over 1 MiB", true, 64 << 20, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + big + "\"}}\n\n", errEventTooLarge.Error()},
		{"openai: the answer over the limit", false, 10, "data: {\"choices\":[{\"delta\":{\"content\":\"0123456789ab\"}}]}\n\n", errAnswerTooLarge.Error()},
		{"anthropic: the answer over the limit", true, 10, "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"0123456789ab\"}}\n\n", errAnswerTooLarge.Error()},
		{"openai: the target's error chunk", false, 1 << 20, "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}\n\n", "out of memory"},
		{"anthropic: the target's error event", true, 1 << 20, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", "Overloaded"},
		{"anthropic: an error event without a message", true, 1 << 20, "event: error\ndata: {\"type\":\"error\"}\n\n", "the model server reported an error"},
		{"openai: cut before finish_reason", false, 1 << 20, "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n", errCutShort.Error()},
		{"anthropic: cut before the stop reason", true, 1 << 20, "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n", errCutShort.Error()},
		{"openai: nothing at all", false, 1 << 20, "", errCutShort.Error()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			col := NewCollector(c.anthropic, c.limit)
			err := col.Write([]byte(c.stream))
			if err == nil {
				_, err = col.Answer()
			} else if again := col.Write([]byte("data: {}\n\n")); !errors.Is(again, err) {
				t.Errorf("the error did not stay: %v", again)
			}
			if err == nil || err.Error() != c.want {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
	// The answer is whole once the model said why it stopped, [DONE] or not.
	if _, err := collect(false, 1<<20, "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n"); err != nil {
		t.Fatalf("finish_reason without [DONE]: %v", err)
	}
}

// FuzzCollect: a stream of either family, cut anywhere, becomes a JSON answer the whole
// answer's mapping takes, or an error; never a panic.
func FuzzCollect(f *testing.F) {
	f.Add([]byte("data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"a\",\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{\"}}]},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n" +
		"data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\"}}\n\n" +
		"data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\"}}\n\n" +
		"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"}}\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, anthropic := range []bool{false, true} {
			c := NewCollector(anthropic, 1<<20)
			var err error
			for _, part := range [][]byte{b[:len(b)/3], b[len(b)/3 : len(b)/2], b[len(b)/2:]} {
				if err = c.Write(part); err != nil {
					break
				}
			}
			if err != nil {
				continue
			}
			out, err := c.Answer()
			if err != nil {
				continue
			}
			if !json.Valid(out) {
				t.Fatalf("collected invalid JSON: %q", out)
			}
			if anthropic {
				mapped, _, err := AnthropicResponseToOpenAI(out, "m")
				checkMapped(t, mapped, err)
				if err != nil {
					t.Fatalf("the collected message does not map: %v: %s", err, out)
				}
			} else {
				mapped, _, _, err := OpenAIResponseToAnthropic(out, "m")
				checkMapped(t, mapped, err)
				if err != nil {
					t.Fatalf("the collected completion does not map: %v: %s", err, out)
				}
			}
		}
	})
}
