package main

// `modelrelay-bench simcache`: a simulated model server with a prefix (KV) cache, faithful
// enough to measure placement. It speaks OpenAI chat completions (streaming SSE and plain
// JSON with usage), lists one model, and reports its cache hit ratio on GET /stats.
//
//	modelrelay-bench simcache -listen 127.0.0.1:9000 [-base 8ms] [-per-block 1ms] [-decode 3ms]
//	    [-capacity-blocks 768] [-max-tokens 32] [-stall-decode=true] [-chunk-blocks 0] [-model sim]
//
// The model of one replica:
//
//   - The canonical prompt is every message's role and text in order (the request's tools, as
//     compact JSON, right after the leading system messages, where chat templates render
//     them), cut into full 256-byte
//     blocks (~64 tokens); a block's key chains the previous one, so a block counts as cached
//     only together with its whole prefix. The replica keeps an LRU of blocks it has computed
//     (prompt blocks when their prefill is scheduled, answer blocks when the answer is done,
//     as vLLM caches generated blocks too), -capacity-blocks of them.
//   - TTFT = base + per_block × uncached blocks + the wait for the GPU. Prefills are
//     serialized per replica (one at a time, FIFO); base is latency that overlaps other work
//     (HTTP, tokenizing, scheduling, the forward step of the partial last block).
//   - Then max_tokens tokens (request's, else -max-tokens) at one per -decode. Decode steps are
//     batched, so streams do not slow each other; with -stall-decode a step waits while the
//     GPU is prefilling (prefill-first scheduling), or with -chunk-blocks N for at most the
//     time of N blocks (chunked prefill: each GPU step carries one chunk of prefill).
//
// Why the defaults (the `chat` workload of the placement benchmark; placement.go has a 70B
// profile for its `agent` workload): they describe an 8B model in FP8 on one H100-class GPU. Prefill costs
// about 2 × 8e9 FLOP per token, ~1 PFLOP/s effective: ~1 ms per 64-token block. A decode step
// reads the 8 GB of weights at ~3 TB/s: ~3 ms per token at moderate batch. An empty prompt
// still pays tokenizing, scheduling and one forward step: 8 ms. The KV cache a real GPU has
// left is far larger, but it is shared with far more users than the benchmark drives; 768
// blocks (~49k tokens) holds about 24 of the benchmark's conversations at full length, the
// pressure a busy replica puts on its cache. Answers are 32 tokens: short, so decode does not
// hide what placement changes. None of these were tuned to meet the placement goals.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// simParams are one replica's costs and sizes.
type simParams struct {
	Base           time.Duration // TTFT floor, overlapping other requests' work
	PerBlock       time.Duration // prefill of one uncached block, exclusive on the replica
	Decode         time.Duration // one output token
	CapacityBlocks int           // blocks the KV cache holds
	MaxTokens      int           // answer length when the request names none
	StallDecode    bool          // decode steps wait while a prefill runs
	ChunkBlocks    int           // with StallDecode: a decode step waits at most this many blocks' prefill (0: no bound)
	Model          string
}

func defaultSimParams() simParams {
	return simParams{Base: 8 * time.Millisecond, PerBlock: time.Millisecond, Decode: 3 * time.Millisecond,
		CapacityBlocks: 768, MaxTokens: 32, StallDecode: true, Model: "sim"}
}

// register adds the parameters as flags of fs, each name after prefix, defaulting to p's
// values.
func (p *simParams) register(fs *flag.FlagSet, prefix string) {
	fs.DurationVar(&p.Base, prefix+"base", p.Base, "simulated replica: TTFT floor (overlaps other work)")
	fs.DurationVar(&p.PerBlock, prefix+"per-block", p.PerBlock, "simulated replica: prefill per uncached 256-byte block (serialized per replica)")
	fs.DurationVar(&p.Decode, prefix+"decode", p.Decode, "simulated replica: time per output token")
	fs.IntVar(&p.CapacityBlocks, prefix+"capacity-blocks", p.CapacityBlocks, "simulated replica: KV cache size in 256-byte blocks")
	fs.IntVar(&p.MaxTokens, prefix+"max-tokens", p.MaxTokens, "simulated replica: answer tokens when the request sets no max_tokens")
	fs.BoolVar(&p.StallDecode, prefix+"stall-decode", p.StallDecode, "simulated replica: decode steps wait while a prefill runs")
	fs.IntVar(&p.ChunkBlocks, prefix+"chunk-blocks", p.ChunkBlocks, "simulated replica: with stall-decode, chunked prefill: a decode step waits at most this many blocks' prefill (0: until no prefill is queued)")
	fs.StringVar(&p.Model, prefix+"model", p.Model, "simulated replica: the one model it serves")
}

func (p simParams) validate() error {
	if p.Base < 0 || p.PerBlock < 0 || p.Decode < 0 || p.CapacityBlocks < 1 || p.MaxTokens < 1 || p.ChunkBlocks < 0 || p.Model == "" {
		return errors.New("simulated replica: durations and -chunk-blocks must be >= 0, -capacity-blocks and -max-tokens >= 1, -model set")
	}
	return nil
}

