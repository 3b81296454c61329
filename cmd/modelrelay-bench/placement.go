package main

// `modelrelay-bench placement`: does cache-aware routing keep conversations on the replica
// whose KV cache holds them? It starts simulated prefix-cache replicas (simcache.go) in this
// process and, for each workload and policy, the real relay with them as static backends,
// then replays the workload (placementload.go) and compares TTFT, total time, cache hits and
// balance. Every policy gets fresh replicas with empty caches and the same bytes on the same
// schedule. Four workloads, because what placement can save depends on the traffic:
//
//   - chat: an 8B-class replica and short chats, closed loop (think time after each
//     answer), at low utilization. About 10 seconds for both policies.
//   - agent: a 70B-class replica and agent or document-chat sessions whose prompts grow to
//     ~30 KB, open loop (each turn due at a time fixed in advance), at ~80% of the load
//     least_load sustains. About a minute for both policies.
//   - doc (not run by default): the same replica near prefill saturation under chat over
//     long documents, open loop at ~85% of least_load's prefill capacity at the schedule's
//     busiest (placement_doc.go). About two minutes for both policies.
//   - rush (not run by default): doc's sessions as a closed loop that asks for more than
//     least_load's prefill serves, so the total time measures throughput
//     (placement_doc.go). About 80 seconds for both policies.
//
// The runs take simulated time at face value (no scaling): a millisecond in a parameter is a
// millisecond on the clock.
//
//	go run ./cmd/modelrelay-bench placement [-workloads chat,agent,doc,rush] [-conversations 64]
//	    [-turns 8] [-seed 1] [-policies least_load,cache_aware]
//	    [-chat.think 150ms] [-agent.gap 2.6s] [-agent.per-block 4ms] ... (-h lists them all)

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// placementScenario is one workload of the benchmark and the replicas that serve it.
type placementScenario struct {
	name          string
	title         string // what the report's heading says about it
	shape         placementShape
	sim           simParams
	maxConcurrent int  // the relay's max_concurrent per replica
	affinitySlack *int // the relay's affinity_slack; nil = the relay's default
}

// chatScenario is short support chats on an 8B-class replica (simcache.go gives the reasons
// for its costs); the think time (150 ms mean) is short so the run is short; real users pause for
// seconds. Conversations are a closed loop: each turn waits for the previous answer, so the
// total time can only shrink as far as the think times allow.
func chatScenario() placementScenario {
	sim := defaultSimParams()
	return placementScenario{name: "chat", title: "8B-class replicas, closed-loop support chat", sim: sim, maxConcurrent: 8,
		shape: placementShape{Conversations: 64, Turns: 8, SystemBytes: 2048, UserMin: 300, UserMax: 1000,
			Intro:   "You are the support assistant of a GPU cloud. Follow the policy below. ",
			Stagger: 30 * time.Millisecond, Pause: 150 * time.Millisecond, MaxTokens: sim.MaxTokens, Model: sim.Model}}
}

