package main

// --demo from outside: the real binary started as the README's first command starts it, then
// the README's curl, plain HTTP in both API families, and the official openai and
// @anthropic-ai/sdk Node packages, streaming and not, answered by the built-in demo model.
// `make deps` installs Node and the packages.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demoAnswer is the demo model's answer to "Hello!" (6 characters), 31 words, one token each.
const (
	demoAnswer       = "Hello from the demo model behind modelrelay. Your last message was 6 characters long. Add a backend or a worker for a real model, and the same request will reach it."
	demoAnswerTokens = 31
)

func TestConfigDemo(t *testing.T) {
	file := writeConfig(t, "demo: true\n")
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want bool
	}{
		{"default", nil, nil, false},
		{"flag", []string{"--demo"}, nil, true},
		{"flag false beats env", []string{"--demo=false"}, map[string]string{"MODELRELAY_DEMO": "true"}, false},
		{"env", nil, map[string]string{"MODELRELAY_DEMO": "true"}, true},
		{"file", nil, map[string]string{"MODELRELAY_CONFIG": file}, true},
	}
	for _, tc := range cases {
		cfg, warnings, err := LoadConfig(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
		if err != nil || cfg.Demo != tc.want {
			t.Errorf("%s: Demo %v, err %v (warnings %q); want %v", tc.name, cfg.Demo, err, warnings, tc.want)
		}
	}
	_, _, err := LoadConfig(nil, func(k string) string { return map[string]string{"MODELRELAY_DEMO": "maybe"}[k] }, io.Discard)
	if err == nil || err.Error() != `config: demo: invalid boolean "maybe" (want true or false)` {
		t.Errorf("MODELRELAY_DEMO=maybe: %v", err)
	}
}

