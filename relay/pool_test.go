package relay

import (
	"errors"
	"log/slog"
	"testing"
	"time"
)

func testConfig() *poolConfig {
	c := &poolConfig{keepKnown: time.Minute, workerGrace: 10 * time.Second, log: slog.New(slog.DiscardHandler), names: &modelNames{}}
	c.breaker.fill()
	return c
}

func testPool(members ...*member) *Pool {
	p := newPool("t", testConfig(), false)
	for i, m := range members {
		m.seq = uint64(i + 1)
		m.target = nopTarget{}
		if m.weight == 0 {
			m.weight = 1
		}
		p.members = append(p.members, m)
	}
	return p
}

func worker(id string, maxConcurrent, load int, models ...string) *member {
	m := &member{id: id, kind: kindWorker, maxConcurrent: maxConcurrent, reported: load}
	m.setModels(models)
	return m
}

func upstreamMember(id string, weight float64) *member {
	m := &member{id: id, kind: kindUpstream, weight: weight}
	m.setModels([]string{"*"})
	return m
}

func picks(t *testing.T, p *Pool, model string, n int, release bool) []string {
	t.Helper()
	var got []string
	for range n {
		req := &Request{Model: model, handoff: make(chan handoff, 1)}
		m, queued, err := p.enter(req, false)
		if err != nil || queued {
			t.Fatalf("enter: queued=%v err=%v", queued, err)
		}
		got = append(got, m.id)
		if release {
			p.release(m, outcomeOK, time.Millisecond)
		}
	}
	return got
}

