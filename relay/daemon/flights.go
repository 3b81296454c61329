package daemon

import (
	"context"
	"sync"
)

// admission is the verdict on a new request.
type admission int

const (
	admitted admission = iota
	refusedDraining
	refusedDuplicate
)

// flights is the table of requests in flight on one session. A request is in the table from
// admission until its outcome is known, and counts as pending until its last frame is queued,
// so a drain never closes the socket under an unsent response_complete. (The slots that bound
// how many run at once are the daemon's, shared by its sessions: see slots.)
type flights struct {
	mu       sync.Mutex
	cancels  map[string]context.CancelCauseFunc
	pending  int
	draining bool
	idle     chan struct{} // made when draining starts, closed once pending reaches zero
}

func newFlights() *flights {
	return &flights{cancels: map[string]context.CancelCauseFunc{}}
}

func (f *flights) admit(id string, cancel context.CancelCauseFunc) admission {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.draining:
		return refusedDraining
	case f.cancels[id] != nil:
		return refusedDuplicate
	}
	f.cancels[id] = cancel
	f.pending++
	return admitted
}

// cancel aborts one request; false if it is not (or no longer) in flight.
func (f *flights) cancel(id string, cause error) bool {
	f.mu.Lock()
	c := f.cancels[id]
	f.mu.Unlock()
	if c == nil {
		return false
	}
	c(cause)
	return true
}

// release takes the request out of the table once its outcome is known.
func (f *flights) release(id string) {
	f.mu.Lock()
	delete(f.cancels, id)
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

// isDraining reports whether drain has been called.
func (f *flights) isDraining() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.draining
}

// count is the number of requests in the table.
func (f *flights) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.cancels)
}
