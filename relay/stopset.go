package relay

import (
	"context"
	"sync"
)

// stopSet is the requests being served, each by the cancel of its context, so that a hard stop
// (the drain deadline passing, Close) ends them all. A request registers when it starts and
// leaves when it ends: an entry in a map under a lock, where a context.AfterFunc on one
// server-wide stop context cost two allocations and about 2,000 instructions a request.
type stopSet struct {
	mu      sync.Mutex
	next    uint64
	cancels map[uint64]context.CancelCauseFunc
	stopped error // why the set was stopped; nil while serving
}

// add registers cancel and returns its key for remove. After stop, cancel is called at once
// with the stop's cause and nothing is kept.
func (s *stopSet) add(cancel context.CancelCauseFunc) uint64 {
	s.mu.Lock()
	if err := s.stopped; err != nil {
		s.mu.Unlock()
		cancel(err)
		return 0
	}
	if s.cancels == nil {
		s.cancels = make(map[uint64]context.CancelCauseFunc)
	}
	s.next++
	key := s.next
	s.cancels[key] = cancel
	s.mu.Unlock()
	return key
}

// remove forgets the request registered under key (0, or a key already gone: nothing).
func (s *stopSet) remove(key uint64) {
	s.mu.Lock()
	delete(s.cancels, key)
	s.mu.Unlock()
}

// stop cancels every registered request, and every one registered later, with cause. Only the
// first call's cause counts.
func (s *stopSet) stop(cause error) {
	s.mu.Lock()
	if s.stopped != nil {
		s.mu.Unlock()
		return
	}
	s.stopped = cause
	cancels := s.cancels
	s.cancels = nil
	s.mu.Unlock()
	for _, cancel := range cancels {
		cancel(cause)
	}
}
