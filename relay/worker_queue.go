package relay

import "sync"

// eventBuffer is how many of one request's frames may wait for its goroutine. Past it the
// session's reader waits, and with it every request on that worker (its frames arrive in one
// order), so a client that reads slowly slows its worker down instead of growing memory.
const eventBuffer = 64

// eventQueue carries one request's frames from the session's reader to the request's
// goroutine. Its slice grows only as far as frames actually wait, so the common request,
// answered in one frame, or a stream read as fast as it comes, holds one or two instead of
// room for eventBuffer: held streams are many, and each kept that room.
type eventQueue struct {
	mu     sync.Mutex
	events []workerEvent // events[head:] wait, oldest first
	head   int
	ready  chan struct{} // holds a token once an event waits: the request's goroutine wakes
	room   chan struct{} // holds a token once an event is taken: a waiting reader retries
}

func newEventQueue() eventQueue {
	return eventQueue{ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// push queues ev, waiting while eventBuffer events wait; it drops ev once abandoned is closed
// (the request's goroutine no longer listens).
func (q *eventQueue) push(ev workerEvent, abandoned <-chan struct{}) {
	for {
		q.mu.Lock()
		if len(q.events)-q.head < eventBuffer {
			if len(q.events) == cap(q.events) && q.head > 0 {
				// Full at the back with room at the front: move the waiting ones down
				// rather than grow, so a queue that never empties stays within its bound.
				n := copy(q.events, q.events[q.head:])
				clear(q.events[n:])
				q.events, q.head = q.events[:n], 0
			}
			q.events = append(q.events, ev)
			q.mu.Unlock()
			signal(q.ready)
			return
		}
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-abandoned:
			return
		}
	}
}

// take returns the oldest waiting event; false when none waits. A queue emptied starts again
// at the front of its slice, so a stream keeps reusing the same few slots.
func (q *eventQueue) take() (workerEvent, bool) {
	q.mu.Lock()
	if q.head == len(q.events) {
		q.mu.Unlock()
		return workerEvent{}, false
	}
	ev := q.events[q.head]
	q.events[q.head] = workerEvent{}
	q.head++
	if q.head == len(q.events) {
		q.events, q.head = q.events[:0], 0
	}
	q.mu.Unlock()
	signal(q.room)
	return ev, true
}

// signal leaves a token in ch (capacity 1) unless one is there already; it never blocks.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
