package keys

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// Memory is the in-memory store: one process, keys lost on restart (the default when no
// database is configured, with a warning at start).
type Memory struct {
	mu     sync.Mutex
	keys   map[string]*memKey // by id
	byHash map[Hash]string
	usage  map[usageRow]*Usage
	now    func() time.Time
}

type memKey struct {
	Key
	hash Hash
}

// usageRow is the identity of one usage total.
type usageRow struct {
	key, model string
	day        time.Time
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{keys: map[string]*memKey{}, byHash: map[Hash]string{}, usage: map[usageRow]*Usage{}, now: time.Now}
}

func (m *Memory) Insert(_ context.Context, k Key, h Hash) (Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k.CreatedAt = m.now().UTC().Truncate(time.Microsecond)
	k.LastUsedAt, k.RevokedAt = time.Time{}, time.Time{}
	k.AllowedModels = slices.Clone(k.AllowedModels)
	k.ExpiresAt = k.ExpiresAt.UTC().Truncate(time.Microsecond) // as PostgreSQL keeps it
	m.keys[k.ID] = &memKey{Key: k, hash: h}
	m.byHash[h] = k.ID
	return k, nil
}

func (m *Memory) Find(_ context.Context, h Hash) (Key, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[m.byHash[h]]
	if !ok || !k.RevokedAt.IsZero() {
		return Key{}, false, nil
	}
	return k.copy(), true, nil
}

func (m *Memory) Get(_ context.Context, id string) (Key, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[id]
	if !ok {
		return Key{}, false, nil
	}
	return k.copy(), true, nil
}

func (m *Memory) List(context.Context) ([]Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Key, 0, len(m.keys))
	for _, k := range m.keys {
		out = append(out, k.copy())
	}
	slices.SortFunc(out, func(a, b Key) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

func (m *Memory) Revoke(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[id]
	if !ok || !k.RevokedAt.IsZero() {
		return false, nil
	}
	k.RevokedAt = m.now().UTC().Truncate(time.Microsecond)
	return true, nil
}

func (m *Memory) Update(_ context.Context, id string, p Patch) (Key, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[id]
	if !ok {
		return Key{}, false, nil
	}
	k.Limits = p.Apply(k.Limits)
	k.AllowedModels = slices.Clone(k.AllowedModels)
	k.ExpiresAt = k.ExpiresAt.UTC().Truncate(time.Microsecond)
	return k.copy(), true, nil
}

func (m *Memory) Record(_ context.Context, rows []Usage, used map[string]time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range rows {
		id := usageRow{r.KeyID, r.Model, Day(r.Day)}
		t, ok := m.usage[id]
		if !ok {
			t = &Usage{KeyID: r.KeyID, Day: id.day, Model: r.Model}
			m.usage[id] = t
		}
		t.Requests += r.Requests
		t.InputTokens += r.InputTokens
		t.OutputTokens += r.OutputTokens
	}
	for id, at := range used {
		if k, ok := m.keys[id]; ok && at.After(k.LastUsedAt) {
			k.LastUsedAt = at.UTC().Truncate(time.Microsecond)
		}
	}
	return nil
}

func (m *Memory) Usage(_ context.Context, id string) ([]Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Usage
	for _, u := range m.usage {
		if u.KeyID == id {
			out = append(out, *u)
		}
	}
	SortUsage(out)
	return out, nil
}

func (m *Memory) Close() {}

// SortUsage orders usage rows by day, then model.
func SortUsage(rows []Usage) {
	slices.SortFunc(rows, func(a, b Usage) int {
		return cmp.Or(a.Day.Compare(b.Day), strings.Compare(a.Model, b.Model))
	})
}

func (k *memKey) copy() Key {
	c := k.Key
	c.AllowedModels = slices.Clone(c.AllowedModels)
	return c
}
