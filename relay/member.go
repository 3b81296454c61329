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
	star          bool // serves any model
	draining      bool
	gone          bool // removed from its pool; late releases must not dispatch
	maxConcurrent int  // 0 = no cap (upstreams only)
	reported      int  // worker-reported load; +1 per assignment, -1 per completion
	inFlight      int
	weight        float64 // upstreams: traffic ratio; workers: 1
	seq           uint64  // registration order within the process
	swrrCurrent   float64 // smooth weighted round-robin state

	id   string
	name string // what x-modelrelay-target and prefer_gpu say: a worker's name, else the id
	// left mirrors gone for prefix recording, which runs off the lock. gone stays a plain bool:
	// selection reads it for every member, and an atomic there measured 10-20% slower dispatch.
	left   atomic.Bool
	target target
	speech *speech  // what API families the target speaks (atomics: read without the lock)
	models []string // advertised, sanitized, registration order (without "*")
	brk    breaker  // upstreams: health (see breaker.go)
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
// in-flight count; for upstreams the in-flight count per unit of weight.
func (m *member) load() float64 {
	if m.kind == kindUpstream {
		return float64(m.inFlight) / m.weight
	}
	return float64(max(m.reported, m.inFlight))
}

// available says whether the member may take one more request now.
func (m *member) available() bool {
	if m.draining || m.gone {
		return false
	}
	if m.kind == kindUpstream {
		return (m.maxConcurrent == 0 || m.inFlight < m.maxConcurrent) && m.brk.admits()
	}
	return max(m.reported, m.inFlight) < m.maxConcurrent
}

// live says whether the member may serve again with nothing changing but time (busy is
// live; a worker that is draining still finishes, and its leaving starts the grace of its
// models). A model none of whose members is live fails fast.
func (m *member) live(now *clock) bool {
	if m.gone {
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
