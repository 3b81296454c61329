package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// testSimParams make prefill dominate and decode free, so timings are easy to tell apart.
func testSimParams() simParams {
	p := defaultSimParams()
	p.Base, p.PerBlock, p.Decode, p.MaxTokens = time.Millisecond, 2*time.Millisecond, 0, 4
	return p
}

func startTestSim(t *testing.T, p simParams) *simServer {
	t.Helper()
	s, err := startSimServer(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// chatBody is a request whose canonical prompt is "user" + content.
func chatBody(content string, stream bool, extra string) string {
	b, _ := json.Marshal(content)
	return `{"model":"sim","messages":[{"role":"user","content":` + string(b) + `}],"stream":` +
		map[bool]string{true: "true", false: "false"}[stream] + extra + `}`
}

func postSim(t *testing.T, s *simServer, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(s.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return resp
}

// streamTTFT sends a streaming request and returns the time to its first content token.
func streamTTFT(t *testing.T, s *simServer, content string) time.Duration {
	t.Helper()
	start := time.Now()
	resp := postSim(t, s, chatBody(content, true, ""))
	defer resp.Body.Close()
	_, first, err := readChatStream(resp.Body)
	if err != nil || first.IsZero() {
		t.Fatalf("stream: first token %v, err %v", first, err)
	}
	return first.Sub(start)
}

func TestPrefixLRU(t *testing.T) {
	c := newPrefixLRU(6)
	a := blockKeys(strings.Repeat("a", 4*simBlockBytes))
	if hits := c.admit(a); hits != 0 {
		t.Fatalf("cold cache: %d hits", hits)
	}
	if hits := c.admit(a[:3]); hits != 3 {
		t.Fatalf("repeated prefix: %d hits, want 3", hits)
	}
	// Same block text after a different first block: a different prefix, no hit.
	b := blockKeys(strings.Repeat("b", simBlockBytes) + strings.Repeat("a", 3*simBlockBytes))
	if hits := c.admit(b); hits != 0 {
		t.Fatalf("other prefix: %d hits, want 0", hits)
	}
	// 8 blocks in a 6-block cache: a's tail went first, its head is still there.
	if c.Len() != 6 {
		t.Fatalf("holds %d blocks, want 6", c.Len())
	}
	if hits := c.admit(a); hits != 2 {
		t.Fatalf("after eviction: %d hits, want the 2 leading blocks", hits)
	}
}

func TestCanonicalPrompt(t *testing.T) {
	var msgs []simMessage
	json.Unmarshal([]byte(`[{"role":"system","content":"S"},{"role":"user","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]}]`), &msgs)
	if got := canonicalPrompt(nil, msgs); got != "systemSuserAB" {
		t.Errorf("canonical prompt %q", got)
	}
	// Tools, however spaced, go after the leading system messages.
	if got := canonicalPrompt(json.RawMessage(`[ {"name": "f"} ]`), msgs); got != `systemStools[{"name":"f"}]userAB` {
		t.Errorf("canonical prompt with tools %q", got)
	}
	if n := len(blockKeys(strings.Repeat("x", 3*simBlockBytes-1))); n != 2 {
		t.Errorf("%d keys for 2 full blocks and a partial one", n)
	}
}

func TestSimCacheHitsRepeatedPrefix(t *testing.T) {
	s := startTestSim(t, testSimParams())
	prompt := strings.Repeat("p", 10*simBlockBytes)
	for range 2 {
		resp := postSim(t, s, chatBody(prompt, false, ""))
		var got struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
				Details          struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if got.Usage.CompletionTokens != 4 {
			t.Errorf("completion_tokens %d, want the default 4", got.Usage.CompletionTokens)
		}
	}
	st := s.Stats()
	// "user" + 2560 bytes: 10 full blocks each time; the second time all of them are cached.
	if st.Requests != 2 || st.PromptBlocks != 20 || st.CachedBlocks != 10 || st.HitRatio != 0.5 {
		t.Errorf("stats %+v, want 2 requests, 20 prompt blocks, 10 cached", st)
	}
	resp, err := http.Get(s.URL + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var wire SimStats
	if err := json.NewDecoder(resp.Body).Decode(&wire); err != nil || wire.CachedBlocks != 10 {
		t.Errorf("GET /stats: %+v, %v", wire, err)
	}
}

func TestSimTTFTGrowsWithUncachedBlocks(t *testing.T) {
	s := startTestSim(t, testSimParams())
	long := strings.Repeat("q", 40*simBlockBytes)
	short := streamTTFT(t, s, "hi")
	cold := streamTTFT(t, s, long)
	warm := streamTTFT(t, s, long)
	// 40 uncached blocks at 2 ms: 80 ms of prefill that the short and the warm request skip.
	if cold-short < 60*time.Millisecond || cold-warm < 60*time.Millisecond {
		t.Errorf("TTFT short %s, cold %s, warm %s: want cold about 80 ms above both", short, cold, warm)
	}
}

func TestSimPrefillIsSerialized(t *testing.T) {
	s := startTestSim(t, testSimParams())
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		ttfts []time.Duration
	)
	for i := range 2 {
		wg.Go(func() {
			d := streamTTFT(t, s, strings.Repeat(string(rune('a'+i)), 25*simBlockBytes))
			mu.Lock()
			ttfts = append(ttfts, d)
			mu.Unlock()
		})
	}
	wg.Wait()
	// Each prompt is 50 ms of prefill; the second waits for the first.
	if slow := max(ttfts[0], ttfts[1]); slow < 95*time.Millisecond {
		t.Errorf("TTFTs %v: the later prefill should wait for the earlier one", ttfts)
	}
}

// A decode step waits for a queued prefill to finish (prefill-first), for at most one chunk
// of it (chunked prefill), or not at all.
func TestSimGPUDecodeStall(t *testing.T) {
	for _, c := range []struct {
		name      string
		gpu       *simGPU
		min, most time.Duration
	}{
		{"prefill-first", &simGPU{stallDecode: true}, 95 * time.Millisecond, time.Second},
		{"chunked", &simGPU{stallDecode: true, chunk: 10 * time.Millisecond}, 9 * time.Millisecond, 60 * time.Millisecond},
		{"no stall", &simGPU{}, 0, 40 * time.Millisecond},
	} {
		start := time.Now()
		c.gpu.reservePrefill(100 * time.Millisecond)
		at, err := c.gpu.decodeStep(t.Context(), start)
		if d := at.Sub(start); err != nil || d < c.min || d > c.most {
			t.Errorf("%s: decode step after %s (%v), want %s..%s", c.name, d, err, c.min, c.most)
		}
	}
}

func TestSimSSEFraming(t *testing.T) {
	s := startTestSim(t, testSimParams())
	resp := postSim(t, s, chatBody("hello", true, `,"max_tokens":3,"stream_options":{"include_usage":true}`))
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(raw, []byte("\n\ndata: [DONE]\n\n")) {
		t.Fatalf("stream does not end with [DONE]: %q", raw)
	}
	events := strings.Split(strings.TrimSuffix(string(raw), "\n\n"), "\n\n")
	// 3 tokens, the finish chunk, the usage chunk, [DONE].
	if len(events) != 6 {
		t.Fatalf("%d events, want 6: %q", len(events), raw)
	}
	var content strings.Builder
	for i, ev := range events[:5] {
		payload, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(payload, "\n") {
			t.Fatalf("event %d is not one data line: %q", i, ev)
		}
		var chunk struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Role, Content string
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(payload), &chunk); err != nil || chunk.Object != "chat.completion.chunk" {
			t.Fatalf("event %d: %v %q", i, err, payload)
		}
		switch {
		case i == 0 && chunk.Choices[0].Delta.Role != "assistant":
			t.Errorf("first chunk has no assistant role: %q", payload)
		case i < 3:
			content.WriteString(chunk.Choices[0].Delta.Content)
		case i == 3 && (chunk.Choices[0].FinishReason == nil || *chunk.Choices[0].FinishReason != "length"):
			t.Errorf("finish chunk: %q", payload)
		case i == 4 && (chunk.Usage == nil || chunk.Usage.CompletionTokens != 3 || len(chunk.Choices) != 0):
			t.Errorf("usage chunk: %q", payload)
		}
	}
	if want := strings.Join(simTokens("userhello", 3), ""); content.String() != want {
		t.Errorf("content %q, want %q", content.String(), want)
	}
}

// The GPU logs every prefill it queues, when and how long, for the offered-load figure.
func TestSimGPUPrefillLog(t *testing.T) {
	g := &simGPU{}
	g.reservePrefill(3 * time.Millisecond)
	time.Sleep(time.Millisecond) // so no clock reads the first and the second as one instant
	mid := time.Now()
	g.reservePrefill(5 * time.Millisecond)
	g.reservePrefill(0)
	got := g.prefillsSince(mid)
	if len(got) != 2 || got[0].d != 5*time.Millisecond || got[1].d != 0 || got[0].at.Before(mid) {
		t.Errorf("prefills since the second: %+v", got)
	}
	if all := g.prefillsSince(time.Time{}); len(all) != 3 || g.BusyTotal() != 8*time.Millisecond {
		t.Errorf("%d prefills logged, %s busy", len(all), g.BusyTotal())
	}
}
