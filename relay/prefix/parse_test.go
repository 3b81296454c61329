package prefix

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

// The canonical text, spelled out: this is the definition the blocks are hashed over.
func TestCanonicalText(t *testing.T) {
	for _, tc := range canonicalCases {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := canonical(t, []byte(tc.body))
			if string(got) != tc.want {
				t.Errorf("canonical text\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

var canonicalCases = []struct {
	name, body, want string
}{
	{"openai chat", `{"model":"m","messages":[
			{"role":"system","content":"Be brief."},
			{"role":"developer","content":[{"type":"text","text":"Use tools."}]},
			{"role":"user","content":"Weather?"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get","arguments":"{\"city\": \"Paris\"}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"18C"},
			{"role":"assistant","content":"It is 18C."}],
			"tools":[{"type":"function","function":{"name":"get","description":"Weather.","parameters":{"type": "object"}}}]}`,
		"\x1esBe brief.\n\nUse tools.\x1etget\x1fWeather.\x1f{\"type\":\"object\"}\x1euWeather?\x1ecget\x1f{\"city\":\"Paris\"}\x1er18C\x1eaIt is 18C."},
	{"anthropic messages", `{"model":"m","max_tokens":9,
			"system":[{"type":"text","text":"Be brief."},{"type":"text","text":"Use tools.","cache_control":{"type":"ephemeral"}}],
			"tools":[{"name":"get","description":"Weather.","input_schema":{"type":"object"}}],
			"messages":[{"role":"user","content":"Weather?"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"tool_use","id":"c1","name":"get","input":{"city":"Paris"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"18C"}]}]},
			{"role":"assistant","content":[{"type":"text","text":"It is 18C."}]}]}`,
		"\x1esBe brief.\n\nUse tools.\x1etget\x1fWeather.\x1f{\"type\":\"object\"}\x1euWeather?\x1ecget\x1f{\"city\":\"Paris\"}\x1er18C\x1eaIt is 18C."},
	{"responses", `{"model":"m","instructions":"Be brief.","input":[
			{"role":"developer","content":"Use tools."},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"Weather?"}]},
			{"type":"reasoning","summary":[]},
			{"type":"function_call","call_id":"c1","name":"get","arguments":"{\"city\":\"Paris\"}"},
			{"type":"function_call_output","call_id":"c1","output":"18C"},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"It is 18C."}]}],
			"tools":[{"type":"function","name":"get","description":"Weather.","parameters":{"type":"object"}},{"type":"web_search_preview"}]}`,
		"\x1esBe brief.\n\nUse tools.\x1etget\x1fWeather.\x1f{\"type\":\"object\"}\x1euWeather?\x1ecget\x1f{\"city\":\"Paris\"}\x1er18C\x1eaIt is 18C."},
	{"responses input string", `{"model":"m","instructions":"Be brief.","input":"Weather?"}`, "\x1esBe brief.\x1euWeather?"},
	{"completions", `{"model":"m","prompt":"Once upon a time"}`, "\x1euOnce upon a time"},
	{"completions tokens", `{"model":"m","prompt":[1, 2, 3]}`, "\x1eu[1,2,3]"},
	{"tool without schema", `{"tools":[{"name":"t"}]}`, "\x1ett\x1f\x1f" + defaultSchema},
	{"error result", `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","is_error":true,"content":"boom"},{"type":"text","text":"go on"}]}]}`,
		"\x1erError: boom\x1eugo on"},
	{"empty texts write nothing", `{"messages":[{"role":"user","content":""},{"role":"assistant","content":[{"type":"text","text":""}]}]}`, ""},
	{"mid-conversation system stays in place", `{"messages":[{"role":"user","content":"a"},{"role":"system","content":"b"}],"tools":[{"name":"t","input_schema":{}}]}`,
		"\x1ett\x1f\x1f{}\x1eua\x1esb"},
	{"invalid arguments as sent", `{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{oops"}}]}]}`, "\x1ecf\x1f{oops"},
	{"empty arguments", `{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":" "}}]}]}`, "\x1ecf\x1f{}"},
	// Members arriving after what they change: what was written as read is put right.
	{"is_error after a result written as read", `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"is_error":true}]}]}`,
		"\x1erError: a\nb"},
	{"server tool known only at its end", `{"tools":[{"name":"web_search","description":"d","input_schema":{"a":1},"type":"web_search_20250305"},{"name":"t","description":"d","input_schema":{}}]}`,
		"\x1ett\x1fd\x1f{}"},
	{"function object after the outer fields", `{"tools":[{"name":"x","description":"y","parameters":{},"function":{"name":"f","description":"g","parameters":{"a":1}},"type":"function"}]}`,
		"\x1etf\x1fg\x1f{\"a\":1}"},
	{"item type known only at its end", `{"input":[{"role":"user","content":"hi","type":"function_call","name":"f","arguments":"{\"a\": 1}"}]}`,
		"\x1ecf\x1f{\"a\":1}"},
	{"a role after content still ends the leading system messages", `{"messages":[{"content":"s","role":"system"},{"content":"u","role":"user"},{"content":"s2","role":"system"}],"tools":[{"name":"t","description":"","input_schema":{}}]}`,
		"\x1ess\x1ett\x1f\x1f{}\x1euu\x1ess2"},
	{"escapes", `{"messages":[{"role":"user","content":"a\u00fc\ud83d\ude00\/\"\\\n\ud800x"},{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{\"q\":\"\\\"\\u00fc\\n\"}"}}]}]}`,
		"\x1eua\u00fc\U0001F600/\"\\\n\ufffdx\x1ecf\x1f{\"q\":\"\\\"\u00fc\n\"}"},
	{"mistyped fields are skipped", `{"system":7,"messages":[1,"x",{"role":"user","content":{"a":1}},null],"tools":"no","prompt":true}`, ""},
}

// The same conversation in either dialect gives the same canonical text, so the same blocks.
func TestDialectsAgree(t *testing.T) {
	long := jsonText(prose(1, 700))
	img := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
	pairs := []struct {
		name              string
		openAI, anthropic string
	}{
		{"system string vs text blocks",
			`{"messages":[{"role":"system","content":"` + long + `\n\nmore"},{"role":"user","content":"hi"}]}`,
			`{"system":[{"type":"text","text":"` + long + `"},{"type":"text","text":"more"}],"messages":[{"role":"user","content":"hi"}]}`},
		{"two system messages vs one system string",
			`{"messages":[{"role":"system","content":"` + long + `"},{"role":"developer","content":"more"},{"role":"user","content":"hi"}]}`,
			`{"system":"` + long + `\n\nmore","messages":[{"role":"user","content":"hi"}]}`},
		{"text parts vs text blocks",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"` + long + `"},{"type":"text","text":"two"}]}]}`,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"` + long + `"},{"type":"text","text":"two","cache_control":{"type":"ephemeral"}}]}]}`},
		{"images: data URL vs base64 source, URL vs url source",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"` + long + `"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + img + `"}},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]}]}`,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"` + long + `"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + img + `"}},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]}`},
		{"tool calls and results",
			`{"messages":[{"role":"user","content":"` + long + `"},
			{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"a","type":"function","function":{"name":"read","arguments":"{\"path\": \"/x\",\n \"n\": [1, 2]}"}},{"id":"b","type":"function","function":{"name":"ls","arguments":""}}]},
			{"role":"tool","tool_call_id":"a","content":"` + long + `"},{"role":"tool","tool_call_id":"b","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}]},
			{"role":"user","content":"thanks"}]}`,
			`{"messages":[{"role":"user","content":"` + long + `"},
			{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"/x","n":[1,2]}},{"type":"tool_use","id":"toolu_2","name":"ls","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"` + long + `"},{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}]},{"type":"text","text":"thanks"}]}]}`},
		{"tools: parameters vs input_schema, whitespace and all",
			`{"tools":[{"type":"function","function":{"name":"get","description":"` + long + `","parameters":{ "type" : "object", "properties": {"a": {"type": "string"}} }}}],"messages":[{"role":"user","content":"hi"}]}`,
			`{"tools":[{"name":"get","description":"` + long + `","input_schema":{"type":"object","properties":{"a":{"type":"string"}}}},{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`},
		{"responses API vs anthropic",
			`{"instructions":"` + long + `","input":[{"role":"user","content":"hi"},{"type":"function_call","name":"get","arguments":"{}"},{"type":"function_call_output","output":"` + long + `"}]}`,
			`{"system":"` + long + `","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"get","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"` + long + `"}]}]}`},
	}
	for _, tc := range pairs {
		t.Run(tc.name, func(t *testing.T) {
			a, pa := canonical(t, []byte(tc.openAI))
			b, pb := canonical(t, []byte(tc.anthropic))
			if !bytes.Equal(a, b) {
				t.Fatalf("canonical texts differ\nopenai    %q\nanthropic %q", a, b)
			}
			if len(pa.Blocks) == 0 || !slices.Equal(pa.Blocks, pb.Blocks) {
				t.Fatalf("blocks differ or none: %x vs %x", pa.Blocks, pb.Blocks)
			}
		})
	}
	for _, rounds := range []int{1, 3, 8} {
		c := agentConv(uint64(rounds), rounds, 600)
		a, pa := canonical(t, c.openAI())
		b, pb := canonical(t, c.anthropic())
		if !bytes.Equal(a, b) {
			t.Fatalf("%d rounds: canonical texts differ\nopenai    %q\nanthropic %q", rounds, a, b)
		}
		if len(pa.Blocks) < 8 || !slices.Equal(pa.Blocks, pb.Blocks) {
			t.Fatalf("%d rounds: %d vs %d blocks", rounds, len(pa.Blocks), len(pb.Blocks))
		}
	}
}

