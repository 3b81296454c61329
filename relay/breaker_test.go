package relay

import (
	"testing"
	"time"
)

// The breaker of each static backend and replica: 5 failures open it; open 5 s, then one trial; a failed
// trial doubles the cool-down up to 60 s; a good one closes it and resets the cool-down; a 429
// counts for nothing.
func TestBreakerStateMachine(t *testing.T) {
	opts := BreakerOptions{}
	opts.fill()
	var b breaker
	now := time.Unix(1000, 0)
	for i := range 4 {
		if b.record(outcomeFailed, &clock{t: now}, &opts) {
			t.Fatalf("opened after %d failures", i+1)
		}
	}
	b.record(outcomeNone, &clock{t: now}, &opts) // a 429 neither counts nor resets
	if !b.record(outcomeFailed, &clock{t: now}, &opts) || b.state != breakerOpen {
		t.Fatalf("5th failure: %+v", b)
	}
	wantOpen := func(at time.Time, cooldown time.Duration) {
		t.Helper()
		if !b.cool(at.Add(cooldown-time.Millisecond)) || b.admits() {
			t.Fatalf("admitted before the %v cool-down ended", cooldown)
		}
		if b.cool(at.Add(cooldown)) || !b.admits() || b.state != breakerHalfOpen {
			t.Fatalf("not half-open after %v: %+v", cooldown, b)
		}
		b.taken()
		if b.admits() {
			t.Fatal("a second trial went out")
		}
	}
	wantOpen(now, 5*time.Second)
	for _, cooldown := range []time.Duration{10, 20, 40, 60, 60} {
		now = now.Add(time.Minute)
		b.record(outcomeFailed, &clock{t: now}, &opts) // the trial failed
		wantOpen(now, cooldown*time.Second)
	}
	b.record(outcomeOK, &clock{t: now}, &opts)
	if b.state != breakerClosed || !b.admits() {
		t.Fatalf("a good trial did not close it: %+v", b)
	}
	for range 5 {
		b.record(outcomeFailed, &clock{t: now}, &opts)
	}
	wantOpen(now, 5*time.Second) // the cool-down started over
}

// Refused connections open it after 3 (the AppProxy passive health), a failed probe at once;
// a probe that connects again sends the trial without waiting out the cool-down.
func TestBreakerRefusalsAndProbes(t *testing.T) {
	opts := BreakerOptions{}
	opts.fill()
	var b breaker
	now := time.Unix(1000, 0)
	b.record(outcomeRefused, &clock{t: now}, &opts)
	b.record(outcomeRefused, &clock{t: now}, &opts)
	if !b.record(outcomeRefused, &clock{t: now}, &opts) {
		t.Fatal("3 refused connections did not open it")
	}
	if b.probed(false, now, &opts) || !b.cool(now.Add(time.Second)) {
		t.Fatal("a failed probe changed an open breaker")
	}
	b.probed(true, now.Add(time.Second), &opts)
	if b.cool(now.Add(time.Second)) || !b.admits() {
		t.Fatal("a probe that connects did not let the trial go")
	}

	var c breaker
	if !c.probed(false, now, &opts) || c.admits() {
		t.Fatal("a failed probe did not open a closed breaker")
	}
	c.cool(now.Add(5 * time.Second))
	c.taken()
	c.record(outcomeNone, &clock{t: now}, &opts) // the trial's client left: it proved nothing
	if !c.admits() {
		t.Fatal("a trial that said nothing used up the half-open state")
	}
}
