package responses

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// Memory is a Store in this process: bounded by bytes (the oldest records go first when a new
// one would pass the bound) and by age (a record older than the TTL is gone). One lock guards
// it; nothing under it does I/O or more than a map and list step.
type Memory struct {
	ttl      time.Duration
	maxBytes int64
	now      func() time.Time

	mu    sync.Mutex
	byID  map[string]*list.Element
	order list.List // oldest first: *entry
	bytes int64
}

type entry struct {
	id      string
	rec     *Record
	expires time.Time
}

// NewMemory keeps records for ttl, at most maxBytes in all (defaults for values <= 0).
func NewMemory(ttl time.Duration, maxBytes int64) *Memory {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Memory{ttl: ttl, maxBytes: maxBytes, now: time.Now, byID: make(map[string]*list.Element)}
}

func (m *Memory) Get(_ context.Context, id string) (*Record, bool, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.byID[id]
	if !ok {
		return nil, false, nil
	}
	en := e.Value.(*entry)
	if !now.Before(en.expires) {
		m.remove(e)
		return nil, false, nil
	}
	return en.rec, true, nil
}

// Put keeps r; a record larger than the whole bound is not kept.
func (m *Memory) Put(_ context.Context, id string, r *Record) error {
	n := r.size()
	if n > m.maxBytes {
		return nil
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.byID[id]; ok {
		m.remove(e)
	}
	// The oldest go first: expired ones, then as many as the new record needs room for.
	for e := m.order.Front(); e != nil && (m.bytes+n > m.maxBytes || !now.Before(e.Value.(*entry).expires)); e = m.order.Front() {
		m.remove(e)
	}
	m.byID[id] = m.order.PushBack(&entry{id: id, rec: r, expires: now.Add(m.ttl)})
	m.bytes += n
	return nil
}

func (m *Memory) Delete(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.byID[id]
	if ok {
		m.remove(e)
	}
	return ok, nil
}

// remove drops e; m.mu is held.
func (m *Memory) remove(e *list.Element) {
	en := m.order.Remove(e).(*entry)
	delete(m.byID, en.id)
	m.bytes -= en.rec.size()
}
