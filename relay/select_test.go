package relay

import (
	"strings"
	"testing"
	"time"

	"modelrelay/relay/prefix"
)

// numbered gives members the seq and weight a pool would: seq in list order from 1, weight
// 1 unless set.
func numbered(ms ...*member) []*member {
	for i, m := range ms {
		m.seq = uint64(i + 1)
		if m.weight == 0 {
			m.weight = 1
		}
	}
	return ms
}

// gathered is the candidates one selection would start from: served, other than avoid.
func gathered(served []*member, avoid *member) *candidates {
	c := &candidates{}
	c.gather(served, avoid)
	return c
}

// idOf names a selection's result ("" for none).
func idOf(m *member) string {
	if m == nil {
		return ""
	}
	return m.id
}

// ids joins members' ids with commas.
func ids(ms []*member) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.id)
	}
	return strings.Join(s, ",")
}

// leastIDs joins the ids of the least loaded.
func leastIDs(least []tied) string {
	var ms []*member
	for _, e := range least {
		ms = append(ms, e.m)
	}
	return ids(ms)
}

// cacheAwarePool is testPool with routing cache_aware and the scheduling defaults.
func cacheAwarePool(members ...*member) *Pool {
	cfg := testConfig()
	cfg.sched = Scheduling{CacheAware: true}
	cfg.sched.fill()
	p := newPool("t", cfg, false)
	for _, m := range numbered(members...) {
		m.target = nopTarget{}
		p.members = append(p.members, m)
	}
	return p
}

// The rules apply in order, and the first that picks decides: prefer, then the session's last
// target, then the prompt's prefix, then least load. Each case starts from three idle workers
// where "least" would be w1 (round robin from the start), the session was last on w2 and w3
// holds the prompt's blocks.
func TestSelectionRulesApplyInOrder(t *testing.T) {
	blocks := []uint64{11, 12, 13, 14}
	cases := []struct {
		name    string
		prefer  string
		session string // "" = none; "known" was last on w2; "new" was never seen
		prompt  bool   // the request carries the prompt held by w3
		busy    string // a worker with no room left
		want    string
	}{
		{"nothing asked: least load", "", "", false, "", "w1"},
		{"prefer beats the session", "w3", "known", true, "", "w3"},
		{"prefer without room: the next rule", "w1", "known", true, "w1", "w2"},
		{"the session beats the prefix", "", "known", true, "", "w2"},
		{"a session without room: least load, not the prefix", "", "known", true, "w2", "w1"},
		{"a new session goes to its prefix", "", "new", true, "", "w3"},
		{"no session: the prefix", "", "", true, "", "w3"},
		{"the prefix's target without room: least load", "", "", true, "w3", "w1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w1, w2, w3 := worker("w1", 4, 0, "m"), worker("w2", 4, 0, "m"), worker("w3", 4, 0, "m")
			p := cacheAwarePool(w1, w2, w3)
			p.sessions.Set("known", w2.seq, time.Now())
			p.prefixes.Record(w3.seq, blocks)
			for _, m := range p.members {
				if m.id == c.busy {
					m.reported = m.maxConcurrent
				}
			}
			req := &Request{Model: "m", prefer: c.prefer}
			if c.session != "" || c.prompt {
				req.prompt = &prefix.Prompt{Session: c.session}
				if c.prompt {
					req.prompt.Blocks = blocks
				}
			}
			p.mu.Lock()
			got, known := p.pickLocked("m", nil, req)
			p.mu.Unlock()
			if idOf(got) != c.want || !known {
				t.Fatalf("picked %q (known %v), want %q", idOf(got), known, c.want)
			}
		})
	}
}

// Without a request (hasFree's question) no wish counts; a model no member serves is unknown;
// one whose members have no room is known.
func TestSelectionWithoutRequestOrCandidates(t *testing.T) {
	w1, w2 := worker("w1", 1, 1, "m"), worker("w2", 4, 0, "m", "n")
	p := cacheAwarePool(w1, w2)
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, known := p.pickLocked("m", nil, nil); idOf(m) != "w2" || !known {
		t.Errorf("no request: %q %v, want w2", idOf(m), known)
	}
	if m, known := p.pickLocked("m", w2, nil); m != nil || !known {
		t.Errorf("w2 avoided, w1 full: %q %v, want none, known", idOf(m), known)
	}
	if m, known := p.pickLocked("x", nil, nil); m != nil || known {
		t.Errorf("unserved model: %q %v, want none, unknown", idOf(m), known)
	}
}

// wish.read takes prefer always, and the session or else the prompt's blocks only when the
// pool places by cache.
func TestWishRead(t *testing.T) {
	sessions := prefix.NewSessions(time.Minute, 10)
	sessions.Set("known", 7, time.Now())
	blocks := []uint64{1, 2}
	cases := []struct {
		name     string
		req      *Request
		sessions *prefix.Sessions
		want     wish
	}{
		{"prefer only", &Request{prefer: "gpu-1"}, sessions, wish{prefer: "gpu-1"}},
		{"known session: its target, no blocks", &Request{prompt: &prefix.Prompt{Session: "known", Blocks: blocks}}, sessions,
			wish{session: 7, hasSession: true}},
		{"new session: the blocks", &Request{prompt: &prefix.Prompt{Session: "new", Blocks: blocks}}, sessions, wish{blocks: blocks}},
		{"no session: the blocks", &Request{prompt: &prefix.Prompt{Blocks: blocks}}, sessions, wish{blocks: blocks}},
		{"least_load: prefer only", &Request{prefer: "g", prompt: &prefix.Prompt{Session: "known", Blocks: blocks}}, nil, wish{prefer: "g"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := wish{prefer: "stale", session: 99, hasSession: true, blocks: []uint64{9}}
			w.read(c.req, c.sessions)
			if w.prefer != c.want.prefer || w.session != c.want.session || w.hasSession != c.want.hasSession ||
				len(w.blocks) != len(c.want.blocks) {
				t.Fatalf("got %+v, want %+v", w, c.want)
			}
		})
	}
}
