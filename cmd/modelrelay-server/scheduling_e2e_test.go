package main

// Scheduling through the real binary: the scheduling keys of the config
// file take effect — routing (default and both values), affinity_slack (0 included),
// priority_aging, max_queue_len with priorities — and a client sees x-modelrelay-target,
// x-modelrelay-queue-ms and x_pool_meta while x_pool_options never reaches a model server.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// schedBody is a chat body for model sm with a tag the fake's record shows, and more members.
func schedBody(tag string, extra ...string) string {
	return chatJSON("sm", append([]string{fmt.Sprintf(`"tag":%q`, tag)}, extra...)...)
}

// tagOf is the tag of the body a fake received.
func tagOf(c flakyCall) string {
	var v struct {
		Tag string `json:"tag"`
	}
	json.Unmarshal(c.Raw, &v)
	return v.Tag
}

// servedTarget checks a 200 and that x-modelrelay-target names the fake that answered (X-Fake)
// with a queue time in whole milliseconds; it returns that name.
func servedTarget(t testing.TB, label string, a relayAnswer) string {
	t.Helper()
	if a.err != nil || a.status != 200 {
		t.Fatalf("%s: %s", label, a)
	}
	fake := a.header.Get("X-Fake")
	if got := a.header.Get("X-Modelrelay-Target"); got != fake || fake == "" {
		t.Errorf("%s: x-modelrelay-target %q, answered by %q", label, got, fake)
	}
	if ms, err := strconv.Atoi(a.header.Get("X-Modelrelay-Queue-Ms")); err != nil || ms < 0 {
		t.Errorf("%s: x-modelrelay-queue-ms %q", label, a.header.Get("X-Modelrelay-Queue-Ms"))
	}
	return fake
}

// threeFakes are three fake model servers for model sm and their backends: section.
func threeFakes(t *testing.T) (map[string]*flaky, string) {
	t.Helper()
	fakes := map[string]*flaky{}
	yaml := "backends:\n"
	for _, name := range []string{"g1", "g2", "g3"} {
		fakes[name] = newFlaky(t, name)
		yaml += backendYAML(name, fakes[name].url, "sm")
	}
	return fakes, yaml
}

func TestE2ESessionAffinityFollowsRouting(t *testing.T) {
	t.Parallel()
	_, backends := threeFakes(t)
	for _, c := range []struct {
		routing string
		sticky  bool
	}{
		{"", true}, // the default is cache_aware
		{"routing: cache_aware\n", true},
		{"routing: least_load\n", false},
	} {
		r := startRelay(t, c.routing+backends, nil)
		session := http.Header{"X-Session-Id": {"conversation"}}
		used := map[string]bool{}
		for turn := range 6 {
			used[servedTarget(t, c.routing, r.send("/v1/chat/completions", session, schedBody(fmt.Sprint("turn ", turn))))] = true
		}
		if sticky := len(used) == 1; sticky != c.sticky {
			t.Errorf("config %q: six turns of one session went to %v; want one target: %v", c.routing, used, c.sticky)
		}
	}
}

func TestE2EAffinitySlackZeroMovesABusySession(t *testing.T) {
	t.Parallel()
	fakes, backends := threeFakes(t)
	r := startRelay(t, "affinity_slack: 0\n"+backends, nil)
	session := http.Header{"X-Session-Id": {"busy"}}
	turn := func(n int, extra ...string) relayAnswer {
		return sendWithin(8*time.Second, r.addr, "", "/v1/chat/completions", session, schedBody(fmt.Sprint("turn ", n), extra...))
	}
	if got := servedTarget(t, "turn 1", turn(1, `"x_pool_options":{"prefer_gpu":"g2"}`)); got != "g2" {
		t.Fatalf("turn 1 went to %s despite prefer_gpu g2", got)
	}
	if got := servedTarget(t, "turn 2", turn(2)); got != "g2" {
		t.Fatalf("turn 2 went to %s, want g2 where the session is", got)
	}

	// One call in flight on g2 is already past a slack of 0: the next turn moves.
	entered, release := fakes["g2"].holdCalls()
	defer release()
	held := make(chan relayAnswer, 1)
	go func() { held <- r.chat("sm", `"x_pool_options":{"prefer_gpu":"g2"}`) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the load request never reached g2")
	}
	moved := servedTarget(t, "turn 3", turn(3))
	if moved == "g2" {
		t.Fatal("turn 3 went to the busy g2")
	}
	release()
	if got := servedTarget(t, "held", <-held); got != "g2" {
		t.Errorf("the held request was served by %s", got)
	}
	if got := servedTarget(t, "turn 4", turn(4)); got != moved {
		t.Errorf("turn 4 went to %s, want %s where the session moved", got, moved)
	}
}