// The blocks are the chained hashes of the canonical text's full blocks, and nothing else.
func TestBlocksChainTheCanonicalText(t *testing.T) {
	for _, n := range []int{0, 1, 3, 20, 200} {
		c := agentConv(uint64(n), n, 500)
		for _, body := range [][]byte{c.openAI(), c.anthropic()} {
			text, p := canonical(t, body)
			want := chainOf(text)
			if !slices.Equal(p.Blocks, want) {
				t.Fatalf("%d rounds: %d blocks, want %d", n, len(p.Blocks), len(want))
			}
			if full := min(len(text)/BlockSize, MaxBlocks); len(p.Blocks) != full {
				t.Fatalf("%d rounds: %d blocks for %d bytes of text", n, len(p.Blocks), len(text))
			}
		}
	}
	if _, p := canonical(t, []byte(`{"messages":[{"role":"user","content":"`+strings.Repeat("x", BlockSize-3)+`"}]}`)); len(p.Blocks) != 0 {
		t.Fatalf("a prompt shorter than a block has %d blocks", len(p.Blocks))
	}
	if _, p := canonical(t, []byte(`{"messages":[{"role":"user","content":"`+strings.Repeat("x", BlockSize-2)+`"}]}`)); len(p.Blocks) != 1 {
		t.Fatalf("a prompt of exactly one block has %d blocks", len(p.Blocks))
	}
}

