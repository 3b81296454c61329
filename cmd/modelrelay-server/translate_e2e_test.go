package main

// Dialect translation from outside: the official Node SDKs and Claude Code, unchanged, through
// the real server binary, to fake model servers that speak only the other API family — behind a
// static backend and behind the real worker daemon. `make deps` installs the npm packages.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clientsDir is testdata/clients with its npm packages installed.
func clientsDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("../../testdata/clients")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@anthropic-ai", "sdk")); err != nil {
		t.Fatalf("npm packages missing in %s: run `make deps` (it installs Node and the client packages)", dir)
	}
	return dir
}

// startStandalone runs the real binary in standalone mode with a YAML config and returns its
// address once it listens.
func startStandalone(t testing.TB, config string) string {
	t.Helper()
	e := &e2eEnv{t: t}
	startBinary(t, e, map[string]string{"MODELRELAY_CONFIG": writeConfig(t, config)})
	return e.addr
}

// runNode runs a script from testdata/clients and returns the last line it printed.
func runNode(t testing.TB, script string, env map[string]string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = clientsDir(t)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s %v: %v\nstdout:\n%s\nstderr:\n%s", script, env, err, out.String(), errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var summary map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &summary); err != nil {
		t.Fatalf("node %s: last line is not the summary: %v\n%s", script, err, out.String())
	}
	return summary
}

// post sends a JSON body to the relay and returns the answer.
func post(t testing.TB, addr, path string, header http.Header, body string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header, buf.Bytes()
}

// waitModel waits until the relay serves model (a relay worker has registered it).
func waitModel(t testing.TB, addr, model string) {
	t.Helper()
	eventually(t, 20*time.Second, model+" served", func() (bool, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/models", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		var list struct{ Data []struct{ ID string } }
		json.NewDecoder(resp.Body).Decode(&list)
		for _, m := range list.Data {
			if m.ID == model {
				return true, ""
			}
		}
		return false, fmt.Sprint(list)
	})
}

// fakeTarget is a fake model server and the model the relay serves it as.
type fakeTarget struct {
	model string
	fake  *fakeModel
}

// twoTargets runs the real binary with two fakes of one family: a static backend (serving
// static-m, with the given dialects line, "" = auto) and one behind the real worker daemon
// (worker-m, always auto).
func twoTargets(t *testing.T, family, dialects string) (string, []fakeTarget) {
	static, behindWorker := newFakeModel(t, family), newFakeModel(t, family)
	addr := startStandalone(t, fmt.Sprintf("worker_secret: tr-secret\nbackends:\n  - name: static\n    url: %s\n    models: [static-m]\n%s",
		static.url, dialects))
	startWorkerDaemon(t, addr, "tr-secret", behindWorker.url, "worker-m")
	waitModel(t, addr, "worker-m")
	return addr, []fakeTarget{{"static-m", static}, {"worker-m", behindWorker}}
}

// runSDK runs an SDK script against the relay at addr for tc's model and returns the calls
// its fake got on path (the script makes at least seven).
func (tc fakeTarget) runSDK(t *testing.T, script, addr, path string) []fakeCall {
	t.Helper()
	summary := runNode(t, script, map[string]string{"RELAY_URL": "http://" + addr, "MODEL": tc.model})
	t.Logf("%s: %v", tc.model, summary)
	calls := tc.fake.callsTo(path)
	if len(calls) < 7 {
		t.Fatalf("%s: the fake got %d calls on %s", tc.model, len(calls), path)
	}
	return calls
}

