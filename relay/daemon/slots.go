package daemon

import (
	"context"
	"slices"
	"sync"
	"time"
)

// slots are the daemon's max_concurrency request slots, shared by its sessions: a worker
// attached to several relays serves at most that many requests in all, whichever relays sent
// them. Each relay learns the true load from the daemon's reports, but two relays can still
// hand out the last slot at the same moment; the loser waits for a slot (take) instead of
// failing, and a freed slot goes to the oldest waiter first.
type slots struct {
	mu      sync.Mutex
	limit   int
	taken   int
	waiters []chan struct{} // oldest first; a freed slot is handed over by a send
}

func newSlots(limit int) *slots { return &slots{limit: limit} }

// tryTake takes a slot if one is free.
func (s *slots) tryTake() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken < s.limit {
		s.taken++
		return true
	}
	return false
}

// take waits up to wait for a slot; false when none came in time or ctx ended first.
func (s *slots) take(ctx context.Context, wait time.Duration) bool {
	s.mu.Lock()
	if s.taken < s.limit {
		s.taken++
		s.mu.Unlock()
		return true
	}
	if wait <= 0 {
		s.mu.Unlock()
		return false
	}
	handoff := make(chan struct{}, 1)
	s.waiters = append(s.waiters, handoff)
	s.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-handoff:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.waiters, handoff); i >= 0 {
		s.waiters = slices.Delete(s.waiters, i, i+1)
		return false
	}
	// Handed a slot while giving up: it is ours, but a cancelled request has no use for it.
	if ctx.Err() != nil {
		s.giveLocked()
		return false
	}
	return true
}

// give frees a slot, handing it to the oldest waiter if there is one.
func (s *slots) give() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.giveLocked()
}

func (s *slots) giveLocked() {
	if len(s.waiters) > 0 {
		next := s.waiters[0]
		s.waiters = slices.Delete(s.waiters, 0, 1)
		next <- struct{}{} // buffered: never blocks
		return
	}
	s.taken--
}

// load is the number of slots taken, the load every relay is told.
func (s *slots) load() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return uint32(s.taken)
}
