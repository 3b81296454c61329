package relay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// closedSoon fails t unless ch is closed soon.
func closedSoon(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not closed", what)
	}
}

// A call's context ends as a context does, whichever side ends it first: Done is closed (made
// before or after the end), Err is context.Canceled, and causeOf says why: the first side's
// cause stands.
func TestCallCtxEnds(t *testing.T) {
	clientCause := errors.New("client went away")
	relayCause := errors.New("relay ended it")
	for _, tc := range []struct {
		name       string
		doneBefore bool // Done is made before the end
		byClient   bool // the client ends it first, else the relay
		both       bool // the other side ends it afterwards
	}{
		{name: "relay, Done made after"},
		{name: "relay, Done made before", doneBefore: true},
		{name: "client, Done made after", byClient: true},
		{name: "client, Done made before", doneBefore: true, byClient: true},
		{name: "relay, then the client", both: true},
		{name: "client, then the relay", byClient: true, both: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			c := newCallCtx(client)
			if c.Err() != nil || causeOf(c) != nil {
				t.Fatalf("a live call: Err %v, cause %v", c.Err(), causeOf(c))
			}
			var done <-chan struct{}
			if tc.doneBefore {
				done = c.Done()
			}
			endByClient, endByRelay := func() { cancel(clientCause) }, func() { c.end(relayCause) }
			first, second, want := endByRelay, endByClient, relayCause
			if tc.byClient {
				first, second, want = endByClient, endByRelay, clientCause
			}
			first()
			if tc.both {
				second()
			}
			if !tc.doneBefore {
				done = c.Done()
			}
			closedSoon(t, done, "Done")
			if !errors.Is(c.Err(), context.Canceled) {
				t.Fatalf("Err %v, want context.Canceled", c.Err())
			}
			if got := causeOf(c); got != want {
				t.Fatalf("cause %v, want %v", got, want)
			}
		})
	}
}

// Watch registers the upstream call's abort: it runs once when the relay ends the call, or
// when the client's context ends, or at once on a call already ended; Unwatch reports whether
// it had not run. A call whose abort never ran keeps its connection.
func TestCallCtxWatch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		end     func(c *callCtx, cancel context.CancelCauseFunc)
		endedAt string // "before" Watch, "during" the call, or "" (never)
	}{
		{name: "never ended"},
		{name: "ended by the relay", endedAt: "during", end: func(c *callCtx, _ context.CancelCauseFunc) { c.end(errRequestTimeout) }},
		{name: "ended by the client", endedAt: "during", end: func(_ *callCtx, cancel context.CancelCauseFunc) { cancel(nil) }},
		{name: "ended before the call", endedAt: "before", end: func(c *callCtx, _ context.CancelCauseFunc) { c.end(errShuttingDown) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			c := newCallCtx(client)
			var runs atomic.Int32
			aborted := make(chan struct{})
			abort := func() {
				if runs.Add(1) == 1 {
					close(aborted)
				}
			}
			if tc.endedAt == "before" {
				tc.end(c, cancel)
			}
			id := c.Watch(abort)
			if tc.endedAt == "during" {
				tc.end(c, cancel)
			}
			if tc.endedAt != "" {
				closedSoon(t, aborted, "the abort")
			}
			kept := c.Unwatch(id)
			c.end(context.Canceled) // the call's own end, after the upstream let go: runs nothing
			cancel(nil)
			time.Sleep(10 * time.Millisecond) // an abort wrongly left registered would run now
			if want := tc.endedAt == ""; kept != want {
				t.Fatalf("Unwatch %v, want %v", kept, want)
			}
			if want := int32(0); tc.endedAt != "" {
				want = 1
				if runs.Load() != want {
					t.Fatalf("the abort ran %d times, want %d", runs.Load(), want)
				}
			} else if runs.Load() != want {
				t.Fatalf("the abort of a call never ended ran %d times", runs.Load())
			}
		})
	}
}

// The call's end, its client's end, Done and a watch racing one another: Done is closed, the
// abort runs, and the connection is not kept. (Run with -race.)
func TestCallCtxRaces(t *testing.T) {
	for range 200 {
		client, cancel := context.WithCancel(context.Background())
		c := newCallCtx(client)
		var runs atomic.Int32
		id := c.Watch(func() { runs.Add(1) })
		var wg sync.WaitGroup
		wg.Go(func() { c.end(errRequestTimeout) })
		wg.Go(cancel)
		wg.Go(func() { <-c.Done() })
		wg.Wait()
		closedSoon(t, c.Done(), "Done")
		for deadline := time.Now().Add(5 * time.Second); runs.Load() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) { // the client's end runs it on a goroutine of its own
				t.Fatal("the abort never ran")
			}
		}
		if c.Unwatch(id) {
			t.Fatal("Unwatch says the abort had not run")
		}
	}
}

// Two upstream calls in flight under one call (a large body still going up while a retry
// starts): each has its own registration. Taking one back leaves the other watched, and the
// end aborts every one still registered.
func TestCallCtxOverlappingWatches(t *testing.T) {
	client, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newCallCtx(client)
	var first, second atomic.Int32
	idFirst := c.Watch(func() { first.Add(1) })
	idSecond := c.Watch(func() { second.Add(1) })
	if !c.Unwatch(idFirst) {
		t.Fatal("the first call's abort had not run, but Unwatch says it had")
	}
	c.end(errRequestTimeout)
	if first.Load() != 0 || second.Load() != 1 {
		t.Fatalf("aborts ran %d and %d times, want 0 and 1", first.Load(), second.Load())
	}
	if c.Unwatch(idSecond) {
		t.Fatal("the second call's abort ran, but Unwatch says it had not")
	}
	if c.Unwatch(idFirst) {
		t.Fatal("an id taken back already vouches for its connection")
	}

	// Without the relay's end, the client's going aborts the one still watched.
	client2, cancel2 := context.WithCancel(context.Background())
	c2 := newCallCtx(client2)
	aborted := make(chan struct{})
	id1 := c2.Watch(func() { t.Error("an abort taken back ran") })
	id2 := c2.Watch(func() { close(aborted) })
	c2.Unwatch(id1)
	cancel2()
	closedSoon(t, aborted, "the abort of the call still watched")
	if c2.Unwatch(id2) {
		t.Fatal("the abort ran, but Unwatch says it had not")
	}
}
