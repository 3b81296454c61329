package main

// The Responses API from outside: Codex CLI and the official OpenAI SDK, unchanged, through the
// relay to a model server that speaks only chat completions.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Codex CLI, non-interactive, with a custom provider whose base_url is the relay: a plain
// prompt, then a tool turn — the fake asks Codex's exec_command to write a file, Codex runs
// it and sends the output back, and the fake's final text ends the turn.
func TestE2ECodexCLIOnAChatOnlyModelServer(t *testing.T) {
	t.Parallel()
	codex := filepath.Join(clientsDir(t), "node_modules", ".bin", "codex")
	work := t.TempDir()
	proof := filepath.Join(work, "proof.txt")
	fake := newFakeModel(t, "openai")
	fake.shellFile = proof
	addr := startStandalone(t, fmt.Sprintf(`backends:
  - name: llama
    url: %s
    models: ["*"]
`, fake.url))
	home := t.TempDir()
	config := fmt.Sprintf(`model = "fake"
model_provider = "relay"

[model_providers.relay]
name = "modelrelay"
base_url = "http://%s/v1"
wire_api = "responses"
env_key = "RELAY_API_KEY"
`, addr)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(prompt string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, codex, "exec", "--skip-git-repo-check",
			"--dangerously-bypass-approvals-and-sandbox", prompt)
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home,
			"RELAY_API_KEY=sk-codex-test", "NO_COLOR=1"}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("codex exec %q: %v\nstdout:\n%s\nstderr:\n%s", prompt, err, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}

	if out := run("Say hello."); !strings.Contains(out, "Hello from the openai-only fake.") {
		t.Errorf("plain prompt: codex printed %q", out)
	}
	out := run("Please write the proof file.")
	if b, err := os.ReadFile(proof); err != nil || string(b) != "codex-was-here" {
		t.Errorf("the tool call did not run: %q, %v\ncodex printed %s", b, err, out)
	}
	if !strings.Contains(out, "The tool said:") {
		t.Errorf("tool turn: codex printed %q, want the model's final text", out)
	}
	// The follow-up chat request holds the call as one assistant message and its output as
	// one tool message.
	var calls, outputs int
	for _, c := range fake.callsTo("/v1/chat/completions") {
		for _, m := range c.Body["messages"].([]any) {
			m := m.(map[string]any)
			if tcs, _ := m["tool_calls"].([]any); m["role"] == "assistant" && len(tcs) == 1 {
				if tc := tcs[0].(map[string]any); tc["id"] == "call_shell_1" {
					calls++
				}
			}
			if m["role"] == "tool" && m["tool_call_id"] == "call_shell_1" {
				outputs++
			}
		}
	}
	if calls != 1 || outputs != 1 {
		t.Errorf("the follow-up held %d assistant messages with the call and %d tool messages, want 1 and 1", calls, outputs)
		for _, c := range fake.callsTo("/v1/chat/completions") {
			b, _ := json.Marshal(c.Body["messages"])
			t.Logf("messages: %.4000s", b)
		}
	}
	// The server is auto: one refused probe of /v1/responses taught the relay.
	if n := len(fake.callsTo("/v1/responses")); n != 1 {
		t.Errorf("/v1/responses reached the chat-only server %d times, want one probe", n)
	}
	saveSeeds(t, fake)
}

// The official OpenAI SDK's responses.create and responses.stream, with a function tool, get
// parsed answers from a server that speaks only chat (configured so), and from one that speaks
// only Anthropic Messages (auto: the Responses and chat paths are each refused once, then every
// call goes straight to Messages); a stored response is continued, read and deleted.
func TestE2EOpenAISDKResponsesOnOneFamilyServers(t *testing.T) {
	t.Parallel()
	for _, family := range []string{"openai", "anthropic"} {
		t.Run(family, func(t *testing.T) {
			t.Parallel()
			fake := newFakeModel(t, family)
			dialects := ""
			if family == "openai" {
				dialects = "    dialects: [openai]\n"
			}
			addr := startStandalone(t, fmt.Sprintf("backends:\n  - name: one\n    url: %s\n    models: [\"*\"]\n%s", fake.url, dialects))
			summary := runNode(t, "openai_responses.mjs", map[string]string{"RELAY_URL": "http://" + addr, "MODEL": "fake", "FAMILY": family})
			t.Logf("%v", summary)
			own := "/v1/chat/completions"
			probes := map[string]int{"/v1/responses": 0}
			if family == "anthropic" {
				own = "/v1/messages"
				probes = map[string]int{"/v1/responses": 1, "/v1/chat/completions": 1}
			}
			for path, want := range probes {
				if n := len(fake.callsTo(path)); n != want {
					t.Errorf("%s reached the %s-only server %d times, want %d", path, family, n, want)
				}
			}
			// previous_response_id brought the stored conversation: the continuing call
			// carries the earlier turn's question and the model's answer before the new one.
			var continued string
			for _, c := range fake.callsTo(own) {
				if b, _ := json.Marshal(c.Body["messages"]); strings.Contains(string(b), "And again?") {
					continued = string(b)
				}
			}
			hello := "Hello from the " + family + "-only fake."
			if !strings.Contains(continued, `Say hello.`) || !strings.Contains(continued, hello) ||
				strings.Index(continued, hello) > strings.Index(continued, "And again?") {
				t.Errorf("the continued conversation reached the server as %s", continued)
			}
			st, h, b := post(t, addr, "/v1/responses", bearer("sk-test"), `{"model":"fake","input":"Say hello."}`)
			if st != 200 || h.Get("X-Modelrelay-Translated") != "responses->"+family {
				t.Errorf("translated answer: %d %v %s", st, h, b)
			}
			saveSeeds(t, fake)
		})
	}
}