// A conversation's next turn shares every full block of the previous turn's prompt.
func TestNextTurnSharesBlocks(t *testing.T) {
	full := agentConv(7, 12, 900)
	for _, dialect := range []string{"openai", "anthropic"} {
		var prev Prompt
		var prevText []byte
		for n := 1; n <= len(full.turns); n++ {
			c := full
			c.turns = full.turns[:n]
			body := c.openAI()
			if dialect == "anthropic" {
				body = c.anthropic()
			}
			text, p := canonical(t, body)
			if !bytes.HasPrefix(text, prevText) {
				t.Fatalf("%s turn %d: the canonical text does not extend the previous turn's", dialect, n)
			}
			if len(prev.Blocks) == MaxBlocks {
				if !slices.Equal(p.Blocks, prev.Blocks) {
					t.Fatalf("%s turn %d: past MaxBlocks the blocks changed", dialect, n)
				}
			} else if len(p.Blocks) <= len(prev.Blocks) && len(text)/BlockSize > len(prev.Blocks) {
				t.Fatalf("%s turn %d: no new block", dialect, n)
			}
			if !slices.Equal(p.Blocks[:len(prev.Blocks)], prev.Blocks) {
				t.Fatalf("%s turn %d: blocks of the previous turn not shared", dialect, n)
			}
			prev, prevText = p, text
		}
		if len(prev.Blocks) < 100 {
			t.Fatalf("%s: only %d blocks at the end", dialect, len(prev.Blocks))
		}
	}
}

// A different system prompt changes the first block, and so every block after it.
func TestSystemPromptDecidesFirstBlock(t *testing.T) {
	a := agentConv(3, 2, 600)
	b := a
	b.system = "You are a pirate. " + a.system
	_, pa := canonical(t, a.anthropic())
	_, pb := canonical(t, b.anthropic())
	for i := range min(len(pa.Blocks), len(pb.Blocks)) {
		if pa.Blocks[i] == pb.Blocks[i] {
			t.Fatalf("block %d shared by different system prompts", i)
		}
	}
	// A change late in the system prompt keeps the blocks before it.
	c := a
	c.system = a.system[:1000] + "!" + a.system[1001:]
	_, pc := canonical(t, c.openAI())
	if !slices.Equal(pa.Blocks[:3], pc.Blocks[:3]) || pa.Blocks[3] == pc.Blocks[3] {
		t.Fatalf("a change at byte ~1000 should keep blocks 0-2 and change block 3")
	}
}

