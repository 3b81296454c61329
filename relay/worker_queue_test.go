package relay

import (
	"fmt"
	"testing"
)

// TestEventQueueOrderAndBound: events come out in order; a queue that never empties stays
// within eventBuffer waiting and a bounded slice; an abandoned request's push returns.
func TestEventQueueOrderAndBound(t *testing.T) {
	q := newEventQueue()
	never := make(chan struct{})
	next, want := 0, 0
	push := func() {
		q.push(workerEvent{chunk: fmt.Sprint(next)}, never)
		next++
	}
	for range 3 {
		push()
	}
	// The consumer lags by three events for a long stream.
	for range 10 * eventBuffer {
		push()
		ev, ok := q.take()
		if !ok || ev.chunk != fmt.Sprint(want) {
			t.Fatalf("took %q, %v; want %d", ev.chunk, ok, want)
		}
		want++
	}
	if c := cap(q.events); c > 2*eventBuffer {
		t.Fatalf("queue that never emptied grew to %d slots", c)
	}
	for range 3 {
		if ev, _ := q.take(); ev.chunk != fmt.Sprint(want) {
			t.Fatalf("took %q, want %d", ev.chunk, want)
		}
		want++
	}
	if _, ok := q.take(); ok {
		t.Fatal("took an event from an empty queue")
	}

	for range eventBuffer {
		push()
	}
	abandoned := make(chan struct{})
	close(abandoned)
	q.push(workerEvent{chunk: "dropped"}, abandoned) // full: must return, not wait
	if n := len(q.events) - q.head; n != eventBuffer {
		t.Fatalf("%d events wait, want %d", n, eventBuffer)
	}
}

// TestEventQueueWakes: a token is waiting on ready once an event is queued, and a reader
// that found the queue full goes on once an event is taken.
func TestEventQueueWakes(t *testing.T) {
	q := newEventQueue()
	never := make(chan struct{})
	for range eventBuffer {
		q.push(workerEvent{}, never)
	}
	select {
	case <-q.ready:
	default:
		t.Fatal("no token on ready with events waiting")
	}
	pushed := make(chan struct{})
	go func() {
		q.push(workerEvent{chunk: "last"}, never)
		close(pushed)
	}()
	for range eventBuffer {
		if _, ok := q.take(); !ok {
			t.Fatal("queue emptied early")
		}
	}
	<-pushed // a push that never woke would hang here and fail the test by its timeout
	if ev, ok := q.take(); !ok || ev.chunk != "last" {
		t.Fatalf("took %q, %v; want the pushed event", ev.chunk, ok)
	}
}
