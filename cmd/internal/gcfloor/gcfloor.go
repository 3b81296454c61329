// Package gcfloor keeps the Go collector's heap target at or above a floor.
//
// A relay's live heap is small while it proxies short requests (a few MiB: its tables and the
// requests in flight), and Go's default (GOGC=100) collects whenever the heap doubles, which
// for a few MiB means a collection every few MiB allocated: dozens a second under load, each
// with its fixed costs (scanning every goroutine's stack, the write barrier while it marks).
// Keeping the target at or above a floor lets a lightly filled heap hold up to that much
// garbage, so it is collected a few times less often; once the live heap is large (thousands
// of held streams), the default target is above the floor and GOGC=100 applies unchanged, so
// the floor never adds more than itself to the peak heap.
//
// After every collection the percent is set from what the collection found. Go's target is
// live + (live + stacks + globals) × percent/100 (the percent applies to the goroutine stacks
// and globals it scans, too), so the percent that reaches the floor is
// (floor − live) × 100 / (live + stacks + globals), and never below Go's default of 100. An
// operator who sets GOGC has chosen: Start then does nothing.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Floor is the least heap target the relay's processes keep (while GOGC is not set): three
// times Go's own minimum of 4 MiB. Under a load of short requests it took about a tenth of the
// CPU per request off for about 8 MiB more peak memory; larger floors saved somewhat more CPU
// for a peak that grew with them (a 24 MiB floor: a fifth, for 27 MiB more).
const Floor = 12 << 20

// maxPercent bounds the percent a tiny live heap would ask for.
const maxPercent = 10000

// Start keeps the heap target at or above floor until stop is called, unless the environment
// sets GOGC. stop puts the collector back to its default percent.
func Start(floor uint64) (stop func()) {
	if os.Getenv("GOGC") != "" || floor == 0 {
		return func() {}
	}
	t := &tuner{floor: floor, percent: 100, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}}
	t.arm()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.stopped = true
		debug.SetGCPercent(100)
	}
}

type tuner struct {
	floor  uint64
	sample []metrics.Sample
	// mu orders tune (on the finalizer goroutine) and stop.
	mu      sync.Mutex
	percent int
	stopped bool
}

// arm has the next collection call tune: a finalizer runs after the collection that found its
// object unreachable, on the runtime's finalizer goroutine (one at a time).
func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{t}, func(s *sentinel) { s.t.tune() })
}

// sentinel is an object that nothing keeps, so that each collection finalizes one.
type sentinel struct{ t *tuner }

func (t *tuner) tune() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	metrics.Read(t.sample)
	live, roots := t.sample[0].Value.Uint64(), t.sample[1].Value.Uint64()+t.sample[2].Value.Uint64()
	if p := percentFor(t.floor, live, roots); p != t.percent {
		t.percent = p
		debug.SetGCPercent(p)
	}
	t.arm()
}

// percentFor is the GOGC that puts the heap target at or above floor, for a live heap and the
// stacks and globals the collector scans besides (roots): never below Go's default of 100, and
// rounded up to a multiple of 25 so that small moves of the live heap do not reset the
// collector after every cycle.
func percentFor(floor, live, roots uint64) int {
	scanned := live + roots
	if scanned == 0 {
		return maxPercent
	}
	if live >= floor || (floor-live)*100 <= scanned*100 {
		return 100
	}
	p := (floor - live) * 100 / scanned
	p = (p + 24) / 25 * 25
	return int(min(p, maxPercent))
}