func TestSessionKey(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"prompt_cache_key":"pck","user":"u","metadata":{"user_id":"md"}}`, "pck"},
		{`{"prompt_cache_key":"","user":"u","metadata":{"user_id":"md"}}`, "u"},
		{`{"user":"u","metadata":{"user_id":"md"}}`, "u"},
		{`{"user":7,"metadata":{"user_id":"md"}}`, "md"},
		{`{"metadata":{"user_id":"md"},"messages":[]}`, "md"},
		{`{"metadata":{"user_id":3}}`, ""},
		{`{"metadata":"x"}`, ""},
		{`{}`, ""},
	} {
		_, p := canonical(t, []byte(tc.body))
		if p.Session != tc.want {
			t.Errorf("%s: session %q, want %q", tc.body, p.Session, tc.want)
		}
	}
}

func TestParseRejectsNonObjects(t *testing.T) {
	var p Parser
	dst := Prompt{Blocks: []uint64{1, 2}, Session: "old"}
	for _, body := range []string{``, `[]`, `"text"`, `12`, `null`, `{"a":`, `{} x`, "\xff"} {
		err := p.Parse([]byte(body), &dst)
		if err == nil {
			t.Errorf("%q: no error", body)
		}
		if len(dst.Blocks) != 0 || dst.Session != "" {
			t.Errorf("%q: dst not emptied: %+v", body, dst)
		}
	}
	if err := p.Parse([]byte(`[1]`), &dst); !errors.Is(err, ErrNotObject) {
		t.Errorf("array: %v, want ErrNotObject", err)
	}
	if err := p.Parse([]byte(` {"model":"m"} `), &dst); err != nil || len(dst.Blocks) != 0 {
		t.Errorf("empty prompt: %v %v", err, dst.Blocks)
	}
}

// A huge prompt stops at MaxBlocks, and the blocks are those of its first 64 KiB.
func TestMaxBlocks(t *testing.T) {
	c := agentConv(9, 200, 1000)
	text, p := canonical(t, c.openAI())
	if len(text) < MaxBlocks*BlockSize {
		t.Fatalf("test prompt too short: %d", len(text))
	}
	if len(p.Blocks) != MaxBlocks {
		t.Fatalf("%d blocks, want %d", len(p.Blocks), MaxBlocks)
	}
	if !slices.Equal(p.Blocks, chainOf(text[:MaxBlocks*BlockSize])) {
		t.Fatal("blocks are not those of the first MaxBlocks*BlockSize bytes")
	}
}

// One Parser parses body after body without one leaking into the next, and reuses dst.
func TestParserReuse(t *testing.T) {
	bodies := [][]byte{
		agentConv(1, 4, 700).openAI(),
		[]byte(`{"prompt_cache_key":"k","messages":[{"role":"user","content":"short"}]}`),
		agentConv(2, 30, 500).anthropic(),
		[]byte(`not json`),
		agentConv(1, 4, 700).openAI(),
	}
	var p Parser
	var dst Prompt
	for i, body := range bodies {
		var fresh Parser
		var want Prompt
		wantErr := fresh.Parse(body, &want)
		gotErr := p.Parse(body, &dst)
		if (gotErr == nil) != (wantErr == nil) || !slices.Equal(dst.Blocks, want.Blocks) || dst.Session != want.Session {
			t.Fatalf("body %d: reused parser gives %v %+v, fresh %v %+v", i, gotErr, dst, wantErr, want)
		}
	}
	before := &dst.Blocks[:1][0]
	p.Parse(bodies[0], &dst)
	if &dst.Blocks[0] != before {
		t.Fatal("dst.Blocks was reallocated although it had room")
	}
}

// Parsing allocates nothing once the Parser and the Prompt are warm (a session key, when
// present, costs its string).
func TestParseAllocs(t *testing.T) {
	for name, body := range map[string][]byte{
		"openai":    agentConv(5, 2, 400).openAI(),
		"anthropic": agentConv(5, 2, 400).anthropic(),
		"huge":      agentConv(5, 100, 1000).anthropic(),
	} {
		var p Parser
		var dst Prompt
		p.Parse(body, &dst)
		if n := testing.AllocsPerRun(100, func() { p.Parse(body, &dst) }); n != 0 {
			t.Errorf("%s: %v allocations per parse", name, n)
		}
	}
}

// jsonText is s escaped for use inside a JSON string literal.
func jsonText(s string) string {
	b := mustJSON(s)
	return string(b[1 : len(b)-1])
}
