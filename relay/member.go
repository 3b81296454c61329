package relay

import (
	"sync/atomic"
	"time"
)

// memberKind says which kind of target a pool member is.
type memberKind uint8

const (
	kindWorker   memberKind = iota // a relay worker session (WebSocket)
	kindUpstream                   // an HTTP model server the relay calls directly
)

// member is a target's dispatch state inside its pool. Every field below target is guarded by
// the pool's mutex: selection reads them all at once, so they live together.
type member struct {
	// Read by every selection: kept together at the front.
	kind          memberKind
	star          bool // a catch-all ("*"): serves the models no live target names (serving)
	draining      bool
	out           outFlags // why, besides draining, it takes nothing new: one test for all
	maxConcurrent int      // 0 = no cap (upstreams only)
	reported      int      // worker-reported load; +1 per assignment, -1 per completion
	inFlight      int
	weight        float64 // upstreams: traffic ratio; workers: 1
	withheld      float64 // upstreams in slow start: the share of weight not yet given back
	seq           uint64  // registration order within the process
	swrrCurrent   float64 // smooth weighted round-robin state

	id   string
	name string // what x-modelrelay-target and prefer_gpu say: a worker's name, else the id
	// left mirrors gone for prefix recording, which runs off the lock. out stays a plain byte:
	// selection reads it for every member, and an atomic there measured 10-20% slower dispatch.
	left   atomic.Bool
	target target
	speech *speech  // what API families the target speaks (atomics: read without the lock)
	models []string // advertised, sanitized, registration order (without "*")
	brk    breaker  // upstreams: health (see breaker.go)
	// rampFrom is when the member's slow start began (its breaker closed again).
	rampFrom time.Time
}

// outFlags are the states that keep a member from new requests, besides draining. They share
// a byte so that selection tests them all at once.
type outFlags uint8

const (
	outGone    outFlags = 1 << iota // removed from its pool; late releases must not dispatch
	outSuspect                      // a worker silent since a ping (see checkSilence)
)

func (m *member) gone() bool    { return m.out&outGone != 0 }
func (m *member) suspect() bool { return m.out&outSuspect != 0 }

// setOut sets or clears flag.
func (m *member) setOut(flag outFlags, on bool) {
	if on {
		m.out |= flag
	} else {
		m.out &^= flag
	}
}

func (m *member) setModels(models []string) {
	m.models = nil
	m.star = false
	for _, name := range models {
		if name == "*" {
			m.star = true
			continue
		}
		m.models = append(m.models, name)
	}
}

// load is what selection minimizes: for workers the larger of the reported load and the
// in-flight count; for upstreams the in-flight count per unit of weight (weightNow).
func (m *member) load() float64 {
	if m.kind == kindUpstream {
		return float64(m.inFlight) / m.weightNow()
	}
	return float64(max(m.reported, m.inFlight))
}

// weightNow is the weight selection gives the member: for an upstream in slow start, what slow
// start gave back of its weight so far (see ramp).
func (m *member) weightNow() float64 { return m.weight * (1 - m.withheld) }

// slowStartFloor is the share of its weight a target gets back the moment it recovers.
const slowStartFloor = 0.1

// ramp sets how much of its weight a member in slow start since rampFrom still goes without
// at now, over a slow start of length d: 1-slowStartFloor at first, then linearly less, none
// at the end. It reports whether the slow start is over.
func (m *member) ramp(now time.Time, d time.Duration) (over bool) {
	f := 1.0
	if d > 0 {
		f = float64(now.Sub(m.rampFrom)) / float64(d)
	}
	if f >= 1 {
		m.withheld = 0
		return true
	}
	m.withheld = (1 - slowStartFloor) * (1 - max(f, 0))
	return false
}

// available says whether the member may take one more request now. A suspect worker takes
// none: it keeps what it holds, and what waits goes elsewhere or waits for it.
func (m *member) available() bool {
	if m.draining || m.out != 0 {
		return false
	}
	if m.kind == kindUpstream {
		return (m.maxConcurrent == 0 || m.inFlight < m.maxConcurrent) && m.brk.admits()
	}
	return max(m.reported, m.inFlight) < m.maxConcurrent
}

// live says whether the member may serve again with nothing changing but time (busy is
// live, and so is a suspect worker; a worker that is draining still finishes, and its
// leaving starts the grace of its models). A model none of whose members is live fails fast.
func (m *member) live(now *clock) bool {
	if m.gone() {
		return false
	}
	if m.kind == kindUpstream {
		return !m.draining && (m.brk.state != breakerOpen || m.brk.live(now.get()))
	}
	return true
}

// clock reads the time once, and only when asked.
type clock struct{ t time.Time }

func (c *clock) get() time.Time {
	if c.t.IsZero() {
		c.t = time.Now()
	}
	return c.t
}
