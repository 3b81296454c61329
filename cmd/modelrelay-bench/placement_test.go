package main

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testShape() placementShape {
	return placementShape{Conversations: 5, Turns: 3, SystemBytes: 2048, UserMin: 300, UserMax: 1000,
		Stagger: 30 * time.Millisecond, Pause: 100 * time.Millisecond, MaxTokens: 32, Model: "sim"}
}

func testOpenShape() placementShape {
	sh := testShape()
	sh.OpenLoop, sh.ToolsBytes, sh.Pause = true, 1500, 2*time.Second
	return sh
}

// Every policy must replay the same bytes on the same schedule: the workload is a function of
// the seed alone.
func TestPlacementWorkloadIsSeeded(t *testing.T) {
	a, b := newPlacementWorkload(testShape(), 7), newPlacementWorkload(testShape(), 7)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different workloads")
	}
	if c := newPlacementWorkload(testShape(), 8); reflect.DeepEqual(a.chats, c.chats) {
		t.Fatal("different seeds, same conversations")
	}
	if len(a.system) != 2048 {
		t.Errorf("system prompt %d bytes, want 2048", len(a.system))
	}
	for i, c := range a.chats {
		if len(c.users) != 3 || len(c.think) != 3 {
			t.Fatalf("chat %d: %d turns, %d pauses", i, len(c.users), len(c.think))
		}
		if lo, hi := time.Duration(i)*30*time.Millisecond, time.Duration(i+1)*30*time.Millisecond; c.start < lo || c.start >= hi {
			t.Errorf("chat %d starts at %s, want in [%s, %s)", i, c.start, lo, hi)
		}
		for _, u := range c.users {
			if len(u) < 300 || len(u) > 1000 {
				t.Errorf("chat %d: user message of %d bytes", i, len(u))
			}
		}
		for _, d := range c.think {
			if d < 50*time.Millisecond || d >= 150*time.Millisecond {
				t.Errorf("chat %d: think time %s", i, d)
			}
		}
	}
}

// A conversation replayed directly against one simulated replica: every turn after the first
// finds its previous prompt and answer cached, which also proves the answers the client
// assembles from the stream are byte for byte what the replica computed.
func TestPlacementConversationStaysWarm(t *testing.T) {
	sh := testShape()
	sh.Conversations, sh.Pause, sh.MaxTokens = 1, time.Millisecond, 8
	p := testSimParams()
	p.PerBlock, p.Decode = 0, time.Millisecond
	s := startTestSim(t, p)
	w := newPlacementWorkload(sh, 1)
	run := w.replay(t.Context(), s.Addr())
	if run.failed != 0 || len(run.turns) != 3 {
		t.Fatalf("%d turns, %d failed: %v", len(run.turns), run.failed, run.firstErr)
	}
	if floor := w.scheduleFloor(p); run.makespan < floor || run.makespan > floor+time.Second {
		t.Errorf("total time %s, schedule floor %s: the floor must be a close lower bound", run.makespan, floor)
	}
	// Nothing is evicted from a cache this size, so a replica that computes no block twice
	// computed at most the blocks it holds now.
	st := s.Stats()
	if st.Requests != 3 || st.CachedBlocks == 0 || st.PromptBlocks-st.CachedBlocks > int64(st.BlocksHeld) {
		t.Errorf("stats %+v: some prompt blocks were computed twice", st)
	}
}

// The open-loop schedule is fixed by the seed too: due times that start with the
// conversation's start and never go back, and tools shared by every conversation.
func TestPlacementOpenLoopSchedule(t *testing.T) {
	a, b := newPlacementWorkload(testOpenShape(), 7), newPlacementWorkload(testOpenShape(), 7)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different workloads")
	}
	if c := newPlacementWorkload(testOpenShape(), 8); reflect.DeepEqual(a.chats, c.chats) {
		t.Fatal("different seeds, same conversations")
	}
	var tools []map[string]any
	if err := json.Unmarshal(a.tools, &tools); err != nil || len(a.tools) < 1100 || len(a.tools) > 1900 {
		t.Fatalf("tools: %d bytes, %v", len(a.tools), err)
	}
	for i, c := range a.chats {
		if len(c.due) != 3 || c.think != nil || c.due[0] != c.start {
			t.Fatalf("chat %d: due %v, think %v, start %s", i, c.due, c.think, c.start)
		}
		for k := 1; k < len(c.due); k++ {
			if c.due[k] < c.due[k-1] {
				t.Errorf("chat %d: due times %v go back", i, c.due)
			}
		}
	}
	if last := a.lastDue(); last <= 0 || last > time.Minute {
		t.Errorf("last due %s", last)
	}
}

