package throttle

import (
	"context"
	"slices"
	"strconv"
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
	if n > maxKeys {
		t.Fatalf("%d keys remembered", n)
	}
}

// The rule on a clock of its own: turns go out one per step up to MaxHold ahead; a failure
// past that gets none and takes none, so the next step's failure is in turn again however
// many came between.
func TestOutOfTurnFailuresTakeNoTurn(t *testing.T) {
	th := New(250*time.Millisecond, time.Second)
	now := time.Now()
	var got []time.Duration
	for range 10 {
		if at := th.turn("a", now); !at.IsZero() {
			got = append(got, at.Sub(now))
		}
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("10 failures at once got turns %v, want %v", got, want)
	}
	later := now.Add(250 * time.Millisecond)
	if at := th.turn("a", later); at.Sub(now) != 1250*time.Millisecond {
		t.Fatalf("a step later: turn at %v, want 1.25s (the flood in between took none)", at.Sub(now))
	}
	if at := th.turn("a", later); !at.IsZero() {
		t.Fatalf("a second failure in that step got a turn at %v", at.Sub(now))
	}
	if at := th.turn("b", now); at.Sub(now) != 250*time.Millisecond {
		t.Fatalf("another address waits %v behind a", at.Sub(now))
	}
}

// A full table gives a new address no turn until the turns it holds have passed; the sweep
// runs at most once a step.
func TestFullTableGivesNewAddressesNoTurn(t *testing.T) {
	th := New(time.Second, time.Minute)
	now := time.Now()
	for i := range maxKeys {
		if th.turn(strconv.Itoa(i), now).IsZero() {
			t.Fatalf("address %d of %d got no turn", i, maxKeys)
		}
	}
	if at := th.turn("new", now); !at.IsZero() {
		t.Fatal("a new address got a turn in a full table")
	}
	for range 3 { // address 0's turns now run to 4 s ahead
		if at := th.turn("0", now); at.IsZero() {
			t.Fatal("a known address lost its turns to a full table")
		}
	}
	// Every turn but address 0's later ones has passed, but the last sweep was under a step ago.
	soon := now.Add(time.Second + time.Millisecond)
	th.prunedAt = soon
	if at := th.turn("new", soon); !at.IsZero() {
		t.Fatal("the table was swept twice within a step")
	}
	if at := th.turn("new", soon.Add(time.Second)); at.IsZero() {
		t.Fatal("no room for a new address after the turns passed")
	}
	if n := len(th.next); n != 2 {
		t.Fatalf("%d addresses remembered after the sweep, want 2 (0 and new)", n)
	}
}