func TestE2EPriorityAgingAndShedding(t *testing.T) {
	t.Parallel()
	const aging = 300 * time.Millisecond
	solo := newFlaky(t, "solo")
	r := startRelay(t, "priority_aging: 300ms\nmax_queue_len: 3\nqueue_timeout: 20s\nbackends:\n"+
		backendYAML("solo", solo.url, "sm")+"    max_concurrent: 1\n", nil)
	entered, release := solo.holdCalls()
	defer release()
	answers := map[string]chan relayAnswer{}
	send := func(tag string, header http.Header, extra ...string) {
		ch := make(chan relayAnswer, 1)
		answers[tag] = ch
		go func() { ch <- r.send("/v1/chat/completions", header, schedBody(tag, extra...)) }()
	}
	send("first", nil)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first request never reached the backend")
	}
	send("old-low", nil, `"x_pool_options":{"priority":"low"}`)
	waitQueued(t, r.addr, 1)
	time.Sleep(aging + aging/2) // the scenario: the low waiter ages past one class
	send("normal", nil)
	waitQueued(t, r.addr, 2)
	send("new-low", http.Header{"X-Modelrelay-Priority": {"low"}})
	waitQueued(t, r.addr, 3)

	// The queue is full: a high arrival sheds the newest low waiter.
	send("high", nil, `"x_pool_options":{"priority":"high"}`)
	select {
	case a := <-answers["new-low"]:
		if a.status != 429 || a.retryAfter() < 1 {
			t.Fatalf("the shed waiter got %s, want 429 with Retry-After", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the newest low waiter was not shed")
	}
	// Nothing is lower than low: a low arrival is refused at once.
	if a := r.quick("sm", `"tag":"refused"`, `"x_pool_options":{"priority":"low"}`); a.status != 429 || a.retryAfter() < 1 {
		t.Errorf("a low arrival at a full queue: %s, want 429 with Retry-After", a)
	}

	release()
	for _, tag := range []string{"first", "old-low", "normal", "high"} {
		servedTarget(t, tag, <-answers[tag])
	}
	pos := map[string]int{}
	for i, c := range solo.calls() {
		pos[tagOf(c)] = i + 1
	}
	if pos["new-low"] != 0 || pos["refused"] != 0 {
		t.Errorf("a shed or refused request reached the backend: %v", pos)
	}
	// The low waiter queued one aging period before the normal one passes it.
	if pos["old-low"] == 0 || pos["normal"] == 0 || pos["old-low"] > pos["normal"] {
		t.Errorf("order at the backend %v: the aged low waiter should go before the newer normal one", pos)
	}
}

func TestE2EPoolMetaAndOptionsStayTheRelays(t *testing.T) {
	t.Parallel()
	fakes, backends := threeFakes(t)
	r := startRelay(t, backends, nil)
	a := r.chat("sm", `"x_pool_options":{"prefer_gpu":"g3","priority":"high","something_new":{"k":1}}`)
	if got := servedTarget(t, "with x_pool_options", a); got != "g3" {
		t.Fatalf("prefer_gpu g3: served by %s", got)
	}
	var v struct {
		Meta *struct {
			Target      string `json:"target"`
			QueueMS     *int64 `json:"queue_ms"`
			InferenceMS *int64 `json:"inference_ms"`
		} `json:"x_pool_meta"`
		ServedBy string `json:"served_by"`
	}
	if err := json.Unmarshal(a.body, &v); err != nil || v.Meta == nil || v.Meta.Target != "g3" ||
		v.Meta.QueueMS == nil || v.Meta.InferenceMS == nil || v.ServedBy != "g3" {
		t.Fatalf("answer %s: want the fake's answer with x_pool_meta naming g3", a.body)
	}
	if c, ok := fakes["g3"].lastCall(); !ok {
		t.Fatal("g3 saw nothing")
	} else {
		checkBodyAt(t, "with x_pool_options", c, "sm")
	}
	// Without x_pool_options: the headers, no x_pool_meta.
	a = r.chat("sm")
	servedTarget(t, "plain", a)
	var plain map[string]any
	json.Unmarshal(a.body, &plain)
	if _, ok := plain["x_pool_meta"]; ok {
		t.Errorf("x_pool_meta without x_pool_options: %s", a.body)
	}
}
