package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	const floor = 12 << 20
	for _, c := range []struct {
		live, roots uint64
		want        int
	}{
		{0, 0, maxPercent},
		{1, 0, maxPercent},        // a tiny heap: bounded
		{3 << 20, 0, 300},         // 3 + 3 × 3 = 12
		{3 << 20, 1 << 20, 225},   // 3 + 4 × 2.25 = 12
		{2 << 20, 8 << 20, 100},   // the stacks alone reach the floor at the default
		{5 << 20, 0, 150},         // 140, rounded up
		{6 << 20, 0, 100},         // the default target reaches the floor
		{500 << 20, 4 << 20, 100}, // thousands of held streams: the default
		{5<<20 + 1<<19, 0, 125},   // just under half the floor
	} {
		got := percentFor(floor, c.live, c.roots)
		if got != c.want {
			t.Errorf("percentFor(%d, %d) = %d, want %d", c.live, c.roots, got, c.want)
		}
		if target := c.live + (c.live+c.roots)*uint64(got)/100; c.live > 0 && target < floor && got < maxPercent {
			t.Errorf("percentFor(%d, %d) = %d leaves the target at %d, under the floor", c.live, c.roots, got, target)
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
