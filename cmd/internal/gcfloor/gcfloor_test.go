package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	for _, c := range []struct {
		floor, live uint64
		want        int
	}{
		{24 << 20, 0, maxPercent},
		{24 << 20, 1, maxPercent},       // a tiny heap: bounded
		{24 << 20, 3 << 20, 700},        // 3 MiB live: 3 × (1 + 7) = 24
		{24 << 20, 5 << 20, 400},        // 380, rounded up to 400
		{24 << 20, 12 << 20, 100},       // the default target reaches the floor
		{24 << 20, 500 << 20, 100},      // thousands of held streams: the default
		{24 << 20, 11<<20 + 1<<19, 125}, // just under half the floor
	} {
		got := percentFor(c.floor, c.live)
		if got != c.want {
			t.Errorf("percentFor(%d, %d) = %d, want %d", c.floor, c.live, got, c.want)
		}
		if c.live > 0 && c.live*uint64(100+got)/100 < c.floor && got < maxPercent {
			t.Errorf("percentFor(%d, %d) = %d leaves the target under the floor", c.floor, c.live, got)
		}
	}
}

// gcPercent reads the collector's percent (SetGCPercent returns the one it replaces).
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestStartRaisesThePercentAndStopPutsItBack(t *testing.T) {
	t.Setenv("GOGC", "")
	stop := Start(1 << 40) // far above this test's heap: the percent goes to its bound
	defer stop()
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() != maxPercent {
		if time.Now().After(deadline) {
			t.Fatalf("after collections the percent is %d, want %d", gcPercent(), maxPercent)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the finalizer runs on its own goroutine
	}
	stop()
	runtime.GC()
	if p := gcPercent(); p != 100 {
		t.Fatalf("after stop the percent is %d, want 100", p)
	}
}

func TestGOGCInTheEnvironmentWins(t *testing.T) {
	before := gcPercent()
	t.Setenv("GOGC", "200")
	Start(1 << 40)() // nothing to stop
	runtime.GC()
	if p := gcPercent(); p != before {
		t.Fatalf("with GOGC set the percent is %d, want the process's own %d", p, before)
	}
}