// SimStats is what GET /stats reports.
type SimStats struct {
	Requests     int64   `json:"requests"`
	PromptBlocks int64   `json:"prompt_blocks"` // full blocks of every prompt seen
	CachedBlocks int64   `json:"cached_blocks"` // of those, found in the cache
	HitRatio     float64 `json:"hit_ratio"`
	BlocksHeld   int     `json:"blocks_held"`
	PrefillMS    int64   `json:"prefill_ms"` // GPU time spent prefilling
}

// simReplica is one simulated model server.
type simReplica struct {
	p     simParams
	cache *prefixLRU
	gpu   *simGPU
	seq   atomic.Int64

	requests, promptBlocks, cachedBlocks atomic.Int64
}

func newSimReplica(p simParams) *simReplica {
	return &simReplica{p: p, cache: newPrefixLRU(p.CapacityBlocks), gpu: &simGPU{stallDecode: p.StallDecode, chunk: time.Duration(p.ChunkBlocks) * p.PerBlock}}
}

// Stats is a snapshot of the replica's counters.
func (s *simReplica) Stats() SimStats {
	st := SimStats{Requests: s.requests.Load(), PromptBlocks: s.promptBlocks.Load(),
		CachedBlocks: s.cachedBlocks.Load(), BlocksHeld: s.cache.Len(), PrefillMS: s.gpu.BusyTotal().Milliseconds()}
	if st.PromptBlocks > 0 {
		st.HitRatio = float64(st.CachedBlocks) / float64(st.PromptBlocks)
	}
	return st
}

func (s *simReplica) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		writeSimJSON(w, map[string]any{"object": "list",
			"data": []map[string]string{{"id": s.p.Model, "object": "model", "owned_by": "modelrelay-bench"}}})
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) { writeSimJSON(w, s.Stats()) })
	mux.HandleFunc("POST /v1/chat/completions", s.serveCompletion)
	return mux
}

// simRequest is the part of a chat completion request the simulator reads.
type simRequest struct {
	Model         string          `json:"model"`
	Messages      []simMessage    `json:"messages"`
	Tools         json.RawMessage `json:"tools"`
	Stream        bool            `json:"stream"`
	MaxTokens     int             `json:"max_tokens"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// simAnswer is one request on its way through the replica.
type simAnswer struct {
	id                   string
	model                string
	prompt               string
	promptTokens, cached int
	tokens               []string
	firstToken           time.Time
}

func (s *simReplica) serveCompletion(w http.ResponseWriter, r *http.Request) {
	var req simRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"want a JSON chat completion with messages"}}`, http.StatusBadRequest)
		return
	}
	ans, err := s.prefill(r.Context(), req)
	if err != nil {
		return // the client left while waiting
	}
	if req.Stream {
		s.stream(w, r, ans, req.StreamOptions.IncludeUsage)
	} else {
		s.respond(w, r, ans)
	}
}

// keepAnswer caches the finished answer's blocks: the next turn's prompt starts with this
// prompt and this answer. It runs before the answer's last bytes go out, so a client that
// follows up at once finds them.
func (s *simReplica) keepAnswer(ans *simAnswer) {
	s.cache.admit(blockKeys(ans.prompt + "assistant" + strings.Join(ans.tokens, "")))
}

// prefill waits out base, looks the prompt up in the cache, queues its uncached blocks on the
// GPU and waits for them: on return, the first token is due.
func (s *simReplica) prefill(ctx context.Context, req simRequest) (*simAnswer, error) {
	start := time.Now()
	if err := sleepUntil(ctx, start.Add(s.p.Base)); err != nil {
		return nil, err
	}
	prompt := canonicalPrompt(req.Tools, req.Messages)
	keys := blockKeys(prompt)
	hits := s.cache.admit(keys)
	s.requests.Add(1)
	s.promptBlocks.Add(int64(len(keys)))
	s.cachedBlocks.Add(int64(hits))
	done := s.gpu.reservePrefill(time.Duration(len(keys)-hits) * s.p.PerBlock)
	if err := sleepUntil(ctx, done); err != nil {
		return nil, err
	}
	n := req.MaxTokens
	if n <= 0 {
		n = s.p.MaxTokens
	}
	model := req.Model
	if model == "" {
		model = s.p.Model
	}
	return &simAnswer{id: fmt.Sprintf("chatcmpl-sim-%d", s.seq.Add(1)), model: model, prompt: prompt,
		promptTokens: (len(prompt) + 3) / 4, cached: hits * simBlockBytes / 4,
		tokens: simTokens(prompt, n), firstToken: time.Now()}, nil
}

// nextToken waits for token i's decode step (token 0 came out of the prefill).
func (s *simReplica) nextToken(ctx context.Context, i int, prev time.Time) (time.Time, error) {
	if i == 0 {
		return prev, nil
	}
	return s.gpu.decodeStep(ctx, prev.Add(s.p.Decode))
}

