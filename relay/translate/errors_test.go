package translate

import (
	"errors"
	"strings"
	"testing"
)

// A body the mapping cannot take is the client's error, said in the API's terms: the JSON
// path of the wrong value and what it must be, never a Go type.
func TestRequestErrorsSayWhatIsWrong(t *testing.T) {
	anthropic := func(body string) error { _, _, err := AnthropicToOpenAI([]byte(body)); return err }
	openai := func(body string) error { _, _, err := OpenAIToAnthropic([]byte(body), 16); return err }
	tokenize := func(body string) error { _, err := TokenizeRequest([]byte(body)); return err }
	for _, c := range []struct {
		name string
		mapf func(string) error
		body string
		want string
	}{
		{"anthropic", anthropic, `{"model":"m","max_tokens":8,"messages":"hi"}`, "messages must be an array"},
		{"anthropic", anthropic, `{"model":"m","max_tokens":"8","messages":[]}`, "max_tokens must be an integer"},
		{"anthropic", anthropic, `{"model":"m","max_tokens":8.5,"messages":[]}`, "max_tokens must be an integer"},
		{"anthropic", anthropic, `{"model":"m","temperature":"hot","messages":[]}`, "temperature must be a number"},
		{"anthropic", anthropic, `{"model":"m","stream":"yes","messages":[]}`, "stream must be a boolean"},
		{"anthropic", anthropic, `{"model":"m","messages":[{"role":"user","content":"a"},"hi"]}`, "messages[1] must be an object"},
		{"anthropic", anthropic, `{"model":"m","messages":[{"role":"user","content":"a"},{"role":5,"content":"b"}]}`,
			"messages[1].role must be a string"},
		{"anthropic", anthropic, `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":5}]}`,
			"messages[2].content must be a string or an array"},
		{"anthropic", anthropic, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":7}]}]}`,
			"messages[0].content[1].text must be a string"},
		{"anthropic", anthropic, `{"model":"m","messages":[{"role":"user","content":["hi"]}]}`, "messages[0].content[0] must be an object"},
		{"anthropic", anthropic, `{"model":"m","system":5,"messages":[]}`, "system must be a string or an array of text blocks"},
		{"anthropic", anthropic, `{"model":"m","system":[{"type":"text","text":false}],"messages":[]}`, "system[0].text must be a string"},
		{"anthropic", anthropic, `{"model":"m","stop_sequences":"X","messages":[]}`, "stop_sequences must be an array"},
		{"anthropic", anthropic, `{"model":"m","stop_sequences":["X",1],"messages":[]}`, "stop_sequences[1] must be a string"},
		{"anthropic", anthropic, `{"model":"m","tools":{},"messages":[]}`, "tools must be an array"},
		{"anthropic", anthropic, `{"model":"m","tools":[{"name":"a"},{"name":["b"]}],"messages":[]}`, "tools[1].name must be a string"},
		{"anthropic", anthropic, `{"model":"m","tool_choice":"auto","messages":[]}`, "tool_choice must be an object"},
		{"anthropic", anthropic, `{"model":"m","metadata":{"user_id":1},"messages":[]}`, "metadata.user_id must be a string"},
		{"openai", openai, `{"model":"m","messages":"hi"}`, "messages must be an array"},
		{"openai", openai, `{"model":"m","max_tokens":"x","messages":[]}`, "max_tokens must be an integer"},
		{"openai", openai, `{"model":"m","max_completion_tokens":1e30,"messages":[]}`, "max_completion_tokens must be an integer"},
		{"openai", openai, `{"model":"m","n":"2","messages":[]}`, "n must be an integer"},
		{"openai", openai, `{"model":"m","stream_options":true,"messages":[]}`, "stream_options must be an object"},
		{"openai", openai, `{"model":"m","messages":[{"role":"user","content":{}}]}`, "messages[0].content must be a string or an array"},
		{"openai", openai, `{"model":"m","messages":[{"role":"system","content":7}]}`, "messages[0].content must be a string or an array"},
		{"openai", openai, `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":{}}]}]}`,
			"messages[1].content[0].text must be a string"},
		{"openai", openai, `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":{"a":1}}}]}]}`,
			"messages[0].tool_calls[0].function.arguments must be a string"},
		{"openai", openai, `{"model":"m","tools":[{"type":"function","function":{"name":3}}],"messages":[]}`, "tools[0].function.name must be a string"},
		{"openai", openai, `{"model":"m","n":2,"messages":[]}`, "n > 1 is not supported by this model's server"},
		{"count_tokens", tokenize, `{"model":"m","messages":"hi"}`, "messages must be an array"},
		{"count_tokens", tokenize, `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content must be a string or an array"},
		{"anthropic", anthropic, `{"model":5,"messages":[]}`, "model must be a string"},
		{"anthropic", anthropic, `{"model":"m","system":5}`, "system must be a string or an array of text blocks"},
		{"anthropic", anthropic, `{"model":"m","max_tokens":1.5}`, "max_tokens must be an integer"},
		{"anthropic", anthropic, `{"model":"m","temperature":1e400}`, "temperature must be a number"},
		{"anthropic", anthropic, `{"model":"m","stop_sequences":["a",1]}`, "stop_sequences[1] must be a string"},
		{"anthropic", anthropic, `{"model":"m","messages":[{"role":"user"}]}`, "messages[0].content must be a string or an array"},
		{"anthropic", anthropic, `{"model":"m","messages":[{"role":"user","content":[5]}]}`, "messages[0].content[0] must be an object"},
		{"anthropic", anthropic, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, "messages[0].content[0].text must be a string"},
		{"anthropic", anthropic, `{"model":"m","messages":[{"role":"user","content":[{"type":"image","source":{"type":5}}]}]}`, "messages[0].content[0].source.type must be a string"},
		{"anthropic", anthropic, `{"model":"m","tools":[{"name":5}]}`, "tools[0].name must be a string"},
		{"anthropic", anthropic, `[1]`, "request body must be a JSON object"},
		{"anthropic", anthropic, `{"model":"m",}`, "request body is not valid JSON"},
		{"anthropic", anthropic, "{\"model\":\"\xff\"}", "request body is not valid UTF-8"},
		{"openai", openai, `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":5}}]}]}`, "messages[0].tool_calls[0].function.arguments must be a string"},
		{"openai", openai, `{"model":"m","stream_options":{"include_usage":"yes"}}`, "stream_options.include_usage must be a boolean"},
	} {
		err := c.mapf(c.body)
		if err == nil || err.Error() != c.want || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s %s: %v, want %q (an ErrInvalid)", c.name, c.body, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "translate.")) {
			t.Errorf("%s %s: %q names Go", c.name, c.body, err)
		}
	}
}
