package throttle

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A burst of failures from one key is answered one per step; another key is not slowed.
func TestFailuresOfOneKeyAreSpacedOut(t *testing.T) {
	th := New(50*time.Millisecond, time.Hour)
	start := time.Now()
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() { th.Fail(context.Background(), "a") })
	}
	wg.Wait()
	if took := time.Since(start); took < 6*50*time.Millisecond {
		t.Fatalf("6 failures answered in %s; the spacing is 50 ms", took)
	}
	other := time.Now()
	th.Fail(context.Background(), "b")
	if took := time.Since(other); took >= 6*50*time.Millisecond {
		t.Fatalf("key b waited %s behind key a", took)
	}
}

// Past MaxHold, failures are answered at MaxHold and marked out of turn.
func TestFloodIsCutOffAtMaxHold(t *testing.T) {
	th := New(100*time.Millisecond, 250*time.Millisecond)
	var inTurn, outOfTurn atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if th.Fail(context.Background(), "a") {
				inTurn.Add(1)
			} else {
				outOfTurn.Add(1)
			}
		})
	}
	wg.Wait()
	if inTurn.Load() != 2 || outOfTurn.Load() != 18 {
		t.Fatalf("in turn %d, out of turn %d; want 2 and 18", inTurn.Load(), outOfTurn.Load())
	}
}

func TestContextEndsTheHold(t *testing.T) {
	th := New(time.Hour, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if th.Fail(ctx, "a") {
		t.Fatal("a cancelled hold reported its turn")
	}
}

func TestKeysAreBounded(t *testing.T) {
	th := New(time.Nanosecond, time.Millisecond)
	for i := range 3 * maxKeys {
		th.Fail(context.Background(), string(rune(i)))
	}
	th.mu.Lock()
	n := len(th.next)
	th.mu.Unlock()
	if n > maxKeys+1 {
		t.Fatalf("%d keys remembered", n)
	}
}