// TestDemoBackend: --demo adds one ordinary static backend on a loopback port that answers,
// refuses a configured backend of the same name, and stops.
func TestDemoBackend(t *testing.T) {
	cfg, _, err := LoadConfig([]string{"--demo"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	d, err := startDemo(&cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer d.stop()
	if len(cfg.Backends) != 1 {
		t.Fatalf("backends %v", cfg.Backends)
	}
	b := cfg.Backends[0]
	if b.Name != "demo" || b.URL != d.url || !strings.HasPrefix(b.URL, "http://127.0.0.1:") ||
		strings.Join(b.Models, ",") != "demo" || strings.Join(b.Dialects, ",") != "openai,anthropic" || b.Weight != 1 {
		t.Errorf("demo backend %v", b)
	}
	var p problems
	checkBackends(cfg.Backends, &p)
	if err := p.err(); err != nil {
		t.Errorf("the demo backend does not validate: %v", err)
	}
	resp, err := http.Get(d.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"id":"demo"`) {
		t.Errorf("the demo server's /v1/models: %d %s", resp.StatusCode, body)
	}

	taken := Config{Backends: []BackendConfig{{Name: "demo", URL: "http://127.0.0.1:1"}}}
	if _, err := startDemo(&taken, log); err == nil || !strings.Contains(err.Error(), `backends[0] is already named "demo"`) {
		t.Errorf("a configured backend named demo: %v", err)
	}
	if len(taken.Backends) != 1 {
		t.Errorf("a refused demo changed the backends: %v", taken.Backends)
	}
}

func TestDemoCurlDialsLoopbackForWildcards(t *testing.T) {
	for listen, want := range map[string]string{"0.0.0.0:8080": "127.0.0.1:8080", "[::]:9": "[::1]:9", "10.1.2.3:80": "10.1.2.3:80"} {
		addr, _ := net.ResolveTCPAddr("tcp", listen)
		if got := dialable(addr); got != want {
			t.Errorf("%s: %s, want %s", listen, got, want)
		}
	}
	cfg := Config{RequireAPIKeys: true}
	addr, _ := net.ResolveTCPAddr("tcp", "127.0.0.1:8080")
	if got := demoCurl(cfg, addr); !strings.Contains(got, "-H 'Authorization: Bearer YOUR_KEY'") {
		t.Errorf("with keys required, the curl has no key: %s", got)
	}
}

// startDemoBinary runs the real binary as the README's first command does: --demo and nothing
// else but a free port. At cleanup it gets SIGTERM and must exit 0.
func startDemoBinary(t *testing.T) (string, *lockedBuffer) {
	t.Helper()
	bin := serverBinary(t)
	out := &lockedBuffer{}
	addr, cmd, exited := launchBinary(t, out, func(addr string) (*exec.Cmd, chan error) {
		return runBinary(t, bin, nil, addr, nil, out, "--demo", "--listen", addr)
	})
	// Runs before launchBinary's cleanup, which then finds the process gone.
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil || !strings.Contains(out.String(), "shutdown complete") {
				t.Errorf("after SIGTERM: %v", err)
			}
		case <-time.After(30 * time.Second): // only a hang gets here
			cmd.Process.Kill()
			<-exited
			t.Errorf("the server did not exit within 30 s of SIGTERM")
		}
	})
	return addr, out
}

func TestE2EDemoAnswersCurlAndSDKs(t *testing.T) {
	t.Parallel()
	addr, out := startDemoBinary(t)
	relayURL := "http://" + addr

	t.Run("log says how to call it", func(t *testing.T) {
		want := "curl -s " + relayURL + "/v1/chat/completions -H 'Content-Type: application/json' " +
			`-d '{"model":"demo","messages":[{"role":"user","content":"Hello!"}]}'`
		// The log reaches the test through a pipe: on a busy machine, after the port answers.
		re := regexp.MustCompile(`level=INFO msg="demo model is up[^"]*" backend=http://127\.0\.0\.1:\d+ curl=("(?:[^"\\]|\\.)*")`)
		m := re.FindStringSubmatch(out.String())
		for deadline := time.Now().Add(10 * time.Second); m == nil && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			m = re.FindStringSubmatch(out.String())
		}
		if m == nil {
			t.Fatalf("no INFO line with the curl in the log:\n%s", out.String())
		}
		if got, err := strconv.Unquote(m[1]); err != nil || got != want {
			t.Fatalf("logged curl %s, want %s", m[1], want)
		}
		if _, err := exec.LookPath("curl"); err != nil {
			t.Logf("no curl here: its request is sent by the next subtest")
			return
		}
		b, err := exec.Command("sh", "-c", want).Output()
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		checkDemoChat(t, b)
	})

	t.Run("models", func(t *testing.T) {
		resp, err := http.Get(relayURL + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var list struct{ Data []struct{ ID string } }
		json.NewDecoder(resp.Body).Decode(&list)
		if len(list.Data) != 1 || list.Data[0].ID != "demo" {
			t.Errorf("/v1/models: %+v", list)
		}
	})

	t.Run("chat", func(t *testing.T) {
		st, _, body := post(t, addr, "/v1/chat/completions", nil, `{"model":"demo","messages":[{"role":"user","content":"Hello!"}]}`)
		if st != 200 {
			t.Fatalf("%d %s", st, body)
		}
		checkDemoChat(t, body)
	})

	t.Run("chat stream", func(t *testing.T) {
		st, h, body := post(t, addr, "/v1/chat/completions", nil,
			`{"model":"demo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hello!"}]}`)
		if st != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%d %v %s", st, h, body)
		}
		var text strings.Builder
		var usage map[string]int
		var done bool
		for _, data := range sseData(body) {
			if data == "[DONE]" {
				done = true
				continue
			}
			var c struct {
				Choices []struct{ Delta struct{ Content string } }
				Usage   map[string]int
			}
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatalf("chunk %s: %v", data, err)
			}
			if c.Usage != nil {
				usage = c.Usage
			}
			for _, ch := range c.Choices {
				text.WriteString(ch.Delta.Content)
			}
		}
		if !done || text.String() != demoAnswer || usage["completion_tokens"] != demoAnswerTokens || usage["prompt_tokens"] != 1 {
			t.Errorf("streamed %q, usage %v, [DONE] %v", text.String(), usage, done)
		}
	})

	t.Run("messages and count_tokens", func(t *testing.T) {
		msgs := `"messages":[{"role":"user","content":"Hello!"}]`
		st, _, body := post(t, addr, "/v1/messages", http.Header{"Anthropic-Version": {"2023-06-01"}}, `{"model":"demo","max_tokens":256,`+msgs+`}`)
		var m struct {
			Content []struct{ Text string }
			Usage   map[string]int
		}
		if st != 200 || json.Unmarshal(body, &m) != nil || len(m.Content) != 1 || m.Content[0].Text != demoAnswer ||
			m.Usage["output_tokens"] != demoAnswerTokens {
			t.Errorf("/v1/messages: %d %s", st, body)
		}
		st, _, body = post(t, addr, "/v1/messages/count_tokens", nil, `{"model":"demo",`+msgs+`}`)
		if st != 200 || !strings.Contains(string(body), `"input_tokens":1`) {
			t.Errorf("count_tokens: %d %s", st, body)
		}
	})

	t.Run("openai sdk", func(t *testing.T) {
		summary := runNodeInline(t, openAIDemoScript, map[string]string{"RELAY_URL": relayURL, "WANT": demoAnswer})
		t.Logf("openai: %v", summary)
	})

	t.Run("anthropic sdk", func(t *testing.T) {
		summary := runNodeInline(t, anthropicDemoScript, map[string]string{"RELAY_URL": relayURL, "WANT": demoAnswer})
		t.Logf("anthropic: %v", summary)
	})

	// An ordinary static backend in every other respect: a target in /health's pool and
	// the demo's model in the token metrics.
	t.Run("health and metrics", func(t *testing.T) {
		resp, err := http.Get(relayURL + "/health")
		if err != nil {
			t.Fatal(err)
		}
		var h struct {
			Pools map[string]struct {
				Targets []struct {
					ID, Kind string
					Healthy  bool
				}
			}
		}
		json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if ts := h.Pools["local"].Targets; len(ts) != 1 || ts[0].ID != "demo" || ts[0].Kind != "upstream" || !ts[0].Healthy {
			t.Errorf("/health pools %+v", h.Pools)
		}
		resp, err = http.Get(relayURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`gen_ai_request_model="demo",gen_ai_token_type="output"`, `gen_ai_server_time_to_first_token_seconds_count{gen_ai_operation_name="chat",gen_ai_request_model="demo"}`} {
			if !bytes.Contains(metrics, []byte(want)) {
				t.Errorf("/metrics has no %s", want)
			}
		}
	})
}

func checkDemoChat(t *testing.T, body []byte) {
	t.Helper()
	var c struct {
		Model   string
		Choices []struct {
			Message struct{ Content string }
			Finish  string `json:"finish_reason"`
		}
		Usage map[string]int
	}
	if err := json.Unmarshal(body, &c); err != nil || c.Model != "demo" || len(c.Choices) != 1 ||
		c.Choices[0].Message.Content != demoAnswer || c.Choices[0].Finish != "stop" ||
		c.Usage["completion_tokens"] != demoAnswerTokens || c.Usage["total_tokens"] != demoAnswerTokens+1 {
		t.Errorf("chat answer %s", body)
	}
}

// sseData is the data of each event of an SSE body.
func sseData(body []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, data)
		}
	}
	return out
}

// runNodeInline runs an ES module script with testdata/clients' packages and returns the JSON
// summary it prints last.
func runNodeInline(t *testing.T, script string, env map[string]string) map[string]any {
	t.Helper()
	dir := clientsDir(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node not found: run `make deps` (it installs Node and the client packages)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--input-type=module", "-e", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) && ctx.Err() == nil {
			t.Fatalf("node: %v", err)
		}
		t.Fatalf("node: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var summary map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &summary); err != nil {
		t.Fatalf("node: the last line is not the summary: %v\n%s", err, stdout.String())
	}
	return summary
}

// The README's SDK calls, checked: the answer, whole and streamed, with usage.
const openAIDemoScript = `
import OpenAI from "openai";
import assert from "node:assert/strict";

const client = new OpenAI({ baseURL: process.env.RELAY_URL + "/v1", apiKey: "unused", maxRetries: 0 });
const want = process.env.WANT;

const models = await client.models.list();
assert.deepEqual(models.data.map((m) => m.id), ["demo"]);

const reply = await client.chat.completions.create({
  model: "demo", messages: [{ role: "user", content: "Hello!" }],
});
assert.equal(reply.choices[0].message.content, want);
assert.equal(reply.choices[0].finish_reason, "stop");
assert.equal(reply.usage.completion_tokens, 31);

const stream = await client.chat.completions.create({
  model: "demo", messages: [{ role: "user", content: "Hello!" }],
  stream: true, stream_options: { include_usage: true },
});
let text = "", chunks = 0, usage = null;
for await (const chunk of stream) {
  chunks++;
  if (chunk.usage) usage = chunk.usage;
  text += chunk.choices[0]?.delta?.content ?? "";
}
assert.equal(text, want);
assert.ok(chunks > 31, chunks + " chunks");
assert.equal(usage.completion_tokens, 31);
console.log(JSON.stringify({ plain: reply.choices[0].message.content, chunks, usage }));
`

const anthropicDemoScript = `
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";

const client = new Anthropic({ baseURL: process.env.RELAY_URL, apiKey: "unused", maxRetries: 0 });
const want = process.env.WANT;

const message = await client.messages.create({
  model: "demo", max_tokens: 256, messages: [{ role: "user", content: "Hello!" }],
});
assert.equal(message.content[0].text, want);
assert.equal(message.stop_reason, "end_turn");
assert.equal(message.usage.output_tokens, 31);

const events = [];
const stream = client.messages.stream({
  model: "demo", max_tokens: 256, messages: [{ role: "user", content: "Hello!" }],
});
stream.on("streamEvent", (e) => events.push(e.type));
let text = "";
stream.on("text", (delta) => { text += delta; });
const final = await stream.finalMessage();
assert.equal(text, want);
assert.equal(final.content[0].text, want);
assert.equal(final.usage.output_tokens, 31);
assert.equal(events.filter((t) => t === "content_block_delta").length, 31);
assert.deepEqual(events.filter((t) => t !== "content_block_delta"),
  ["message_start", "content_block_start", "content_block_stop", "message_delta", "message_stop"]);
console.log(JSON.stringify({ plain: message.content[0].text, events: events.length, usage: final.usage }));
`