func TestE2EAnthropicSDKOnOpenAIOnlyTargets(t *testing.T) {
	t.Parallel()
	addr, targets := twoTargets(t, "openai", "    dialects: [openai]\n")
	static, behindWorker := targets[0].fake, targets[1].fake
	static.tokenize.Store(true)

	for _, tc := range targets {
		calls := tc.runSDK(t, "anthropic_sdk.mjs", addr, "/v1/chat/completions")
		for _, c := range calls {
			if got := c.Header.Get("Authorization"); got != "Bearer sk-ant-test" {
				t.Errorf("%s: the key reached the OpenAI target as Authorization %q", tc.model, got)
			}
			for _, name := range []string{"X-Api-Key", "Anthropic-Version"} {
				if c.Header.Get(name) != "" {
					t.Errorf("%s: %s reached the OpenAI target", tc.model, name)
				}
			}
			if stream, _ := c.Body["stream"].(bool); stream {
				if so, _ := c.Body["stream_options"].(map[string]any); so["include_usage"] != true {
					t.Errorf("%s: a translated stream did not ask for usage: %v", tc.model, c.Body)
				}
			}
		}
		first := calls[0].Body["messages"].([]any)[0].(map[string]any)
		if first["role"] != "system" || first["content"] != "Be brief." {
			t.Errorf("%s: system prompt became %v", tc.model, first)
		}
		var sawTool, sawImage bool
		for _, c := range calls {
			for _, m := range c.Body["messages"].([]any) {
				m := m.(map[string]any)
				if m["role"] == "tool" && strings.HasPrefix(fmt.Sprint(m["tool_call_id"]), "call_weather_1") && m["content"] == "18 degrees and sunny" {
					sawTool = true
				}
				if _, image := userContent(m); strings.HasPrefix(image, "image/png") {
					sawImage = true
				}
			}
		}
		if !sawTool || !sawImage {
			t.Errorf("%s: tool result as a tool message %v, image as image_url %v", tc.model, sawTool, sawImage)
		}
	}
	// The static backend is configured OpenAI-only: nothing untranslated ever reached it. The
	// worker's target is learned: one probe of /v1/messages, refused, then everything translated.
	saveSeeds(t, static, behindWorker)
	if n := len(static.callsTo("/v1/messages")); n != 0 {
		t.Errorf("the OpenAI-only static backend got %d /v1/messages calls", n)
	}
	if n := len(behindWorker.callsTo("/v1/messages")); n != 1 {
		t.Errorf("the worker's OpenAI-only server got %d /v1/messages probes, want 1", n)
	}
	if n := len(static.callsTo("/tokenize")); n != 1 {
		t.Errorf("count_tokens made %d /tokenize calls on the static backend, want 1", n)
	}

	// Headers the SDK does not show: the translation mark, and the marked estimate where the
	// target has no /tokenize.
	body := `{"model":"%s","max_tokens":16,"messages":[{"role":"user","content":"Say hello."}]}`
	for _, model := range []string{"static-m", "worker-m"} {
		st, h, b := post(t, addr, "/v1/messages?beta=true", nil, fmt.Sprintf(body, model))
		if st != 200 || h.Get("X-Modelrelay-Translated") != "anthropic->openai" {
			t.Errorf("%s: %d %v %s", model, st, h, b)
		}
	}
	count := `{"model":"%s","messages":[{"role":"user","content":"Count these words, please."}]}`
	st, h, b := post(t, addr, "/v1/messages/count_tokens", nil, fmt.Sprintf(count, "static-m"))
	if st != 200 || h.Get("X-Modelrelay-Estimated") != "" || !strings.Contains(string(b), "input_tokens") {
		t.Errorf("count_tokens through /tokenize: %d %v %s", st, h, b)
	}
	st, h, b = post(t, addr, "/v1/messages/count_tokens", nil, fmt.Sprintf(count, "worker-m"))
	if st != 200 || h.Get("X-Modelrelay-Estimated") != "true" || string(b) != `{"input_tokens":7}` {
		t.Errorf("count_tokens estimate: %d %v %s", st, h, b)
	}
}