// A turn whose due time passes before the previous answer is complete waits for it (its
// prompt contains that answer) and counts as held; a later one goes out at its due time.
func TestPlacementOpenLoopWaitsForAnswer(t *testing.T) {
	sh := testOpenShape()
	sh.Conversations, sh.MaxTokens = 1, 8
	p := testSimParams()
	p.PerBlock, p.Decode = 0, 5*time.Millisecond
	s := startTestSim(t, p)
	w := newPlacementWorkload(sh, 1)
	// The first answer takes over 35 ms: turn 1, due at 5 ms, must wait for it.
	w.chats[0].start, w.chats[0].due = 0, []time.Duration{0, 5 * time.Millisecond, 300 * time.Millisecond}
	run := w.replay(t.Context(), s.Addr())
	if run.failed != 0 || len(run.turns) != 3 || run.followUps != 2 {
		t.Fatalf("%d turns (%d follow-ups), %d failed: %v", len(run.turns), run.followUps, run.failed, run.firstErr)
	}
	if run.held != 1 || run.turns[1].late < 25*time.Millisecond || run.turns[2].late != 0 {
		t.Errorf("held %d, late %s and %s: want only turn 1 held, by about the first answer", run.held, run.turns[1].late, run.turns[2].late)
	}
	if floor := w.scheduleFloor(p); floor < 300*time.Millisecond || run.makespan < floor || run.makespan > floor+time.Second {
		t.Errorf("total time %s, schedule floor %s: turn 2 goes out at 300 ms, and the floor is a close lower bound", run.makespan, floor)
	}
	if st := s.Stats(); st.CachedBlocks == 0 || st.PromptBlocks-st.CachedBlocks > int64(st.BlocksHeld) {
		t.Errorf("stats %+v: some prompt blocks were computed twice", st)
	}
}

