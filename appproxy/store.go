package appproxy

import (
	"reflect"
	"slices"
	"strings"
	"sync"

	"modelrelay/protocol"
)

// Store is the set of circuits this worker serves, by id. The lifecycle is its only writer;
// status readers may call Len concurrently.
type Store struct {
	mu       sync.Mutex
	circuits map[string]protocol.Circuit
}

func NewStore() *Store { return &Store{circuits: map[string]protocol.Circuit{}} }

// Add inserts or replaces circuits, as a created event does.
func (s *Store) Add(cs ...protocol.Circuit) (changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		if old, ok := s.circuits[c.ID]; !ok || !reflect.DeepEqual(old, c) {
			changed = true
		}
		s.circuits[c.ID] = c
	}
	return changed
}

// Remove deletes circuits by id.
func (s *Store) Remove(ids ...string) (changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if _, ok := s.circuits[id]; ok {
			delete(s.circuits, id)
			changed = true
		}
	}
	return changed
}

// SetRoutes replaces one circuit's whole route set. A circuit we do not know is upserted from the
// event's embedded copy, with routes (not its possibly stale route_info) as its route set.
func (s *Store) SetRoutes(c protocol.Circuit, routes []protocol.Route) (changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next, ok := s.circuits[c.ID]
	if !ok {
		next = c
	}
	next.RouteInfo = slices.Clone(routes)
	if old, had := s.circuits[c.ID]; had && reflect.DeepEqual(old, next) {
		return false
	}
	s.circuits[c.ID] = next
	return true
}

// Replace makes the set equal to cs, as a full pull does.
func (s *Store) Replace(cs []protocol.Circuit) (changed bool) {
	next := make(map[string]protocol.Circuit, len(cs))
	for _, c := range cs {
		next[c.ID] = c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed = !reflect.DeepEqual(s.circuits, next)
	s.circuits = next
	return changed
}

// Circuits is a copy of the set, ordered by id so every reconcile sees the same order.
func (s *Store) Circuits() []protocol.Circuit {
	s.mu.Lock()
	out := make([]protocol.Circuit, 0, len(s.circuits))
	for _, c := range s.circuits {
		out = append(out, c)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b protocol.Circuit) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Len is the number of circuits held.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.circuits)
}
