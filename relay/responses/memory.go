package responses

import (
	"context"
	"time"

	"modelrelay/relay/bounded"
)

// Memory is a Store in this process: bounded by bytes (the oldest records go first when a new
// one would pass the bound) and by age (a record older than the TTL is gone).
type Memory struct {
	ttl     time.Duration
	now     func() time.Time
	records *bounded.Map[string, *Record]
}

// NewMemory keeps records for ttl, at most maxBytes in all (defaults for values <= 0).
func NewMemory(ttl time.Duration, maxBytes int64) *Memory {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Memory{ttl: ttl, now: time.Now, records: bounded.New[string, *Record](maxBytes)}
}

func (m *Memory) Get(_ context.Context, id string) (*Record, bool, error) {
	r, ok := m.records.Get(id, m.now())
	return r, ok, nil
}

// Put keeps r; a record larger than the whole bound is not kept.
func (m *Memory) Put(_ context.Context, id string, r *Record) error {
	m.records.Put(id, r, r.size(), m.now().Add(m.ttl))
	return nil
}

func (m *Memory) Delete(_ context.Context, id string) (bool, error) { return m.records.Delete(id), nil }
