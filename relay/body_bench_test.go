package relay

import (
	"fmt"
	"strings"
	"testing"

	"modelrelay/relay/prefix"
)

// bodyWork says which of the request path's body stages a request needs.
type bodyWork struct {
	prompt   bool // cache-aware placement reads its prompt blocks
	ask      bool // a key's accounting asks an OpenAI stream for its usage
	fallback bool // the chain moves on to another model once
}

// bodyPass is what admitCall (and one fallback) do with a body, stage by stage: read
// it, strip x_pool_options, read its prompt, ask for usage, retarget it.
func bodyPass(body []byte, w bodyWork, ps *prefix.Parser, dst *prefix.Prompt) ([]byte, error) {
	v, err := parseInference(body)
	if err != nil {
		return nil, err
	}
	sent, at, _ := v.rewrite(body, w.ask && v.Stream)
	if w.prompt {
		ps.ParseTop(body, &v.prompt, dst)
	}
	if w.fallback {
		if sent, _, err = withModel(sent, at, "fallback-model"); err != nil {
			return nil, err
		}
	}
	return sent, nil
}

// benchConversation is a chat body of about size bytes: a system prompt, a tool, and turns
// of prose with a quotation now and then.
func benchConversation(size int, extra string) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a careful assistant. Answer briefly."}`)
	words := strings.Fields("the request model server block cache target \"conversation\" message answer question system user tool of to and in that is for")
	for turn := 0; b.Len() < size; turn++ {
		role := "user"
		if turn%2 == 1 {
			role = "assistant"
		}
		b.WriteString(`,{"role":"` + role + `","content":"`)
		for i := range 120 {
			w := words[(turn*7+i*3)%len(words)]
			b.WriteString(strings.ReplaceAll(w, `"`, `\"`))
			b.WriteByte(' ')
		}
		b.WriteString(`"}`)
	}
	b.WriteString(`],"tools":[{"type":"function","function":{"name":"read_file","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}],"temperature":0.2,"max_tokens":512` + extra + `}`)
	return []byte(b.String())
}

// BenchmarkRelayBody is the cost of the request path's body stages for one request: the
// stages a plain request needs, then those of requests that need more of them.
func BenchmarkRelayBody(b *testing.B) {
	small := `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"` +
		strings.Repeat("hello world ", 80) + `"}],"temperature":0.7,"max_tokens":256`
	options := `,"x_pool_options":{"fallback_models":["b"],"priority":"high"}`
	cases := []struct {
		name string
		body []byte
		work bodyWork
	}{
		{"plain", []byte(small + `}`), bodyWork{}},
		{"options", []byte(small + options + `}`), bodyWork{}},
		{"usage", []byte(small + `,"stream":true}`), bodyWork{ask: true}},
		{"fallback", []byte(small + `}`), bodyWork{fallback: true}},
		{"prompt/16KB", benchConversation(16<<10, ""), bodyWork{prompt: true}},
		{"all/16KB", benchConversation(16<<10, `,"stream":true`+options), bodyWork{prompt: true, ask: true, fallback: true}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var ps prefix.Parser
			var dst prefix.Prompt
			if _, err := bodyPass(c.body, c.work, &ps, &dst); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				bodyPass(c.body, c.work, &ps, &dst)
			}
		})
	}
}

func TestBodyPassBench(t *testing.T) {
	var ps prefix.Parser
	var dst prefix.Prompt
	body := benchConversation(16<<10, `,"stream":true,"x_pool_options":{"priority":"low"}`)
	out, err := bodyPass(body, bodyWork{prompt: true, ask: true, fallback: true}, &ps, &dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(dst.Blocks) == 0 || strings.Contains(string(out), "x_pool_options") || !strings.Contains(string(out), `"include_usage":true`) ||
		!strings.Contains(string(out), `"model":"fallback-model"`) || strings.Contains(string(out), "gpt-4o-mini") {
		t.Fatalf("blocks %d, body %s", len(dst.Blocks), fmt.Sprint(string(out[:200])))
	}
}