func TestSelectionExampleFromSpec(t *testing.T) {
	// Loads 0, 0, 1 and capacity 3: requests 1-4 go to w1, w2, w3, w1.
	p := testPool(worker("w1", 3, 0, "m"), worker("w2", 3, 0, "m"), worker("w3", 3, 1, "m"))
	got := picks(t, p, "m", 4, false)
	want := []string{"w1", "w2", "w3", "w1"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestSmoothWeightsOneToThree(t *testing.T) {
	p := testPool(upstreamMember("a", 1), upstreamMember("b", 3))
	count := map[string]int{}
	for _, id := range picks(t, p, "any", 400, true) {
		count[id]++
	}
	if count["a"] != 100 || count["b"] != 300 {
		t.Fatalf("got %v, want a:100 b:300", count)
	}
}

// Asking whether a pool has room (a route with several pools asks each) takes no turn of its
// weighted round robin: the shares stay 1:3 however often it is asked.
func TestHasFreeTakesNoTurn(t *testing.T) {
	p := testPool(upstreamMember("a", 1), upstreamMember("b", 3))
	count := map[string]int{}
	for range 400 {
		for range 3 { // with the pick, a whole period of the 1:3 round: any turn taken shows
			if !p.hasFree("any") {
				t.Fatal("hasFree: false with two idle targets")
			}
		}
		count[picks(t, p, "any", 1, true)[0]]++
	}
	if count["a"] != 100 || count["b"] != 300 {
		t.Fatalf("got %v, want a:100 b:300", count)
	}
}

func TestSelectionSkipsWhatCannotServe(t *testing.T) {
	draining := worker("draining", 4, 0, "m")
	draining.draining = true
	sick := upstreamMember("sick", 1)
	sick.setModels([]string{"m"})
	sick.brk = breaker{state: breakerOpen, until: time.Now().Add(time.Hour)}
	full := worker("full", 1, 1, "m")
	other := worker("other", 4, 0, "n")
	ok := worker("ok", 4, 2, "m")
	p := testPool(draining, sick, full, other, ok)
	if got := picks(t, p, "m", 1, true); got[0] != "ok" {
		t.Fatalf("picked %v", got)
	}
	p.mu.Lock()
	m, known := p.pickLocked("unknown-model", nil, nil)
	p.mu.Unlock()
	if m != nil || known {
		t.Fatalf("unknown model: %v %v", m, known)
	}
}

func TestStarServesAnyModelAndIndexFollowsModelChanges(t *testing.T) {
	star := worker("star", 1, 0, "*")
	named := worker("named", 1, 0, "a")
	p := testPool(named, star)
	if got := picks(t, p, "zzz", 1, true); got[0] != "star" {
		t.Fatalf("picked %v", got)
	}
	p.setModels(named, []string{"b"}, 0)
	p.mu.Lock()
	byModel, _ := p.indexLocked("b")
	old, _ := p.indexLocked("a")
	p.mu.Unlock()
	if len(byModel) != 1 || len(old) != 0 {
		t.Fatalf("index stale: b=%v a=%v", byModel, old)
	}
}

// A model whose every target is breaker-open fails at once with the time until the first
// cool-down ends; one whose last worker left waits out the grace, then fails; one never seen
// is 404.
func TestOutlookFailsFastWithTheWait(t *testing.T) {
	down := upstreamMember("down", 1)
	down.setModels([]string{"m"})
	down.brk = breaker{state: breakerOpen, until: time.Now().Add(2500 * time.Millisecond)}
	p := testPool(down)
	req := &Request{Model: "m", handoff: make(chan handoff, 1)}
	_, queued, err := p.enter(req, false)
	if queued || !errors.Is(err, errNoReplica) || retryAfter(err) != "3" {
		t.Fatalf("all open: queued=%v err=%v retry-after=%s", queued, err, retryAfter(err))
	}
	if _, _, err := p.enter(&Request{Model: "never", handoff: make(chan handoff, 1)}, false); err == nil || err.(*relayError).status != 404 {
		t.Fatalf("never seen: %v", err)
	}

	p.knownUntil["left"] = time.Now().Add(p.cfg.keepKnown - time.Second) // left a second ago
	if _, queued, err := p.enter(&Request{Model: "left", handoff: make(chan handoff, 1)}, false); !queued || err != nil {
		t.Fatalf("within grace: queued=%v err=%v", queued, err)
	}
	p.knownUntil["gone"] = time.Now().Add(p.cfg.keepKnown - p.cfg.workerGrace - time.Second)
	if _, _, err := p.enter(&Request{Model: "gone", handoff: make(chan handoff, 1)}, false); !errors.Is(err, errNoReplica) {
		t.Fatalf("past grace: %v", err)
	}
}

// The estimated wait is (queue ahead + 1) x mean service time / capacity; max_latency_ms
// refuses before queueing and a full queue says how long.
func TestEstimatedWaitFollowsTheQueue(t *testing.T) {
	w := worker("w", 2, 2, "m") // both slots busy
	p := testPool(w)
	p.cfg.maxQueue = 4
	p.meanService = 2 * time.Second
	for i := range 4 {
		_, queued, err := p.enter(&Request{Model: "m", handoff: make(chan handoff, 1)}, false)
		if !queued || err != nil {
			t.Fatalf("request %d: queued=%v err=%v", i, queued, err)
		}
	}
	_, _, err := p.enter(&Request{Model: "m", handoff: make(chan handoff, 1)}, false)
	if !errors.Is(err, errQueueFull) || retryAfter(err) != "5" { // (4+1) x 2 s / 2
		t.Fatalf("full queue: %v, Retry-After %s", err, retryAfter(err))
	}
	p.cfg.maxQueue = 0
	_, queued, err := p.enter(&Request{Model: "m", maxLatency: 4 * time.Second, handoff: make(chan handoff, 1)}, false)
	if queued || !errors.Is(err, errTooSlow) {
		t.Fatalf("max latency: queued=%v err=%v", queued, err)
	}
	if got := p.estimateLocked("m", &clock{}); got != 5*time.Second {
		t.Fatalf("estimate %v", got)
	}
}

// An upstream whose breaker opens takes the queued requests' hopes with it: they fail to
// their fallback at once instead of waiting out the queue timeout.
func TestBreakerOpeningFailsTheQueuedRequests(t *testing.T) {
	u := upstreamMember("u", 1)
	u.setModels([]string{"m"})
	u.maxConcurrent = 1
	p := testPool(u)
	p.cfg.breaker.Failures = 1
	first := &Request{Model: "m", handoff: make(chan handoff, 1)}
	m, _, _ := p.enter(first, false)
	waiting := &Request{Model: "m", handoff: make(chan handoff, 1)}
	if _, queued, _ := p.enter(waiting, false); !queued {
		t.Fatal("second request was not queued")
	}
	p.release(m, outcomeFailed, time.Millisecond)
	select {
	case h := <-waiting.handoff:
		if !errors.Is(h.err, errNoReplica) {
			t.Fatalf("handoff %+v", h)
		}
	default:
		t.Fatal("the queued request is still waiting")
	}
	p.mu.Lock()
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
}

// queued enters a request of class c for "m" into p, where it must wait.
func queued(t *testing.T, p *Pool, c priority, arrival time.Time) *Request {
	t.Helper()
	req := &Request{Model: "m", priority: c, arrival: arrival, handoff: make(chan handoff, 1)}
	if _, q, err := p.enter(req, false); !q || err != nil {
		t.Fatalf("not queued: %v", err)
	}
	return req
}

// served frees w's slot and returns the request that took it.
func served(t *testing.T, p *Pool, w *member, waiting ...*Request) *Request {
	t.Helper()
	p.release(w, outcomeOK, time.Millisecond)
	for _, r := range waiting {
		select {
		case h := <-r.handoff:
			if h.m != w {
				t.Fatalf("handoff %+v", h)
			}
			return r
		default:
		}
	}
	t.Fatal("nobody took the freed slot")
	return nil
}

// With one busy slot: high before normal before low, first come first served within a class;
// a low waiter that waited two agings is high by then and passes newer normals.
func TestPriorityClassesAndAging(t *testing.T) {
	w := worker("w", 1, 0, "m")
	p := testPool(w)
	p.queue.aging = 10 * time.Second
	busy := &Request{Model: "m", handoff: make(chan handoff, 1)}
	if m, _, _ := p.enter(busy, false); m != w {
		t.Fatal("the slot was not free")
	}
	now := time.Now()
	low := queued(t, p, priorityLow, now)
	normal1 := queued(t, p, priorityNormal, now)
	high := queued(t, p, priorityHigh, now)
	normal2 := queued(t, p, priorityNormal, now)
	all := []*Request{low, normal1, high, normal2}
	for i, want := range []*Request{high, normal1, normal2, low} {
		if got := served(t, p, w, all...); got != want {
			t.Fatalf("turn %d went to class %d order %d", i, got.priority, got.order)
		}
	}

	old := queued(t, p, priorityLow, now.Add(-25*time.Second)) // aged two steps: high by now
	newer := queued(t, p, priorityNormal, now)
	if got := served(t, p, w, old, newer); got != old {
		t.Fatal("an aged low waiter did not pass a newer normal one")
	}
	served(t, p, w, newer)
}

// A full queue takes a higher-class arrival by shedding the newest waiter of the lowest lower
// class, which gets 429; an arrival of the lowest class is refused instead.
func TestFullQueueShedsTheNewestLowerWaiter(t *testing.T) {
	w := worker("w", 1, 1, "m")
	p := testPool(w)
	p.cfg.maxQueue = 3
	now := time.Now()
	low1 := queued(t, p, priorityLow, now)
	low2 := queued(t, p, priorityLow, now)
	queued(t, p, priorityNormal, now)
	high := queued(t, p, priorityHigh, now)
	select {
	case h := <-low2.handoff:
		if !errors.Is(h.err, errQueueFull) {
			t.Fatalf("shed waiter got %v", h.err)
		}
	default:
		t.Fatal("nobody was shed")
	}
	if len(low1.handoff) != 0 || len(high.handoff) != 0 {
		t.Fatal("the wrong waiter was shed")
	}
	if _, _, err := p.enter(&Request{Model: "m", priority: priorityLow, handoff: make(chan handoff, 1)}, false); !errors.Is(err, errQueueFull) {
		t.Fatalf("a low arrival into a full queue: %v", err)
	}
}
