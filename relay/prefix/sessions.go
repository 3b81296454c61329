package prefix

import (
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Sessions maps session keys to the target that served them last, for at most ttl, and
// holds at most maxEntries of them: the least recently set is forgotten first. It is safe
// for concurrent use.
//
// Keys are held as their 64-bit hash, so an entry's size does not depend on what a client
// put in its user field; two sessions colliding would only share a preferred target.
type Sessions struct {
	ttl time.Duration
	max int

	mu         sync.Mutex
	byKey      map[uint64]*session
	head, tail *session // least recently set first
}

type session struct {
	key        uint64
	target     uint64
	at         time.Time // when last set
	prev, next *session
}

// NewSessions returns a table whose entries last ttl; it holds at most maxEntries (at
// least 1).
func NewSessions(ttl time.Duration, maxEntries int) *Sessions {
	return &Sessions{ttl: ttl, max: max(maxEntries, 1), byKey: make(map[uint64]*session)}
}

// Get returns the target that served key last, if that was at most ttl before now.
func (s *Sessions) Get(key string, now time.Time) (target uint64, ok bool) {
	if key == "" {
		return 0, false
	}
	h := xxhash.Sum64String(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byKey[h]
	if e == nil {
		return 0, false
	}
	if now.Sub(e.at) > s.ttl {
		s.remove(e)
		return 0, false
	}
	return e.target, true
}

// Set records that target served key at now.
func (s *Sessions) Set(key string, target uint64, now time.Time) {
	if key == "" {
		return
	}
	h := xxhash.Sum64String(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byKey[h]
	if e == nil {
		e = &session{key: h}
		s.byKey[h] = e
	} else {
		s.unlink(e)
	}
	e.target, e.at = target, now
	s.pushBack(e)
	// Expired entries sit at the front: drop them with the excess.
	for f := s.head; f != nil && (len(s.byKey) > s.max || now.Sub(f.at) > s.ttl); f = s.head {
		s.remove(f)
	}
}

// Forget drops every session held by target. It walks the whole table; callers that check
// a target still exists after Get need not call it.
func (s *Sessions) Forget(target uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for e := s.head; e != nil; {
		next := e.next
		if e.target == target {
			s.remove(e)
		}
		e = next
	}
}

// Len returns the number of sessions held, expired or not.
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}

func (s *Sessions) remove(e *session) {
	s.unlink(e)
	delete(s.byKey, e.key)
}

func (s *Sessions) unlink(e *session) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (s *Sessions) pushBack(e *session) {
	e.prev = s.tail
	if s.tail != nil {
		s.tail.next = e
	} else {
		s.head = e
	}
	s.tail = e
}
