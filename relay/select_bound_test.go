package relay

import (
	"fmt"
	"testing"
	"time"

	"modelrelay/relay/prefix"
)

// The load bound: an explicit affinity_slack for every target; without one, a quarter of the
// target's own max_concurrent, at least 2 (2 for a target without a cap).
func TestLoadBound(t *testing.T) {
	capped := func(maxConcurrent int) *member { return worker("w", maxConcurrent, 0, "m") }
	cases := []struct {
		configured int // Scheduling.AffinitySlack
		target     *member
		want       float64
	}{
		{0, capped(32), 8},
		{0, capped(12), 3},
		{0, capped(13), 3},
		{0, capped(8), 2},
		{0, capped(1), 2},
		{0, upstreamMember("u", 1), 2}, // no cap
		{5, capped(32), 5},
		{5, capped(1), 5},
		{-1, capped(32), 0},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("configured %d, max_concurrent %d", c.configured, c.target.maxConcurrent), func(t *testing.T) {
			b := newLoadBound(c.configured)
			if got := b.slackOf(c.target); got != c.want {
				t.Fatalf("slack %v, want %v", got, c.want)
			}
			c.target.reported, c.target.inFlight = int(c.want)+1, int(c.want)+1 // load slack+1
			if !b.admits(c.target, 1) || b.admits(c.target, 0) {
				t.Fatalf("load %v: within the bound of 1 %v, of 0 %v; want true, false", c.target.load(), b.admits(c.target, 1), b.admits(c.target, 0))
			}
		})
	}
}

// By default a session stays on its 32-slot target up to 8 above the least loaded, while one
// on a 4-slot target of the same pool moves at 3 above: the slack is the target's own.
func TestDefaultSlackIsTheTargetsOwn(t *testing.T) {
	cases := []struct {
		home  string // the session's target
		above int    // its load above the others' (which are idle)
		stays bool
	}{
		{"big", 8, true},
		{"big", 9, false},
		{"small", 2, true},
		{"small", 3, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %d above", c.home, c.above), func(t *testing.T) {
			big, small, idle := worker("big", 32, 0, "m"), worker("small", 4, 0, "m"), worker("idle", 32, 0, "m")
			p := cacheAwarePool(big, small, idle)
			home := big
			if c.home == "small" {
				home = small
			}
			home.reported = c.above
			p.sessions.Set("s", home.seq, time.Now())
			req := &Request{Model: "m", prompt: &prefix.Prompt{Session: "s"}}
			p.mu.Lock()
			got, _ := p.pickLocked("m", nil, req)
			p.mu.Unlock()
			if (got == home) != c.stays {
				t.Fatalf("went to %s; staying on %s: want %v", idOf(got), home.id, c.stays)
			}
		})
	}
}