// agentScenario is prefill-heavy traffic: coding agents (Claude Code through the relay) and
// document chat on a shared GPU cluster, served by a 70B-class model. None of these values
// was tuned to meet the placement goals.
//
// The replica is a Llama-3-70B-class model in BF16 with tensor parallelism over one node of
// eight H100-class GPUs:
//
//   - Prefill: 64 tokens × 2 × 70e9 FLOP ≈ 9 TFLOP per block, ~10% more for attention over
//     a 5–7k-token context. The node's ~7.9 PFLOP/s of dense BF16 runs prefill at about a
//     third of peak with eight-way all-reduces and chunks of a few thousand tokens: 4 ms per
//     block (~16k tokens/s).
//   - Decode: each step reads 17.6 GB of weights per GPU at 3.35 TB/s (5 ms), plus 160
//     all-reduces, the batch's KV and sampling: 20 ms per token, what 70B TP8 servers show at
//     moderate batch.
//   - Base: tokenizing 5–7k tokens, scheduling, and the step that yields the first token:
//     30 ms.
//   - Chunked prefill, as vLLM's V1 scheduler does, with a budget of 2048 tokens per step: a
//     step carries the running decodes and at most 32 blocks (128 ms) of queued prefill, so
//     a decode that finds the GPU prefilling waits at most that long. Heavy prefill slows
//     every stream's tokens.
//   - KV cache: 80 layers × 8 KV heads × 128 dims × 2 (K, V) × 2 bytes = 320 KiB per token;
//     the node's ~400 GB left after weights and activations hold ~1.2M tokens, shared with
//     the running batch and, on a shared cluster, with other pools' users. This benchmark's
//     conversations get 262k tokens of it: 4096 blocks (1 MiB of prompt text). A replica's
//     quarter of the conversations at full length (16 × ~29 KB ≈ 1.8k blocks) fits; all 64
//     (~7.3k blocks) do not.
//   - max_concurrent 32: a 70B node batches dozens of sequences, so with 16 sessions per
//     replica the relay never queues: waiting happens in the replica's prefill queue, as on
//     a real server.
//
// The sessions: a 4 KB prefix every session shares (2.5 KB of instructions and ~1.5 KB of
// tool definitions, as agents send with every request), then at every turn 1.5–4 KB of new
// content (a tool's output, a document excerpt) after the previous answer, so the prompt
// grows to ~29 KB (up to ~35 KB) at turn 8. Answers are 64 tokens, a tool call and a
// sentence: agent traffic is mostly prompt (here ~70 prompt tokens per completion token).
// Sessions start 100 ms apart.
//
// The load: each turn is due 1.3–3.9 s (mean 2.6 s: the model's answer and a tool run) after
// the previous one's due time, and is sent then or when the previous answer is complete,
// whichever is later. How much load 64 sessions can offer is capped by their own answers:
// sent the moment the previous answer is in (-agent.gap 1ms), least_load completes a turn
// per session every ~2.1 s, ~30 turns/s, its replicas ~40% busy prefilling. A 2.6 s gap
// offers ~25 turns/s, ~80% of that.
func agentScenario() placementScenario {
	sim := simParams{Base: 30 * time.Millisecond, PerBlock: 4 * time.Millisecond, Decode: 20 * time.Millisecond,
		CapacityBlocks: 4096, MaxTokens: 64, StallDecode: true, ChunkBlocks: 32, Model: "sim-70b"}
	return placementScenario{name: "agent", title: "70B-class replicas, open-loop agent and document sessions", sim: sim, maxConcurrent: 32,
		shape: placementShape{Conversations: 64, Turns: 8, SystemBytes: 2560, ToolsBytes: 1536, UserMin: 1536, UserMax: 4096,
			Intro:   "You are a coding agent working in the user's repository through the tools below. Follow these rules. ",
			Stagger: 100 * time.Millisecond, OpenLoop: true, Pause: 2600 * time.Millisecond, MaxTokens: sim.MaxTokens, Model: sim.Model}}
}

// register adds the scenario's own flags to fs, each named "<scenario>.<flag>".
func (sc *placementScenario) register(fs *flag.FlagSet) {
	prefix := sc.name + "."
	sh := &sc.shape
	fs.IntVar(&sh.SystemBytes, prefix+"system-bytes", sh.SystemBytes, sc.name+": bytes of the system prompt every conversation shares")
	fs.IntVar(&sh.ToolsBytes, prefix+"tools-bytes", sh.ToolsBytes, sc.name+": about this many bytes of tool definitions every request carries (0: none)")
	fs.IntVar(&sh.UserMin, prefix+"user-min", sh.UserMin, sc.name+": shortest new user message (or tool output), bytes")
	fs.IntVar(&sh.UserMax, prefix+"user-max", sh.UserMax, sc.name+": longest new user message (or tool output), bytes")
	if sh.DocMax > 0 {
		fs.IntVar(&sh.DocMin, prefix+"doc-min", sh.DocMin, sc.name+": shortest document in a conversation's first message, bytes")
		fs.IntVar(&sh.DocMax, prefix+"doc-max", sh.DocMax, sc.name+": longest document in a conversation's first message, bytes")
	}
	fs.DurationVar(&sh.Stagger, prefix+"stagger", sh.Stagger, sc.name+": conversation i starts at about i × this")
	if sh.OpenLoop {
		fs.DurationVar(&sh.Pause, prefix+"gap", sh.Pause, sc.name+": mean time between a conversation's due times (uniform 0.5×..1.5×); a turn is sent at its due time or when the previous answer is complete")
	} else {
		fs.DurationVar(&sh.Pause, prefix+"think", sh.Pause, sc.name+": mean pause between an answer and the next turn (uniform 0.5×..1.5×)")
	}
	fs.IntVar(&sc.maxConcurrent, prefix+"max-concurrent", sc.maxConcurrent, sc.name+": the relay's max_concurrent per replica")
	fs.Func(prefix+"affinity-slack", sc.name+": the relay's affinity_slack (default: the relay's own, a quarter of -"+prefix+"max-concurrent, at least 2)",
		func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return errors.New("want an integer, at least 0")
			}
			sc.affinitySlack = &n
			return nil
		})
	sc.sim.register(fs, prefix)
}