func TestE2EOpenAISDKOnAnthropicOnlyTargets(t *testing.T) {
	t.Parallel()
	addr, targets := twoTargets(t, "anthropic", "")
	static, behindWorker := targets[0].fake, targets[1].fake

	for _, tc := range targets {
		calls := tc.runSDK(t, "openai_sdk.mjs", addr, "/v1/messages")
		for _, c := range calls {
			if c.Status != 200 && c.Status != 400 {
				t.Errorf("%s: the fake answered %d to %v", tc.model, c.Status, c.Body)
			}
			if c.Header.Get("X-Api-Key") != "sk-test" || c.Header.Get("Authorization") != "" {
				t.Errorf("%s: credentials reached the Anthropic target as %v", tc.model, c.Header)
			}
			if c.Body["max_tokens"] != float64(4096) {
				t.Errorf("%s: max_tokens %v, want the default 4096", tc.model, c.Body["max_tokens"])
			}
		}
		if calls[0].Body["system"] != "Be brief." {
			t.Errorf("%s: system prompt became %v", tc.model, calls[0].Body["system"])
		}
		// Both targets are auto: one refused probe of the OpenAI path each, then translated.
		if n := len(tc.fake.callsTo("/v1/chat/completions")); n != 1 {
			t.Errorf("%s: %d /v1/chat/completions probes, want 1", tc.model, n)
		}
	}
	saveSeeds(t, static, behindWorker)
	st, h, b := post(t, addr, "/v1/chat/completions", bearer("sk-test"), `{"model":"static-m","messages":[{"role":"user","content":"hi"}]}`)
	if st != 200 || h.Get("X-Modelrelay-Translated") != "openai->anthropic" {
		t.Errorf("translated answer: %d %v %s", st, h, b)
	}
	st, _, b = post(t, addr, "/v1/chat/completions", nil, `{"model":"static-m","n":2,"messages":[{"role":"user","content":"hi"}]}`)
	if st != 400 || !strings.Contains(string(b), `"invalid_request_error"`) {
		t.Errorf("n > 1 to an Anthropic target: %d %s", st, b)
	}
}

// Claude Code itself, headless, on a relay whose only target speaks OpenAI chat: it completes a
// prompt, and a tool round trip — the fake answers the first turn with a call to Claude Code's
// Read tool and answers the second turn from the tool result Claude Code sent back.
func TestE2EClaudeCodeOnAnOpenAIOnlyModelServer(t *testing.T) {
	t.Parallel()
	claude := filepath.Join(clientsDir(t), "node_modules", ".bin", "claude")
	work := t.TempDir()
	nonce := fmt.Sprintf("relay-nonce-%d", time.Now().UnixNano())
	notes := filepath.Join(work, "notes.txt")
	if err := os.WriteFile(notes, []byte("The secret word is "+nonce+".\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := newFakeModel(t, "openai", notes)
	addr := startStandalone(t, fmt.Sprintf(`backends:
  - name: llama
    url: %s
    models: ["*"]
`, fake.url))

	run := func(prompt string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, claude, "-p", prompt, "--allowedTools", "Read", "--output-format", "text")
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
			"ANTHROPIC_BASE_URL=http://" + addr, "ANTHROPIC_API_KEY=sk-ant-relay-test",
			"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CI=1"}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("claude -p %q: %v\nstdout:\n%s\nstderr:\n%s", prompt, err, out.String(), errOut.String())
		}
		return out.String()
	}

	if out := run("Say hello."); !strings.Contains(out, "Hello from the openai-only fake.") {
		t.Errorf("plain prompt: claude printed %q", out)
	}
	out := run("Please read the file notes.txt and tell me the secret word.")
	if !strings.Contains(out, nonce) {
		t.Errorf("tool round trip: claude printed %q, want the file's secret %s", out, nonce)
	}
	// The second turn carried Claude Code's Read result back as an OpenAI tool message.
	var sawResult bool
	for _, c := range fake.callsTo("/v1/chat/completions") {
		for _, m := range c.Body["messages"].([]any) {
			m := m.(map[string]any)
			if m["role"] == "tool" && m["tool_call_id"] == "call_read_1" && strings.Contains(fmt.Sprint(m["content"]), nonce) {
				sawResult = true
			}
		}
	}
	saveSeeds(t, fake)
	if !sawResult {
		t.Errorf("the fake never got the Read result as a tool message")
		for _, c := range fake.callsTo("/v1/chat/completions") {
			msgs := c.Body["messages"].([]any)
			b, _ := json.Marshal(msgs[len(msgs)-1])
			t.Logf("last message: %.3000s", b)
		}
	}
	// The backend is auto: one refused probe taught the relay, the rest went translated.
	if n := len(fake.callsTo("/v1/messages")); n != 1 {
		t.Errorf("/v1/messages reached the OpenAI-only server %d times, want one probe", n)
	}
}

