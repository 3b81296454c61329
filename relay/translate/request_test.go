package translate

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// The request mappers copy the client's text as it was escaped, read keys as encoding/json
// would (any case), and flatten or merge where the other family wants it.
func TestRequestMappingCases(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"keys in any case; assistant texts joined",
			`{"Model":"m","MESSAGES":[{"ROLE":"assistant","Content":[{"TYPE":"text","text":"a"},{"type":"text","text":"b"}]}]}`,
			`{"model":"m","messages":[{"role":"assistant","content":"a\n\nb"}]}`},
		{"escapes kept; image as a data URL; an image without a URL dropped",
			`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"caf\u00e9 \"q\"\n"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA\/BB"}},{"type":"image","source":{"type":"url","url":""}}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"caf\u00e9 \"q\"\n"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA\/BB"}}]}]}`},
		{"tool results: text blocks joined, anything else as its JSON",
			`{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"p"},{"type":"text","text":"q"}]},{"type":"tool_result","tool_use_id":"b","content":{"rows" : [1, 2]},"is_error":true}]}]}`,
			`{"model":"m","messages":[{"role":"tool","content":"p\nq","tool_call_id":"a"},{"role":"tool","content":"Error: {\"rows\" : [1, 2]}","tool_call_id":"b"}]}`},
		{"tool input compacted into the arguments string",
			`{"model":"m","messages":[{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"t","name":"Bash","input":{ "command" : "ls \"a b\"" }}]}]}`,
			`{"model":"m","messages":[{"role":"assistant","content":"x","tool_calls":[{"id":"t","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls \\\"a b\\\"\"}"}}]}]}`},
	} {
		out, _, err := AnthropicToOpenAI([]byte(c.in))
		if err != nil || string(out) != c.want {
			t.Errorf("%s:\n got %s %v\nwant %s", c.name, out, err, c.want)
		}
	}
	// OpenAI to Anthropic: system and developer messages become the system prompt, neighbours
	// of one role one message, a data URL (escaped "/" and all) base64 data, arguments that
	// are not a JSON object {}.
	in := `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"a"},` +
		`{"role":"developer","content":[{"type":"text","text":"d"}]},` +
		`{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image\/png;base64,AA\/B"}}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{ \"a\" : [1, 2] }"}},` +
		`{"id":"d","function":{"name":"g","arguments":"not json"}}]},{"role":"tool","tool_call_id":"c","content":"r"}]}`
	want := `{"model":"m","max_tokens":64,"messages":[` +
		`{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA/B"}}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"f","input":{"a":[1,2]}},{"type":"tool_use","id":"d","name":"g","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c","content":"r"}]}],"system":"s\n\nd"}`
	if out, _, err := OpenAIToAnthropic([]byte(in), 64); err != nil || string(out) != want {
		t.Errorf("OpenAI to Anthropic:\n got %s %v\nwant %s", out, err, want)
	}
}

// items builds a body of n messages, blocks or tools in all (the message holding the blocks
// counts as one).
func items(kind string, n int) []byte {
	switch kind {
	case "messages":
		return []byte(`{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"x"},`, n-1) + `{"role":"user","content":"x"}]}`)
	case "blocks":
		return []byte(`{"model":"m","messages":[{"role":"user","content":[` +
			strings.Repeat(`{"type":"text","text":"x"},`, n-2) + `{"type":"text","text":"x"}]}]}`)
	case "system blocks":
		return []byte(`{"model":"m","system":[` + strings.Repeat(`{"type":"text","text":"s"},`, n-2) +
			`{"type":"text","text":"s"}],"messages":[{"role":"user","content":"x"}]}`)
	case "tool results":
		return []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","content":[` +
			strings.Repeat(`{"type":"text","text":"r"},`, n-3) + `{"type":"text","text":"r"}]}]}]}`)
	case "tools":
		return []byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[` +
			strings.Repeat(`{"name":"f"},`, n-2) + `{"name":"f"}]}`)
	case "parts":
		return []byte(`{"model":"m","messages":[{"role":"user","content":[` +
			strings.Repeat(`{"type":"text","text":"x"},`, n-2) + `{"type":"text","text":"x"}]}]}`)
	case "tool calls":
		return []byte(`{"model":"m","messages":[{"role":"assistant","tool_calls":[` +
			strings.Repeat(`{"id":"c","function":{"name":"f","arguments":"{}"}},`, n-2) + `{"id":"c","function":{"name":"f","arguments":"{}"}}]}]}`)
	case "functions":
		return []byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[` +
			strings.Repeat(`{"type":"function","function":{"name":"f"}},`, n-2) + `{"type":"function","function":{"name":"f"}}]}`)
	}
	panic(kind)
}

// A translated request may hold MaxItems messages, content blocks and tools in all: at the
// bound it maps, one over it is ErrTooLarge, whose message names the bound.
func TestMappingCostBound(t *testing.T) {
	mappers := map[string]func([]byte) error{
		"Anthropic to OpenAI": func(b []byte) error { _, _, err := AnthropicToOpenAI(b); return err },
		"count_tokens":        func(b []byte) error { _, err := TokenizeRequest(b); return err },
		"OpenAI to Anthropic": func(b []byte) error { _, _, err := OpenAIToAnthropic(b, 16); return err },
	}
	cases := []struct{ mapper, kind string }{
		{"Anthropic to OpenAI", "messages"}, {"Anthropic to OpenAI", "blocks"}, {"Anthropic to OpenAI", "system blocks"},
		{"Anthropic to OpenAI", "tool results"}, {"Anthropic to OpenAI", "tools"},
		{"count_tokens", "blocks"},
		{"OpenAI to Anthropic", "messages"}, {"OpenAI to Anthropic", "parts"}, {"OpenAI to Anthropic", "tool calls"},
		{"OpenAI to Anthropic", "functions"},
	}
	for _, c := range cases {
		m := mappers[c.mapper]
		if err := m(items(c.kind, MaxItems)); err != nil {
			t.Errorf("%s, %d %s: %v", c.mapper, MaxItems, c.kind, err)
		}
		err := m(items(c.kind, MaxItems+1))
		want := fmt.Sprintf("too many messages, content blocks and tools to translate: at most %d in all", MaxItems)
		if !errors.Is(err, ErrTooLarge) || err.Error() != want {
			t.Errorf("%s, one %s over: %v, want ErrTooLarge saying %q", c.mapper, c.kind, err, want)
		}
	}
}

// A mapping allocates its output and nearly nothing else, however many blocks it walks: a
// translated request costs about its size again, where decoding it used to cost twenty.
func TestMappingAllocatesAboutItsOutput(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":[`)
	for i := range MaxItems - 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"text","text":"block %d: %s"}`, i, strings.Repeat("lorem ipsum ", 20))
	}
	b.WriteString("]}]}")
	body := []byte(b.String())
	for name, mapping := range map[string]func() ([]byte, error){
		"Anthropic to OpenAI": func() ([]byte, error) { out, _, err := AnthropicToOpenAI(body); return out, err },
		"OpenAI to Anthropic": func() ([]byte, error) { out, _, err := OpenAIToAnthropic(body, 16); return out, err },
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		out, err := mapping()
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		allocated := after.TotalAlloc - before.TotalAlloc
		if allocated > uint64(len(out))+64<<10 {
			t.Errorf("%s: %d blocks in %d bytes, out %d bytes, allocated %d", name, MaxItems-1, len(body), len(out), allocated)
		}
	}
}