func TestParsePlacementOptions(t *testing.T) {
	o, err := parsePlacementOptions([]string{"-workloads", "agent", "-conversations", "3", "-agent.gap", "1s", "-agent.per-block", "2ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.scenarios) != 1 {
		t.Fatalf("%d workloads, want agent only", len(o.scenarios))
	}
	sc := o.scenarios[0]
	if sc.name != "agent" || !sc.shape.OpenLoop || sc.shape.Pause != time.Second || sc.sim.PerBlock != 2*time.Millisecond ||
		sc.shape.Conversations != 3 || sc.shape.Model != sc.sim.Model || sc.shape.MaxTokens != sc.sim.MaxTokens {
		t.Errorf("agent workload %+v", sc)
	}
	o, err = parsePlacementOptions(nil, io.Discard)
	if err != nil || len(o.scenarios) != 2 || o.scenarios[0].name != "chat" || o.scenarios[0].sim != defaultSimParams() {
		t.Errorf("defaults: %+v, %v", o.scenarios, err)
	}
	o, err = parsePlacementOptions([]string{"-workloads", "doc", "-doc.doc-min", "1000", "-doc.doc-max", "2000"}, io.Discard)
	if err != nil || len(o.scenarios) != 1 || o.scenarios[0].shape.DocMin != 1000 || o.scenarios[0].shape.DocMax != 2000 ||
		!o.scenarios[0].shape.OpenLoop || o.scenarios[0].sim != agentScenario().sim {
		t.Errorf("doc workload: %+v, %v", o.scenarios, err)
	}
	// rush is doc's sessions as a closed loop; both leave affinity_slack to the relay unless
	// a flag sets it, 0 included.
	o, err = parsePlacementOptions([]string{"-workloads", "rush,doc", "-doc.affinity-slack", "3"}, io.Discard)
	if err != nil || len(o.scenarios) != 2 {
		t.Fatalf("rush and doc: %+v, %v", o.scenarios, err)
	}
	rush, doc := o.scenarios[0], o.scenarios[1]
	if rush.name != "rush" || rush.shape.OpenLoop || rush.affinitySlack != nil || rush.sim != doc.sim || rush.shape.DocMax != doc.shape.DocMax ||
		doc.affinitySlack == nil || *doc.affinitySlack != 3 {
		t.Errorf("rush %+v\ndoc %+v", rush, doc)
	}
	o, err = parsePlacementOptions([]string{"-workloads", "rush", "-rush.affinity-slack", "0"}, io.Discard)
	if err != nil || len(o.scenarios) != 1 || o.scenarios[0].affinitySlack == nil || *o.scenarios[0].affinitySlack != 0 {
		t.Errorf("-rush.affinity-slack 0: %+v, %v", o.scenarios, err)
	}
	for _, bad := range [][]string{{"-workloads", "batch"}, {"-agent.user-min", "0"}, {"-chat.chunk-blocks", "-1"}, {"-policies", ""},
		{"-workloads", "rush", "-rush.affinity-slack", "-1"},
		{"-workloads", "doc", "-doc.doc-min", "200", "-doc.doc-max", "100"}, {"-chat.doc-max", "100"}} {
		if _, err := parsePlacementOptions(bad, io.Discard); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestPlacementConfig(t *testing.T) {
	sc := chatScenario()
	sc.shape = testShape()
	sims := []*simServer{{URL: "http://127.0.0.1:1001"}, {URL: "http://127.0.0.1:1002"}}
	got := placementConfig(placementOptions{}, sc, "cache_aware", "127.0.0.1:9", sims)
	for _, want := range []string{"routing: cache_aware\n", "  - name: sim1\n    url: http://127.0.0.1:1002\n    models: [sim]\n    max_concurrent: 8\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "affinity_slack") || strings.Contains(got, "prefix_min_match") {
		t.Errorf("config sets relay defaults it was not asked to:\n%s", got)
	}
	for _, slack := range []int{8, 0} {
		sc.affinitySlack = &slack
		if got := placementConfig(placementOptions{prefixMinMatch: 0.5}, sc, "cache_aware", "127.0.0.1:9", sims); !strings.Contains(got, fmt.Sprintf("affinity_slack: %d\n", slack)) ||
			!strings.Contains(got, "prefix_min_match: 0.5\n") {
			t.Errorf("config lacks the workload's affinity_slack %d or the run's prefix_min_match:\n%s", slack, got)
		}
	}
}

func TestPolicyResultBalance(t *testing.T) {
	r := policyResult{replicas: []SimStats{{Requests: 30, PromptBlocks: 10, CachedBlocks: 5},
		{Requests: 10, PromptBlocks: 30, CachedBlocks: 15}}}
	if got := r.loadRatio(); got != 1.5 {
		t.Errorf("load ratio %v, want 30 / mean 20 = 1.5", got)
	}
	if got := r.hitRatio(); got != 0.5 {
		t.Errorf("hit ratio %v, want 20/40", got)
	}
}

// The report has a section per workload with its goals, and the goals side by side.
func TestPlacementReport(t *testing.T) {
	result := func(policy string, ttft time.Duration, makespan time.Duration, requests ...int64) policyResult {
		r := policyResult{policy: policy, accepted: true, run: placementRun{makespan: makespan}}
		for range 10 {
			r.run.turns = append(r.run.turns, turnResult{ttft: ttft})
		}
		for _, n := range requests {
			r.replicas = append(r.replicas, SimStats{Requests: n, PromptBlocks: 10, CachedBlocks: 5, PrefillMS: 500})
		}
		return r
	}
	chat, agent := chatScenario(), agentScenario()
	chat.shape.Conversations, agent.shape.Conversations = 2, 2
	results := []scenarioResult{
		{scenario: chat, work: newPlacementWorkload(chat.shape, 1), policies: []policyResult{
			result("least_load", 30*time.Millisecond, 5*time.Second, 5, 5),
			result("cache_aware", 20*time.Millisecond, 4*time.Second, 5, 5)}},
		{scenario: agent, work: newPlacementWorkload(agent.shape, 1), policies: []policyResult{
			result("least_load", 300*time.Millisecond, 30*time.Second, 5, 5),
			result("cache_aware", 100*time.Millisecond, 15*time.Second, 8, 2)}},
	}
	got := placementReport(placementOptions{replicas: 2, seed: 1}, results)
	for _, want := range []string{
		"### Workload `chat`: 8B-class", "### Workload `agent`: 70B-class",
		"| TTFT p50 | 1.50× | ≥ 2× lower | **not met** |", "| TTFT p50 | 3.00× | ≥ 2× lower | met |",
		"held up by prefill for at most 32 blocks (128ms, chunked prefill)", "held up while any prefill is queued",
		"| chat | 1.50× **not met** | 1.25× **not met** | 1.00 × mean met | 50.0% → 50.0% | 1 of 3 |",
		"| agent | 3.00× met | 2.00× met | 1.60 × mean **not met** | 50.0% → 50.0% | 2 of 3 |",
		"| least_load | 10 | 0 | 300.00 ms |", "| 1.0 | 10% | 0% / 0% | 5 / 5 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

// The doc workload: each conversation's first message carries a document of its own before
// its question; later turns are short questions only.
func TestPlacementDocWorkload(t *testing.T) {
	sh := docScenario().shape
	sh.Conversations = 4
	w := newPlacementWorkload(sh, 1)
	docs := map[string]bool{}
	for i, c := range w.chats {
		first := c.users[0]
		if !strings.HasPrefix(first, sh.DocLead) {
			t.Fatalf("chat %d: first message does not start with the document's lead", i)
		}
		doc, question, ok := strings.Cut(strings.TrimPrefix(first, sh.DocLead), "\n\n")
		if !ok || len(doc) < sh.DocMin || len(doc) > sh.DocMax || len(question) < sh.UserMin || len(question) > sh.UserMax {
			t.Errorf("chat %d: document of %d bytes, question of %d (cut %v)", i, len(doc), len(question), ok)
		}
		docs[doc] = true
		for turn, u := range c.users[1:] {
			if len(u) < sh.UserMin || len(u) > sh.UserMax {
				t.Errorf("chat %d, turn %d: %d bytes", i, turn+1, len(u))
			}
		}
	}
	if len(docs) != len(w.chats) {
		t.Errorf("%d distinct documents in %d conversations", len(docs), len(w.chats))
	}
	if mean, _ := w.promptBytes(); mean < sh.DocMin {
		t.Errorf("last prompt %d bytes on average: the document is missing from the history", mean)
	}
}

func TestOfferedPrefill(t *testing.T) {
	t0 := time.Now()
	span := func(at, d time.Duration) prefillSpan { return prefillSpan{at: t0.Add(at), d: d} }
	for _, c := range []struct {
		name       string
		spans      []prefillSpan
		mean, peak float64
	}{
		{"none", nil, 0, 0},
		// 1.7 s of prefill over 3 s on 2 replicas; the busiest second (0..0.5 s) holds 1.5 s.
		{"burst then quiet", []prefillSpan{span(3*time.Second, 200*time.Millisecond), span(0, time.Second),
			span(500*time.Millisecond, 500*time.Millisecond)}, 1.7 / 6, 0.75},
		// A window is (t - 1 s, t]: prefills exactly a window apart are never counted together.
		{"a window apart", []prefillSpan{span(0, time.Second), span(time.Second, time.Second), span(2*time.Second, time.Second)}, 3.0 / 4, 0.5},
		// An arrival period shorter than the window counts as one window.
		{"one instant", []prefillSpan{span(0, 400*time.Millisecond), span(0, 400*time.Millisecond)}, 0.4, 0.4},
	} {
		got := offeredPrefill(c.spans, 2, time.Second)
		if diff := max(got.mean-c.mean, c.mean-got.mean, got.peak-c.peak, c.peak-got.peak); diff > 1e-9 {
			t.Errorf("%s: %+v, want mean %v, peak %v", c.name, got, c.mean, c.peak)
		}
	}
}