func (s *simReplica) stream(w http.ResponseWriter, r *http.Request, ans *simAnswer, includeUsage bool) {
	flusher, ok := startSSE(w)
	if !ok {
		return
	}
	at := ans.firstToken
	for i, tok := range ans.tokens {
		var err error
		if at, err = s.nextToken(r.Context(), i, at); err != nil {
			return
		}
		delta := map[string]string{"content": tok}
		if i == 0 {
			delta["role"] = "assistant"
		}
		if writeSSE(w, ans.chunk([]any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}, nil)) != nil {
			return
		}
		flusher.Flush()
	}
	s.keepAnswer(ans)
	writeSSE(w, ans.chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "length"}}, nil))
	if includeUsage {
		writeSSE(w, ans.chunk([]any{}, ans.usage()))
	}
	io.WriteString(w, "data: [DONE]\n\n")
	flusher.Flush()
}

func (s *simReplica) respond(w http.ResponseWriter, r *http.Request, ans *simAnswer) {
	at := ans.firstToken
	for i := range ans.tokens {
		var err error
		if at, err = s.nextToken(r.Context(), i, at); err != nil {
			return
		}
	}
	s.keepAnswer(ans)
	writeSimJSON(w, map[string]any{"id": ans.id, "object": "chat.completion", "created": time.Now().Unix(),
		"model": ans.model, "usage": ans.usage(),
		"choices": []any{map[string]any{"index": 0, "finish_reason": "length",
			"message": map[string]string{"role": "assistant", "content": strings.Join(ans.tokens, "")}}}})
}

func (a *simAnswer) usage() map[string]any {
	return map[string]any{"prompt_tokens": a.promptTokens, "completion_tokens": len(a.tokens),
		"total_tokens":          a.promptTokens + len(a.tokens),
		"prompt_tokens_details": map[string]int{"cached_tokens": a.cached}}
}

// chunk is one chat.completion.chunk event's JSON.
func (a *simAnswer) chunk(choices []any, usage map[string]any) []byte {
	m := map[string]any{"id": a.id, "object": "chat.completion.chunk", "created": a.firstToken.Unix(),
		"model": a.model, "choices": choices}
	if usage != nil {
		m["usage"] = usage
	}
	b, _ := json.Marshal(m)
	return b
}

// writeSSE frames one event: "data: <json>" and a blank line.
func writeSSE(w io.Writer, payload []byte) error {
	buf := make([]byte, 0, len(payload)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, payload...)
	buf = append(buf, "\n\n"...)
	_, err := w.Write(buf)
	return err
}

// simTokenBytes is about the mean length of simWords: an answer of n tokens has about
// n × simTokenBytes bytes.
const simTokenBytes = 5

// simWords make up answers; about 5 bytes per token, like English BPE tokens.
var simWords = []string{" the", " cache", " model", " a", " prefix", " block", " of", " server",
	" relay", " is", " token", " GPU", " and", " to", " warm", " reply"}

// simTokens is a deterministic answer for prompt: the same prompt gets the same answer, as
// with greedy decoding.
func simTokens(prompt string, n int) []string {
	h := fnv.New64a()
	io.WriteString(h, prompt)
	x := h.Sum64() | 1
	out := make([]string, n)
	for i := range out {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		out[i] = simWords[x%uint64(len(simWords))]
	}
	return out
}

func writeSimJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// simServer is a simulated replica serving on a loopback port, for tests and the benchmark.
type simServer struct {
	URL     string // http://127.0.0.1:port
	Replica *simReplica
	srv     *http.Server
}

// startSimServer serves a fresh replica (empty cache) on a random loopback port.
func startSimServer(p simParams) (*simServer, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("simulated replica: listen: %w", err)
	}
	rep := newSimReplica(p)
	srv := &http.Server{Handler: rep.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return &simServer{URL: "http://" + ln.Addr().String(), Replica: rep, srv: srv}, nil
}

// Addr is host:port.
func (s *simServer) Addr() string { return strings.TrimPrefix(s.URL, "http://") }

// Stats is the replica's counters now.
func (s *simServer) Stats() SimStats { return s.Replica.Stats() }

// PrefillsSince is every prefill the replica queued at or after t: when, and for how long.
func (s *simServer) PrefillsSince(t time.Time) []prefillSpan { return s.Replica.gpu.prefillsSince(t) }

// Close stops serving and ends every request in progress.
func (s *simServer) Close() { s.srv.Close() }

func simcacheMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("modelrelay-bench simcache", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to serve on")
	p := defaultSimParams()
	p.register(fs, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := p.validate(); err != nil {
		fmt.Fprintln(stderr, "modelrelay-bench simcache:", err)
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "modelrelay-bench simcache: listen:", err)
		return 1
	}
	fmt.Fprintf(stderr, "simulated replica on http://%s (base %s, per block %s, decode %s/token, %d blocks, stall decode %v, chunk %d blocks)\n",
		ln.Addr(), p.Base, p.PerBlock, p.Decode, p.CapacityBlocks, p.StallDecode, p.ChunkBlocks)
	if err := serveUntilSignal(ln, newSimReplica(p).Handler()); err != nil {
		fmt.Fprintln(stderr, "modelrelay-bench simcache:", err)
		return 1
	}
	return 0
}