func (sc placementScenario) validate() error {
	sh := sc.shape
	switch {
	case sh.Conversations < 1 || sh.Turns < 1 || sc.maxConcurrent < 1:
		return fmt.Errorf("-conversations, -turns and -%s.max-concurrent must be at least 1", sc.name)
	case sh.SystemBytes < len(sh.Intro) || sh.ToolsBytes < 0 || sh.UserMin < 1 || sh.UserMax < sh.UserMin:
		return fmt.Errorf("%s: -system-bytes must be at least %d, -tools-bytes at least 0, and 1 <= -user-min <= -user-max", sc.name, len(sh.Intro))
	case sh.DocMin < 0 || sh.DocMax < sh.DocMin:
		return fmt.Errorf("%s: want 0 <= -doc-min <= -doc-max", sc.name)
	case sh.Stagger < 0 || sh.Pause < 0:
		return fmt.Errorf("%s: durations must be >= 0", sc.name)
	}
	if err := sc.sim.validate(); err != nil {
		return fmt.Errorf("%s: %w", sc.name, err)
	}
	return nil
}

// placementOptions are the subcommand's flags.
type placementOptions struct {
	scenarios      []placementScenario // the ones to run, in order
	replicas       int
	seed           uint64
	policies       []string
	prefixMinMatch float64 // 0: the relay's default
}

