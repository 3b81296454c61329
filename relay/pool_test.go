package relay

import (
	"testing"
	"time"
)

func testPool(members ...*member) *Pool {
	p := newPool("t", 0, false, time.Minute)
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
			p.release(m)
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

func TestSelectionSkipsWhatCannotServe(t *testing.T) {
	draining := worker("draining", 4, 0, "m")
	draining.draining = true
	sick := upstreamMember("sick", 1)
	sick.setModels([]string{"m"})
	sick.unhealthy = true
	full := worker("full", 1, 1, "m")
	other := worker("other", 4, 0, "n")
	ok := worker("ok", 4, 2, "m")
	p := testPool(draining, sick, full, other, ok)
	if got := picks(t, p, "m", 1, true); got[0] != "ok" {
		t.Fatalf("picked %v", got)
	}
	p.mu.Lock()
	m, known := p.pickLocked("unknown-model")
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
	byModel, _ := p.candidatesLocked("b")
	old, _ := p.candidatesLocked("a")
	p.mu.Unlock()
	if len(byModel) != 1 || len(old) != 0 {
		t.Fatalf("index stale: b=%v a=%v", byModel, old)
	}
}
