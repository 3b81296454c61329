package daemon

import (
	"context"
	"sync"
)

// admission is the verdict on a new request.
type admission int

const (
	admitted admission = iota
	refusedBusy
	refusedDraining
	refusedDuplicate
)

// flights is the table of requests in flight on one session. A request holds a slot from
// admission until its outcome is known, and counts as pending until its last frame is queued,
// so a drain never closes the socket under an unsent response_complete.
type flights struct {
	mu       sync.Mutex
	limit    int
	slots    map[string]context.CancelCauseFunc
	pending  int
	draining bool
	idle     chan struct{} // made when draining starts, closed once pending reaches zero
}

func newFlights(limit int) *flights {
	return &flights{limit: limit, slots: map[string]context.CancelCauseFunc{}}
}

func (f *flights) admit(id string, cancel context.CancelCauseFunc) admission {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.draining:
		return refusedDraining
	case f.slots[id] != nil:
		return refusedDuplicate
	case len(f.slots) >= f.limit:
		return refusedBusy
	}
	f.slots[id] = cancel
	f.pending++
	return admitted
}

// cancel aborts one request; false if it is not (or no longer) in flight.
func (f *flights) cancel(id string, cause error) bool {
	f.mu.Lock()
	c := f.slots[id]
	f.mu.Unlock()
	if c == nil {
		return false
	}
	c(cause)
	return true
}

// release frees the request's slot. It comes before the response_complete is queued: the
// server may hand out the next request the moment it reads that frame.
func (f *flights) release(id string) {
	f.mu.Lock()
	delete(f.slots, id)
	f.mu.Unlock()
}

// done marks the request's last frame as queued.
func (f *flights) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending--
	if f.pending == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

// load is the number of slots taken, as reported in pong and models_update.
func (f *flights) load() uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return uint32(len(f.slots))
}

// drain refuses new requests from now on and returns a channel closed once none is pending.
func (f *flights) drain() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.draining = true
	ch := make(chan struct{})
	if f.pending == 0 {
		close(ch)
		return ch
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	return f.idle
}
