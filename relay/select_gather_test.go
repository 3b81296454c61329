package relay

import (
	"testing"
	"time"
)

// gather: the eligible members (available, not avoided), the lowest load among them and the
// ones at it, in the order served.
func TestGatherEligibleAndLeastLoaded(t *testing.T) {
	up := func(id string, weight float64, inFlight, maxConcurrent int) *member {
		m := upstreamMember(id, weight)
		m.inFlight, m.maxConcurrent = inFlight, maxConcurrent
		return m
	}
	with := func(m *member, change func(*member)) *member { change(m); return m }
	cases := []struct {
		name       string
		served     []*member
		avoid      string
		least      string
		lowest     float64
		ineligible string // the members eligible rejects
	}{
		{"the lowest load, ties in order", []*member{worker("a", 4, 1, "m"), worker("b", 4, 0, "m"), worker("c", 4, 0, "m")},
			"", "b,c", 0, ""},
		{"a worker's load is the larger of reported and in flight",
			[]*member{with(worker("a", 4, 0, "m"), func(m *member) { m.inFlight = 2 }), worker("b", 4, 1, "m")}, "", "b", 1, ""},
		{"an upstream's load is in flight per weight", []*member{up("a", 1, 1, 0), up("b", 2, 1, 0)}, "", "b", 0.5, ""},
		{"the avoided target is passed over", []*member{worker("a", 4, 0, "m"), worker("b", 4, 2, "m")}, "a", "b", 2, "a"},
		{"full, draining, suspect and gone are not eligible", []*member{
			worker("full", 1, 1, "m"),
			with(worker("draining", 4, 0, "m"), func(m *member) { m.draining = true }),
			with(worker("suspect", 4, 0, "m"), func(m *member) { m.setOut(outSuspect, true) }),
			with(worker("gone", 4, 0, "m"), func(m *member) { m.setOut(outGone, true) }),
			worker("ok", 4, 3, "m"),
		}, "", "ok", 3, "full,draining,suspect,gone"},
		{"an upstream without a cap is never full", []*member{up("a", 1, 100, 0), up("b", 1, 1, 1)}, "", "a", 100, "b"},
		{"an open breaker is not eligible, a half-open one takes one trial", []*member{
			with(up("open", 1, 0, 0), func(m *member) { m.brk = breaker{state: breakerOpen, until: time.Now().Add(time.Hour)} }),
			with(up("trying", 1, 0, 0), func(m *member) { m.brk = breaker{state: breakerHalfOpen, trial: true} }),
			with(up("half", 1, 0, 0), func(m *member) { m.brk = breaker{state: breakerHalfOpen} }),
		}, "", "half", 0, "open,trying"},
		{"a target in slow start is eligible", []*member{with(up("ramping", 1, 1, 0), func(m *member) { m.withheld = 0.5 }), up("b", 1, 3, 0)},
			"", "ramping", 2, ""},
		{"nothing eligible", []*member{worker("full", 1, 1, "m")}, "", "", 0, "full"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			served := numbered(c.served...)
			var avoid *member
			for _, m := range served {
				if m.id == c.avoid {
					avoid = m
				}
			}
			got := gathered(served, avoid)
			if leastIDs(got.least) != c.least || got.lowest != c.lowest {
				t.Errorf("least %q at %v, want %q at %v", leastIDs(got.least), got.lowest, c.least, c.lowest)
			}
			var out []*member
			for _, m := range served {
				if !got.eligible(m) {
					out = append(out, m)
				}
			}
			if ids(out) != c.ineligible {
				t.Errorf("not eligible: %q, want %q", ids(out), c.ineligible)
			}
		})
	}
}

// A pool's candidates are reused: a selection leaves nothing of the one before.
func TestGatherReusesItsList(t *testing.T) {
	c := gathered(numbered(worker("a", 4, 0, "m"), worker("b", 4, 0, "m")), nil)
	c.gather(numbered(worker("c", 4, 1, "m")), nil)
	if leastIDs(c.least) != "c" || c.lowest != 1 {
		t.Fatalf("least %q at %v, want c at 1", leastIDs(c.least), c.lowest)
	}
}