func parsePlacementOptions(args []string, stderr io.Writer) (placementOptions, error) {
	var o placementOptions
	all := []placementScenario{chatScenario(), agentScenario(), docScenario(), rushScenario()}
	fs := flag.NewFlagSet("modelrelay-bench placement", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workloads := fs.String("workloads", "chat,agent", "workloads to run, in order: chat, agent, doc, rush")
	conversations := fs.Int("conversations", 64, "concurrent multi-turn conversations (every workload)")
	turns := fs.Int("turns", 8, "turns per conversation (every workload)")
	fs.IntVar(&o.replicas, "replicas", 4, "simulated replicas")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the workloads (texts and schedules)")
	policies := fs.String("policies", "least_load,cache_aware", "routing policies to compare, in order")
	fs.Float64Var(&o.prefixMinMatch, "prefix-min-match", 0, "the relay's prefix_min_match (0: its default)")
	for i := range all {
		all[i].register(fs)
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.policies = commaList(*policies)
	for _, name := range commaList(*workloads) {
		i := slices.IndexFunc(all, func(sc placementScenario) bool { return sc.name == name })
		if i < 0 {
			return o, fmt.Errorf("-workloads: unknown workload %q (chat, agent, doc, rush)", name)
		}
		sc := all[i]
		sc.shape.Conversations, sc.shape.Turns = *conversations, *turns
		sc.shape.MaxTokens, sc.shape.Model = sc.sim.MaxTokens, sc.sim.Model
		if err := sc.validate(); err != nil {
			return o, err
		}
		o.scenarios = append(o.scenarios, sc)
	}
	switch {
	case o.replicas < 1:
		return o, fmt.Errorf("-replicas must be at least 1")
	case len(o.policies) == 0 || len(o.scenarios) == 0:
		return o, fmt.Errorf("-policies and -workloads: name at least one")
	}
	return o, nil
}

func commaList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func placementMain(args []string, stdout, stderr io.Writer) int {
	opts, err := parsePlacementOptions(args, stderr)
	if err != nil {
		if err != flag.ErrHelp {
			fmt.Fprintln(stderr, "modelrelay-bench placement:", err)
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := runPlacement(ctx, opts, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "modelrelay-bench placement:", err)
		return 1
	}
	return 0
}

// policyResult is one policy's run: the client's view and the replicas'.
type policyResult struct {
	policy   string
	accepted bool // the relay did not warn that `routing` is an unknown key
	run      placementRun
	replicas []SimStats  // counts during the workload only
	offered  offeredLoad // prefill work that reached the replicas over their capacity
}

// scenarioResult is one workload's runs, one per policy.
type scenarioResult struct {
	scenario placementScenario
	work     placementWorkload
	policies []policyResult
}

func runPlacement(ctx context.Context, opts placementOptions, stdout, stderr io.Writer) error {
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	repoRoot, err := findRepoRoot()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "modelrelay-placement-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	logf("work dir (configs, relay logs): %s", tmp)
	children := NewChildren(tmp)
	defer children.StopAll()
	logf("building modelrelay-server")
	bins, err := buildRelay(repoRoot, filepath.Join(tmp, "bin"))
	if err != nil {
		return err
	}
	defer os.RemoveAll(filepath.Join(tmp, "bin"))
	var results []scenarioResult
	for _, sc := range opts.scenarios {
		sr := scenarioResult{scenario: sc, work: newPlacementWorkload(sc.shape, opts.seed)}
		for _, policy := range opts.policies {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			logf("%s, %s: %d conversations × %d turns over %d fresh replicas", sc.name, policy, sc.shape.Conversations, sc.shape.Turns, opts.replicas)
			res, err := runPolicy(ctx, opts, sc, policy, sr.work, bins.server, children, tmp)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", sc.name, policy, err)
			}
			logf("%s, %s: done in %s, %d failed", sc.name, policy, res.run.makespan.Round(time.Millisecond), res.run.failed)
			sr.policies = append(sr.policies, res)
		}
		results = append(results, sr)
	}
	fmt.Fprint(stdout, placementReport(opts, results))
	return nil
}

// runPolicy starts fresh replicas and a relay routing with policy, replays the workload, and
// stops both.
func runPolicy(ctx context.Context, opts placementOptions, sc placementScenario, policy string, work placementWorkload,
	server string, children *Children, tmp string) (policyResult, error) {
	res := policyResult{policy: policy}
	var sims []*simServer
	defer func() {
		for _, s := range sims {
			s.Close()
		}
	}()
	for range opts.replicas {
		s, err := startSimServer(sc.sim)
		if err != nil {
			return res, err
		}
		sims = append(sims, s)
	}
	listen, err := FreePort()
	if err != nil {
		return res, err
	}
	label := "relay-" + sc.name + "-" + policy
	config := filepath.Join(tmp, label+".yaml")
	if err := os.WriteFile(config, []byte(placementConfig(opts, sc, policy, listen, sims)), 0o644); err != nil {
		return res, fmt.Errorf("write relay config: %w", err)
	}
	cmd, err := children.Start(label, relayEnv(""), server, "--config", config)
	if err != nil {
		return res, err
	}
	defer children.Stop(cmd)
	if err := waitChat(ctx, listen, sc.sim.Model); err != nil {
		return res, fmt.Errorf("relay not serving (see %s.log in %s): %w", label, tmp, err)
	}
	logText, _ := os.ReadFile(filepath.Join(tmp, label+".log"))
	res.accepted = !strings.Contains(string(logText), `unknown key "routing"`)
	before := make([]SimStats, len(sims))
	for i, s := range sims {
		before[i] = s.Stats()
	}
	res.run = work.replay(ctx, listen)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	var spans []prefillSpan
	for i, s := range sims {
		res.replicas = append(res.replicas, s.Stats().since(before[i]))
		spans = append(spans, s.PrefillsSince(res.run.start)...)
	}
	res.offered = offeredPrefill(spans, len(sims), offeredWindow)
	return res, nil
}

// placementConfig is the relay's YAML: one static backend per replica.
func placementConfig(opts placementOptions, sc placementScenario, policy, listen string, sims []*simServer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: %s\nlog_level: warn\nmax_queue_len: %d\nrouting: %s\n",
		listen, 4*sc.shape.Conversations, policy)
	if sc.affinitySlack != nil {
		fmt.Fprintf(&b, "affinity_slack: %d\n", *sc.affinitySlack)
	}
	if opts.prefixMinMatch != 0 {
		fmt.Fprintf(&b, "prefix_min_match: %g\n", opts.prefixMinMatch)
	}
	b.WriteString("backends:\n")
	for i, s := range sims {
		fmt.Fprintf(&b, "  - name: sim%d\n    url: %s\n    models: [%s]\n    max_concurrent: %d\n",
			i, s.URL, sc.sim.Model, sc.maxConcurrent)
	}
	return b.String()
}

// waitChat polls until one streaming chat through the relay completes: the relay answers
// before its backends are known, so only a real request proves readiness. The prompt is
// shorter than a block, so it leaves nothing in any cache.
func waitChat(ctx context.Context, addr, model string) error {
	w := placementWorkload{shape: placementShape{Model: model, MaxTokens: 1}}
	deadline := time.Now().Add(20 * time.Second)
	client := newTransport(1)
	defer client.CloseIdleConnections()
	for {
		_, res := w.ask(ctx, &http.Client{Transport: client, Timeout: 5 * time.Second}, addr,
			[]map[string]string{{"role": "user", "content": "ping"}})
		if res.err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return res.err
		}
		if err := sleepUntil(ctx, time.Now().Add(200*time.Millisecond)); err != nil {
			return err
		}
	}
}

