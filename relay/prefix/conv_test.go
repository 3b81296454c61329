package prefix

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// conv is one conversation that the tests send in either dialect.
type conv struct {
	system string
	tools  []convTool
	turns  []turn
}

type convTool struct{ name, description, schema string }

// turn is a user message, or an assistant answer (text, then tool calls), or tool results.
type turn struct {
	role    string // user, assistant, tool
	text    string
	calls   []convCall
	results []string
}

type convCall struct{ id, name, args string }

// obj is a JSON object whose members keep their order, as an SDK writes them.
type obj []any // key, value, key, value, …

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i+1 < len(o); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(mustJSON(o[i]))
		b.WriteByte(':')
		b.Write(mustJSON(o[i+1]))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// openAI renders c as an OpenAI chat completions body, members in the SDK's order.
func (c conv) openAI() []byte {
	var msgs []any
	if c.system != "" {
		msgs = append(msgs, obj{"role", "system", "content", c.system})
	}
	for _, t := range c.turns {
		switch t.role {
		case "user":
			msgs = append(msgs, obj{"role", "user", "content", t.text})
		case "assistant":
			m := obj{"role", "assistant", "content", t.text}
			var calls []any
			for _, k := range t.calls {
				calls = append(calls, obj{"id", k.id, "type", "function",
					"function", obj{"name", k.name, "arguments", k.args}})
			}
			if calls != nil {
				m = append(m, "tool_calls", calls)
			}
			msgs = append(msgs, m)
		case "tool":
			for i, r := range t.results {
				msgs = append(msgs, obj{"role", "tool", "tool_call_id", fmt.Sprint("call_", i), "content", r})
			}
		}
	}
	body := obj{"model", "m", "messages", msgs}
	var tools []any
	for _, t := range c.tools {
		tools = append(tools, obj{"type", "function", "function", obj{
			"name", t.name, "description", t.description, "parameters", json.RawMessage(t.schema)}})
	}
	if tools != nil {
		body = append(body, "tools", tools)
	}
	return mustJSON(append(body, "stream", true))
}

// anthropic renders c as an Anthropic messages body, members in the SDK's order, the system
// prompt as text blocks and content as blocks, cache_control where Claude Code puts it.
func (c conv) anthropic() []byte {
	var msgs []any
	for i, t := range c.turns {
		var blocks []obj
		switch t.role {
		case "user":
			blocks = append(blocks, obj{"type", "text", "text", t.text})
		case "assistant":
			if t.text != "" {
				blocks = append(blocks, obj{"type", "text", "text", t.text})
			}
			for _, k := range t.calls {
				blocks = append(blocks, obj{"type", "tool_use", "id", k.id, "name", k.name, "input", json.RawMessage(k.args)})
			}
		case "tool":
			for j, r := range t.results {
				blocks = append(blocks, obj{"type", "tool_result", "tool_use_id", fmt.Sprint("call_", j),
					"content", []any{obj{"type", "text", "text", r}}})
			}
		}
		if i == len(c.turns)-1 {
			blocks[len(blocks)-1] = append(blocks[len(blocks)-1], "cache_control", obj{"type", "ephemeral"})
		}
		role := t.role
		if role == "tool" {
			role = "user"
		}
		msgs = append(msgs, obj{"role", role, "content", blocks})
	}
	body := obj{"model", "m", "max_tokens", 1024}
	if c.system != "" {
		body = append(body, "system", []any{obj{"type", "text", "text", c.system, "cache_control", obj{"type", "ephemeral"}}})
	}
	body = append(body, "messages", msgs)
	var tools []any
	for _, t := range c.tools {
		tools = append(tools, obj{"name", t.name, "description", t.description, "input_schema", json.RawMessage(t.schema)})
	}
	if tools != nil {
		body = append(body, "tools", tools)
	}
	return mustJSON(body)
}

// mustJSON encodes v as the SDKs do: no HTML escaping.
func mustJSON(v any) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSpace(b.Bytes())
}

var words = strings.Fields(`the a of to and in that is for on with as it be this by are or from
at an not have file function return value error request model server block cache target "quoted"
line\n path/to/file.go tab\t {brace} <tag> café 😀 über`)

// prose returns n bytes or so of text, deterministic for a seed, with the escapes real prompts
// carry (newlines, quotes, non-ASCII).
func prose(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			if r.IntN(12) == 0 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		w := words[r.IntN(len(words))]
		w = strings.ReplaceAll(strings.ReplaceAll(w, `\n`, "\n"), `\t`, "\t")
		b.WriteString(w)
	}
	return b.String()
}

var weatherSchema = `{"type": "object", "properties": {"city": {"type": "string", "description": "a city"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}`

// agentConv is a tool-using conversation of the given number of rounds; each round is a
// user message, an assistant answer with a tool call, the tool's result and an answer.
func agentConv(seed uint64, rounds, textLen int) conv {
	return agentConvOf(seed, rounds, textLen, prose, prose)
}

// agentConvOf is agentConv with its texts and tool results written by the given functions.
func agentConvOf(seed uint64, rounds, textLen int, text, result func(uint64, int) string) conv {
	c := conv{
		system: text(seed, 3*textLen),
		tools: []convTool{
			{"get_weather", text(seed+1, textLen/2), weatherSchema},
			{"read_file", text(seed+2, textLen/2), `{"type":"object","properties":{"path":{"type":"string"}}}`},
		},
	}
	for i := range rounds {
		s := seed + 10*uint64(i+1)
		c.turns = append(c.turns,
			turn{role: "user", text: text(s, textLen)},
			turn{role: "assistant", text: text(s+1, textLen/4), calls: []convCall{
				{id: fmt.Sprint("call_", i), name: "get_weather", args: fmt.Sprintf(`{"city": %q, "unit": "celsius"}`, text(s+2, 10))}}},
			turn{role: "tool", results: []string{result(s+3, textLen)}},
			turn{role: "assistant", text: text(s+4, textLen)},
		)
	}
	return c
}

// canonical parses body with a fresh Parser and returns its canonical text and prompt.
func canonical(t testing.TB, body []byte) ([]byte, Prompt) {
	t.Helper()
	var p Parser
	var text []byte
	p.c.text = &text
	var pr Prompt
	if err := p.Parse(body, &pr); err != nil {
		t.Fatalf("parse %s: %v", body, err)
	}
	return text, pr
}

// chainOf hashes text the way the package documentation says, independently of chain.
func chainOf(text []byte) []uint64 {
	var out []uint64
	for end := BlockSize; end <= len(text) && len(out) < MaxBlocks; end += BlockSize {
		out = append(out, xxhash.Sum64(text[:end]))
	}
	return out
}

// randomBlocks is a prompt of n blocks sharing nothing with other seeds.
func randomBlocks(seed uint64, n int) []uint64 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]uint64, n)
	for i := range out {
		out[i] = r.Uint64()
	}
	return out
}
