package relay

import "time"

// outcome is what one attempt on a target says about the target's health.
type outcome uint8

const (
	outcomeNone    outcome = iota // says nothing: the client left, the relay gave up, or a 429 (a busy target is a live one)
	outcomeOK                     // the target answered (any status but 429 and 5xx)
	outcomeFailed                 // a 5xx, no answer to a whole request in time, or a broken call before the first byte
	outcomeRefused                // the connection was refused: the target is not there at all
)

// breakerState is what the metric reports: 0 closed, 1 open, 2 half-open.
type breakerState uint8

const (
	breakerClosed breakerState = iota
	breakerOpen
	breakerHalfOpen
)

func (s breakerState) String() string {
	switch s {
	case breakerOpen:
		return "open"
	case breakerHalfOpen:
		return "half-open"
	}
	return "closed"
}

// refusalsToOpen is the passive half of replica health, as Backend.AI's AppProxy counts it:
// this many refused connections in a row open the breaker whatever its failure threshold.
const refusalsToOpen = 3

// breaker is the health of one static backend or circuit replica: the one state machine that
// both the answers it gives and the relay's TCP probes feed (relay workers have none: their
// session reports their failure). Closed, it takes traffic; Failures failures in a row before a
// first byte (or refusalsToOpen refused connections, or a failed probe) open it. Open, it takes
// nothing for its cool-down, which starts at Cooldown and doubles on every failed trial up to
// MaxCooldown. Then it is half-open: one trial request; success closes it and resets the
// cool-down. A probe that connects again ends the open period of a breaker opened by refusals.
// Guarded by the pool's mutex.
type breaker struct {
	state    breakerState
	failures int // in a row
	refusals int // in a row
	cooldown time.Duration
	until    time.Time // open: when the trial may go
	refused  bool      // open because nothing answered (a probe that connects ends it)
	trial    bool      // half-open: the trial is out
}

// admits says whether the target may take a request: closed, or half-open with no trial out.
// (Time moves an open breaker to half-open through cool, which the pool calls when the
// cool-down ends, so selection never reads the clock.)
func (b *breaker) admits() bool {
	return b.state == breakerClosed || (b.state == breakerHalfOpen && !b.trial)
}

// cool moves an open breaker whose cool-down has passed to half-open. It reports whether the
// breaker is still open.
func (b *breaker) cool(now time.Time) (open bool) {
	if b.state != breakerOpen {
		return false
	}
	if now.Before(b.until) {
		return true
	}
	b.state, b.trial = breakerHalfOpen, false
	return false
}

// live says whether the target may serve again without anything changing but time: closed,
// half-open, or open with its cool-down over. A model whose targets are none of these fails
// fast.
func (b *breaker) live(now time.Time) bool {
	return b.state != breakerOpen || !now.Before(b.until)
}

// taken notes that a request was assigned: in half-open, that is the trial.
func (b *breaker) taken() {
	if b.state == breakerHalfOpen {
		b.trial = true
	}
}

// record feeds an attempt's outcome. It reports whether the breaker opened.
func (b *breaker) record(o outcome, now *clock, opts *BreakerOptions) (opened bool) {
	switch o {
	case outcomeOK:
		b.failures, b.refusals = 0, 0
		if b.state != breakerClosed {
			b.state, b.cooldown, b.trial = breakerClosed, 0, false
		}
	case outcomeFailed, outcomeRefused:
		b.failures++
		if o == outcomeRefused {
			b.refusals++
		} else {
			b.refusals = 0
		}
		if b.state == breakerHalfOpen || (b.state == breakerClosed && (b.failures >= opts.Failures || b.refusals >= refusalsToOpen)) {
			return b.open(now.get(), o == outcomeRefused, opts)
		}
	case outcomeNone:
		if b.state == breakerHalfOpen {
			b.trial = false // the trial proved nothing: the next request tries again
		}
	}
	return false
}

// probed feeds a TCP probe's result. It reports whether the breaker opened.
func (b *breaker) probed(connected bool, now time.Time, opts *BreakerOptions) (opened bool) {
	switch {
	case !connected && b.state != breakerOpen:
		return b.open(now, true, opts)
	case connected && b.state == breakerOpen && b.refused:
		b.until = now // the trial may go now
	}
	return false
}

// open starts an open period: the first at Cooldown, each after a failed trial twice the last.
func (b *breaker) open(now time.Time, refused bool, opts *BreakerOptions) bool {
	if b.cooldown == 0 {
		b.cooldown = opts.Cooldown
	} else {
		b.cooldown = min(2*b.cooldown, opts.MaxCooldown)
	}
	b.state, b.until, b.refused, b.trial = breakerOpen, now.Add(b.cooldown), refused, false
	return true
}

func (o *BreakerOptions) fill() {
	if o.Failures <= 0 {
		o.Failures = 5
	}
	if o.Cooldown <= 0 {
		o.Cooldown = 5 * time.Second
	}
	if o.MaxCooldown < o.Cooldown {
		o.MaxCooldown = max(60*time.Second, o.Cooldown)
	}
}