// since is s minus an earlier snapshot, with the ratio recomputed.
func (s SimStats) since(before SimStats) SimStats {
	d := SimStats{Requests: s.Requests - before.Requests, PromptBlocks: s.PromptBlocks - before.PromptBlocks,
		CachedBlocks: s.CachedBlocks - before.CachedBlocks, BlocksHeld: s.BlocksHeld, PrefillMS: s.PrefillMS - before.PrefillMS}
	if d.PromptBlocks > 0 {
		d.HitRatio = float64(d.CachedBlocks) / float64(d.PromptBlocks)
	}
	return d
}

// hitRatio is cached over prompt blocks, all replicas together.
func (r policyResult) hitRatio() float64 {
	var prompt, cached int64
	for _, s := range r.replicas {
		prompt, cached = prompt+s.PromptBlocks, cached+s.CachedBlocks
	}
	if prompt == 0 {
		return 0
	}
	return float64(cached) / float64(prompt)
}

// loadRatio is the busiest replica's request count over the mean.
func (r policyResult) loadRatio() float64 {
	var total, most int64
	for _, s := range r.replicas {
		total += s.Requests
		most = max(most, s.Requests)
	}
	if total == 0 {
		return 0
	}
	return float64(most) * float64(len(r.replicas)) / float64(total)
}

func (r policyResult) ttfts() []time.Duration {
	var out []time.Duration
	for _, t := range r.run.turns {
		if t.err == nil {
			out = append(out, t.ttft)
		}
	}
	return out
}

func (r policyResult) perReplica() string {
	var parts []string
	for _, s := range r.replicas {
		parts = append(parts, fmt.Sprint(s.Requests))
	}
	return strings.Join(parts, " / ")
}

// movesCell is how often a conversation changed replica between turns, from the relay's
// x-modelrelay-target header ("n/a" when the relay does not send it).
func (r policyResult) movesCell() string {
	if r.run.named == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(r.run.moves)/float64(r.run.named))
}

func (r policyResult) prefillSeconds() float64 {
	var ms int64
	for _, s := range r.replicas {
		ms += s.PrefillMS
	}
	return float64(ms) / 1000
}

// prefillBusy is the share of the replicas' time spent prefilling, over the run's total time.
func (r policyResult) prefillBusy() float64 {
	if r.run.makespan <= 0 || len(r.replicas) == 0 {
		return 0
	}
	return r.prefillSeconds() / (r.run.makespan.Seconds() * float64(len(r.replicas)))
}

// heldCell is how many turns were sent after their due time because the previous answer was
// not complete, and how late on average; "n/a" for a closed loop.
func (r policyResult) heldCell(openLoop bool) string {
	if !openLoop {
		return "n/a"
	}
	if r.run.held == 0 || r.run.followUps == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.0f%%, %.2f s late", 100*float64(r.run.held)/float64(r.run.followUps),
		(r.run.lateSum / time.Duration(r.run.held)).Seconds())
}

