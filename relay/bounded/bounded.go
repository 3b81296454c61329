// Package bounded is a map bounded by the bytes its values hold, for the relay's stores kept in
// memory (the response cache's shards, the Responses API's stored responses). Entries expire at
// a time given when they are put; to make room, the oldest put go first. With one TTL for all
// entries of a map, as its users have, the oldest are also the first to expire.
//
// One mutex guards a Map: every call holds it for a map step and a list step, never for I/O.
package bounded

import (
	"sync"
	"time"
)

// Map holds values of at most Max bytes in all (sizes as the caller counts them).
type Map[K comparable, V any] struct {
	mu     sync.Mutex
	max    int64
	used   int64
	slots  map[K]*slot[K, V]
	oldest *slot[K, V] // the list of slots in the order they were put, oldest first
	newest *slot[K, V]
}

// slot is one entry and its place in the list.
type slot[K comparable, V any] struct {
	key        K
	value      V
	size       int64
	expires    time.Time
	prev, next *slot[K, V] // prev is older
}

// New returns an empty map of at most maxBytes.
func New[K comparable, V any](maxBytes int64) *Map[K, V] {
	return &Map[K, V]{max: maxBytes, slots: map[K]*slot[K, V]{}}
}

// Get returns the value under k unless it expired by now (then it is dropped).
func (m *Map[K, V]) Get(k K, now time.Time) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.slots[k]
	if s == nil {
		var zero V
		return zero, false
	}
	if !now.Before(s.expires) {
		m.remove(s)
		var zero V
		return zero, false
	}
	return s.value, true
}

// Put keeps v under k, of size bytes, until expires, in place of what k held; then the oldest
// entries go until the map is within its bound again. A value larger than the whole bound is
// not kept (and what k held stays).
func (m *Map[K, V]) Put(k K, v V, size int64, expires time.Time) {
	if size > m.max {
		return
	}
	s := &slot[K, V]{key: k, value: v, size: size, expires: expires}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.slots[k]; old != nil {
		m.remove(old)
	}
	m.slots[k] = s
	s.prev = m.newest
	if m.newest != nil {
		m.newest.next = s
	} else {
		m.oldest = s
	}
	m.newest = s
	m.used += size
	for m.used > m.max {
		m.remove(m.oldest)
	}
}

// Delete drops k and reports whether it was there.
func (m *Map[K, V]) Delete(k K) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.slots[k]
	if s != nil {
		m.remove(s)
	}
	return s != nil
}

// Clear drops every entry.
func (m *Map[K, V]) Clear() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.slots = map[K]*slot[K, V]{}
	m.oldest, m.newest, m.used = nil, nil, 0
}

// Len and Bytes are how many entries the map holds and their size in all (expired ones that
// no Get found yet included).
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.slots)
}

func (m *Map[K, V]) Bytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}

// remove unlinks s; m.mu is held.
func (m *Map[K, V]) remove(s *slot[K, V]) {
	delete(m.slots, s.key)
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		m.oldest = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		m.newest = s.prev
	}
	s.prev, s.next = nil, nil
	m.used -= s.size
}
