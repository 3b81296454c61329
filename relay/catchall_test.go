package relay

import (
	"testing"
	"time"
)

// A model finds its targets by name first; the catch-all (models "*") serves a model only
// while no target naming it can take work. Each case enters four requests for "demo" (each
// released before the next) and says where they went, or that the first waited.
func TestExactNameBeforeCatchAll(t *testing.T) {
	cases := []struct {
		name    string
		members func() []*member // the catch-all is always last: round robin would reach it
		model   string
		want    string // the target every request went to; "" = the first one queued
	}{
		{"an idle named worker always wins", func() []*member { return []*member{worker("named", 4, 0, "demo")} }, "demo", "named"},
		{"a catch-all registered first still loses", func() []*member {
			star := upstreamMember("star", 1)
			named := worker("named", 4, 0, "demo")
			return []*member{star, named}
		}, "demo", "named"},
		{"a named upstream wins over a catch-all upstream", func() []*member {
			named := upstreamMember("named", 1)
			named.setModels([]string{"demo"})
			return []*member{named}
		}, "demo", "named"},
		{"a model nobody names goes to the catch-all", func() []*member { return []*member{worker("named", 4, 0, "demo")} }, "other", "star"},
		{"a busy named target keeps its model: the request waits", func() []*member { return []*member{worker("named", 1, 1, "demo")} }, "demo", ""},
		{"a draining named target gives its model to the catch-all", func() []*member {
			m := worker("named", 4, 0, "demo")
			m.draining = true
			return []*member{m}
		}, "demo", "star"},
		{"a breaker-open named upstream gives its model to the catch-all", func() []*member {
			m := upstreamMember("named", 1)
			m.setModels([]string{"demo"})
			m.brk = breaker{state: breakerOpen, until: time.Now().Add(time.Hour)}
			return []*member{m}
		}, "demo", "star"},
		{"a named upstream whose cool-down ended holds its model again", func() []*member {
			m := upstreamMember("named", 1)
			m.setModels([]string{"demo"})
			m.brk = breaker{state: breakerOpen, until: time.Now().Add(-time.Second)}
			return []*member{m}
		}, "demo", ""}, // its trial waits for the pool's wake; the catch-all stays out of it
		{"one live named target among dead ones holds the model", func() []*member {
			gone := worker("gone", 4, 0, "demo")
			gone.draining = true
			return []*member{gone, worker("named", 1, 1, "demo")}
		}, "demo", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			members := c.members()
			if members[0].id != "star" {
				members = append(members, upstreamMember("star", 1))
			}
			p := testPool(members...)
			if c.want == "" {
				req := &Request{Model: c.model, handoff: make(chan handoff, 1)}
				m, queued, err := p.enter(req, false)
				if !queued || err != nil {
					t.Fatalf("went to %v (err %v), want it queued", m, err)
				}
				if p.hasFree(c.model) {
					t.Fatal("hasFree: the catch-all counts as free for a named model")
				}
				return
			}
			for i, got := range picks(t, p, c.model, 4, true) {
				if got != c.want {
					t.Fatalf("request %d went to %s, want %s", i+1, got, c.want)
				}
			}
		})
	}
}

// A request waiting for a busy named target goes to the catch-all the moment no named target
// can take work any more: the last one leaves, drains, or its breaker opens.
func TestWaiterMovesToCatchAllWhenNamedTargetsGoDown(t *testing.T) {
	cases := []struct {
		name string
		down func(p *Pool, named *member)
	}{
		{"it leaves", func(p *Pool, named *member) { p.drop(named) }},
		{"it drains", func(p *Pool, named *member) { p.update(named, func(m *member) { m.draining = true }) }},
		{"its breaker opens", func(p *Pool, named *member) { p.release(named, outcomeFailed, time.Millisecond) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			named := upstreamMember("named", 1)
			named.setModels([]string{"demo"})
			named.maxConcurrent = 1
			star := upstreamMember("star", 1)
			p := testPool(named, star)
			p.cfg.breaker.Failures = 1
			t.Cleanup(func() {
				p.mu.Lock()
				if p.timer != nil {
					p.timer.Stop()
				}
				p.mu.Unlock()
			})
			if got := picks(t, p, "demo", 1, false); got[0] != "named" {
				t.Fatalf("first request went to %s", got[0])
			}
			waiting := &Request{Model: "demo", handoff: make(chan handoff, 1)}
			if _, queued, err := p.enter(waiting, false); !queued || err != nil {
				t.Fatalf("second request: queued=%v err=%v", queued, err)
			}
			other := &Request{Model: "other", handoff: make(chan handoff, 1)}
			if m, _, _ := p.enter(other, false); m != star {
				t.Fatalf("a model nobody names went to %v", m)
			}
			p.release(star, outcomeOK, time.Millisecond)
			if len(waiting.handoff) != 0 {
				t.Fatal("the catch-all took a request its named target still holds")
			}
			c.down(p, named)
			select {
			case h := <-waiting.handoff:
				if h.m != star {
					t.Fatalf("handoff %+v", h)
				}
			default:
				t.Fatal("the waiter still waits next to an idle catch-all")
			}
		})
	}
}