// placementReport is the Markdown: per workload, its setup, one row per policy and the goals;
// then every workload's goals side by side.
func placementReport(opts placementOptions, results []scenarioResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Placement: least_load vs cache_aware\n\nMachine: %s\n\n", Machine())
	fmt.Fprintf(&b, "Every run: %d fresh simulated replicas (empty caches) behind the real relay, as static backends; "+
		"streaming conversations without session keys; seed %d, so the same bytes on the same schedule for every policy. "+
		"TTFT is client-side, to the first content token. Prefill busy: the replicas' prefill time over replicas × total time. "+
		"Offered prefill load: prefill work that reached the replicas (at the policy's own hit ratio) over their capacity "+
		"(one second of prefill per second each), over the arrival period and over its busiest %s.\n",
		opts.replicas, opts.seed, offeredWindow)
	for _, sr := range results {
		sr.report(&b)
	}
	if len(results) > 1 {
		b.WriteString("\n### Goals per workload (least_load ÷ cache_aware)\n\n" +
			"| workload | TTFT p50 (goal ≥ 2×) | total time (goal ≥ 1.5×) | busiest replica, cache_aware (goal ≤ 1.5 × mean) | cache hit ratio | goals met |\n" +
			"|---|--:|--:|--:|--:|--:|\n")
		for _, sr := range results {
			g, ok := sr.goals()
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s | %.2f× %s | %.2f× %s | %.2f × mean %s | %.1f%% → %.1f%% | %d of 3 |\n", sr.scenario.name,
				g.p50, metCell(g.p50 >= 2), g.total, metCell(g.total >= 1.5), g.busiest, metCell(g.busiest <= 1.5),
				100*g.hitBase, 100*g.hitAware, g.met())
		}
	}
	return b.String()
}

// placementGoals compares cache_aware with least_load on one workload.
type placementGoals struct {
	p50, p99, total   float64 // least_load ÷ cache_aware
	busiest           float64 // cache_aware's busiest replica over the mean
	hitBase, hitAware float64
}

func (g placementGoals) met() int {
	n := 0
	for _, ok := range []bool{g.p50 >= 2, g.total >= 1.5, g.busiest <= 1.5} {
		if ok {
			n++
		}
	}
	return n
}

// goals is false when the workload did not run both policies.
func (sr scenarioResult) goals() (placementGoals, bool) {
	base, aware := findPolicy(sr.policies, "least_load"), findPolicy(sr.policies, "cache_aware")
	if base == nil || aware == nil {
		return placementGoals{}, false
	}
	bt, at := base.ttfts(), aware.ttfts()
	return placementGoals{p50: ratioOf(percentile(bt, 50), percentile(at, 50)),
		p99: ratioOf(percentile(bt, 99), percentile(at, 99)), total: ratioOf(base.run.makespan, aware.run.makespan),
		busiest: aware.loadRatio(), hitBase: base.hitRatio(), hitAware: aware.hitRatio()}, true
}