// saveSeeds writes what the fakes were sent and answered into the translate package's fuzz
// corpora when MODELRELAY_CAPTURE_SEEDS names the corpus directory
// (relay/translate/testdata/fuzz): real captures of the SDKs' and Claude Code's traffic. Long
// strings are cut to 120 characters: the shapes matter, not the prompts.
func saveSeeds(t testing.TB, fakes ...*fakeModel) {
	dir := os.Getenv("MODELRELAY_CAPTURE_SEEDS")
	if dir == "" {
		return
	}
	save := func(target string, b []byte) {
		if len(b) == 0 {
			return
		}
		sum := sha256.Sum256(b)
		path := filepath.Join(dir, target, fmt.Sprintf("capture-%x", sum[:6]))
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
			t.Error(err)
		}
	}
	for _, f := range fakes {
		for _, c := range f.calls() {
			answer := c.Answer
			if c.Status != 200 {
				answer = nil
			}
			switch c.Path {
			case "/v1/messages":
				save("FuzzAnthropicRequest", shrinkJSON(c.Raw))
				if bytes.HasPrefix(answer, []byte("event:")) {
					save("FuzzOpenAIStream", answer)
				} else {
					save("FuzzResponses", answer)
				}
			case "/v1/chat/completions":
				save("FuzzOpenAIRequest", shrinkJSON(c.Raw))
				if bytes.HasPrefix(answer, []byte("data:")) {
					save("FuzzAnthropicStream", answer)
				} else {
					save("FuzzResponses", answer)
				}
			}
		}
	}
}

// shrinkJSON cuts every string in a JSON document to 120 characters.
func shrinkJSON(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	var cut func(any) any
	cut = func(v any) any {
		switch x := v.(type) {
		case string:
			if r := []rune(x); len(r) > 120 {
				return string(r[:120])
			}
		case []any:
			for i := range x {
				x[i] = cut(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = cut(x[k])
			}
		}
		return v
	}
	out, _ := json.Marshal(cut(v))
	return out
}

// On a circuit's host an Anthropic client is translated after one refused probe of the replica,
// and a route with no counterpart in the other family (embeddings) gets the replica's own 404.
func TestE2ECircuitReplicaTranslates(t *testing.T) {
	t.Parallel()
	fake := newFakeModel(t, "openai")
	_, port, _ := strings.Cut(strings.TrimPrefix(fake.url, "http://"), ":")
	c := newCircuit("tr", route{port: atoi(t, port)})
	c.public = true
	e := startE2E(t, e2eOptions{circuits: jsonList(c.json())})
	host := circuitHost("tr")
	e.waitServing(host, nil)
	for i := 0; i < 2; i++ {
		st, h, b := e.do("POST", host, "/v1/messages", withJSON(nil), []byte(`{"model":"any","max_tokens":16,"messages":[{"role":"user","content":"Say hello."}]}`))
		if st != 200 || h.Get("X-Modelrelay-Translated") != "anthropic->openai" || !strings.Contains(string(b), "Hello from the openai-only fake.") {
			t.Fatalf("request %d: %d %v %s", i, st, h, b)
		}
	}
	if n := len(fake.callsTo("/v1/messages")); n != 1 {
		t.Errorf("%d probes of /v1/messages, want 1", n)
	}
	before := len(fake.calls())
	st, h, b := e.do("POST", host, "/v1/embeddings", withJSON(nil), []byte(`{"model":"any","input":"x"}`))
	if st != 404 || h.Get("X-Modelrelay-Translated") != "" || len(fake.calls()) != before+1 {
		t.Errorf("untranslatable route: %d %v %s (%d calls)", st, h, b, len(fake.calls())-before)
	}
}

func atoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