// report writes one workload's section: its setup, the table, notes and the goals.
func (sr scenarioResult) report(b *strings.Builder) {
	sc, p, sh, w := sr.scenario, sr.scenario.sim, sr.scenario.shape, sr.work
	fmt.Fprintf(b, "\n### Workload `%s`: %s\n\n", sc.name, sc.title)
	fmt.Fprintf(b, "Replicas: prefill %s per uncached 256-byte block, serialized per replica; base %s; decode %s/token, %s; "+
		"KV cache %d blocks; relay max_concurrent %d each, affinity_slack %s. ", p.PerBlock, p.Base, p.Decode, decodeStallText(p), p.CapacityBlocks,
		sc.maxConcurrent, slackText(sc.affinitySlack))
	mean, most := w.promptBytes()
	fmt.Fprintf(b, "Conversations: %d × %d turns: a shared %d-byte system prompt", sh.Conversations, sh.Turns, len(w.system))
	if len(w.tools) > 0 {
		fmt.Fprintf(b, " and %d bytes of tools", len(w.tools))
	}
	if sh.DocMax > 0 {
		fmt.Fprintf(b, ", a %d–%d-byte document of its own in each conversation's first message", sh.DocMin, sh.DocMax)
	}
	fmt.Fprintf(b, ", %d–%d new bytes per turn, %d-token answers (last prompt %.1f KB mean, %.1f KB max); starts %s apart; ",
		sh.UserMin, sh.UserMax, sh.MaxTokens, float64(mean)/1000, float64(most)/1000, sh.Stagger)
	if sh.OpenLoop {
		fmt.Fprintf(b, "open loop: a conversation's turns are due a mean %s apart (uniform 0.5×..1.5×), %.1f turns/s offered while "+
			"all conversations are on, the last due at %.1f s; each is sent at its due time or when the previous answer is complete.\n\n",
			sh.Pause, float64(sh.Conversations)/sh.Pause.Seconds(), w.lastDue().Seconds())
	} else {
		fmt.Fprintf(b, "closed loop: %s mean think time after each answer.\n\n", sh.Pause)
	}
	b.WriteString("| policy | requests | failed | TTFT p50 | TTFT p99 | total time | cache hit ratio | GPU s prefilling | prefill busy " +
		"| offered prefill load (mean / peak) | requests per replica | max / mean | turns that moved | turns held by the previous answer | `routing` accepted |\n" +
		"|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|---|\n")
	for _, r := range sr.policies {
		t := r.ttfts()
		fmt.Fprintf(b, "| %s | %d | %d | %s | %s | %.2f s | %.1f%% | %.1f | %.0f%% | %s | %s | %.2f | %s | %s | %s |\n",
			r.policy, len(r.run.turns), r.run.failed, ms(percentile(t, 50)), ms(percentile(t, 99)),
			r.run.makespan.Seconds(), 100*r.hitRatio(), r.prefillSeconds(), 100*r.prefillBusy(), r.offered, r.perReplica(), r.loadRatio(),
			r.movesCell(), r.heldCell(sh.OpenLoop), yesNo(r.accepted))
	}
	for _, r := range sr.policies {
		if r.run.firstErr != nil {
			fmt.Fprintf(b, "\nNote: %s: first failure: %s", r.policy, oneLine(r.run.firstErr))
		}
		if !r.accepted {
			fmt.Fprintf(b, "\nNote: %s: the relay ignored `routing` as an unknown key, so this run is its default placement", r.policy)
		}
	}
	fmt.Fprintf(b, "\nNote: the schedule alone (starts, %s, answers at base + decode, no prefill, no waiting) "+
		"takes %.2f s: no policy's total time can be shorter.\n", map[bool]string{true: "due times", false: "think times"}[sh.OpenLoop],
		w.scheduleFloor(p).Seconds())
	g, ok := sr.goals()
	if !ok {
		return
	}
	fmt.Fprintf(b, "\n| `%s`: cache_aware vs least_load | least_load ÷ cache_aware | goal | met |\n|---|--:|---|---|\n", sc.name)
	fmt.Fprintf(b, "| TTFT p50 | %.2f× | ≥ 2× lower | %s |\n", g.p50, metCell(g.p50 >= 2))
	fmt.Fprintf(b, "| TTFT p99 | %.2f× | | |\n", g.p99)
	fmt.Fprintf(b, "| total time | %.2f× | ≥ 1.5× shorter | %s |\n", g.total, metCell(g.total >= 1.5))
	fmt.Fprintf(b, "| busiest replica (cache_aware) | %.2f × mean | ≤ 1.5 × mean | %s |\n", g.busiest, metCell(g.busiest <= 1.5))
	fmt.Fprintf(b, "| cache hit ratio | %.1f%% → %.1f%% | | |\n", 100*g.hitBase, 100*g.hitAware)
}

// slackText is how the report states a workload's affinity_slack.
func slackText(slack *int) string {
	if slack == nil {
		return "the relay's default (a quarter of max_concurrent, at least 2)"
	}
	return fmt.Sprint(*slack)
}

// decodeStallText says how prefill holds up decoding on the replica.
func decodeStallText(p simParams) string {
	switch {
	case !p.StallDecode:
		return "not held up by prefill"
	case p.ChunkBlocks == 0:
		return "held up while any prefill is queued (prefill-first)"
	}
	return fmt.Sprintf("held up by prefill for at most %d blocks (%s, chunked prefill)", p.ChunkBlocks,
		time.Duration(p.ChunkBlocks)*p.PerBlock)
}

func findPolicy(results []policyResult, name string) *policyResult {
	i := slices.IndexFunc(results, func(r policyResult) bool { return r.policy == name })
	if i < 0 {
		return nil
	}
	return &results[i]
}

func ratioOf(num, den time.Duration) float64 {
	if den <= 0 {
		return 0
	}
	return float64(num) / float64(den)
}

func metCell(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no (unknown key)"
}
