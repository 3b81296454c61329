package relay

import (
	"net/http"
	"slices"
	"time"
)

// MemberView is a snapshot of one target for /health, /admin and metrics.
type MemberView struct {
	ID            string   `json:"id"`
	Kind          string   `json:"kind"` // "worker" or "upstream"
	Name          string   `json:"name,omitempty"`
	Models        []string `json:"models"`
	MaxConcurrent int      `json:"max_concurrent"`
	ReportedLoad  int      `json:"reported_load"`
	InFlight      int      `json:"in_flight"`
	Draining      bool     `json:"draining"`
	Healthy       bool     `json:"healthy"`
	Weight        float64  `json:"weight"`
}

type poolView struct {
	queued  int
	members []MemberView
}

func (p *Pool) view() poolView {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := poolView{queued: p.queue.len(), members: make([]MemberView, 0, len(p.members))}
	for _, m := range p.members {
		models := slices.Clone(m.models)
		if m.star {
			models = append(models, "*")
		}
		kind, name := "worker", ""
		if m.kind == kindUpstream {
			kind = "upstream"
		} else if ws, ok := m.target.(*workerSession); ok {
			name = ws.name
		}
		v.members = append(v.members, MemberView{ID: m.id, Kind: kind, Name: name, Models: models,
			MaxConcurrent: m.maxConcurrent, ReportedLoad: m.reported, InFlight: m.inFlight,
			Draining: m.draining, Healthy: !m.unhealthy, Weight: m.weight})
	}
	return v
}

// PoolMembers returns a snapshot of a pool's targets (nil for an unknown pool).
func (s *Server) PoolMembers(pool string) []MemberView {
	p := s.pool(pool)
	if p == nil {
		return nil
	}
	return p.view().members
}

type healthWorker struct {
	ID            string   `json:"id"`
	Provider      string   `json:"provider"`
	Models        []string `json:"models"`
	InFlight      int      `json:"in_flight"`
	MaxConcurrent int      `json:"max_concurrent"`
	IsDraining    bool     `json:"is_draining"`
}

// SetHealthExtra adds a named object to /health (AppProxy mode reports its coordinator state).
func (s *Server) SetHealthExtra(key string, value func() any) {
	s.extraMu.Lock()
	defer s.extraMu.Unlock()
	s.extras = append(s.extras, healthExtra{key, value})
}

type healthExtra struct {
	key   string
	value func() any
}

// workerView is a relay worker with the provider it joined.
type workerView struct {
	provider string
	MemberView
}

// relayWorkers returns every connected relay worker, ordered by id, and the total queue depth.
func (s *Server) relayWorkers() (workers []workerView, queued int) {
	s.eachPool(func(name string, p *Pool) {
		v := p.view()
		queued += v.queued
		for _, m := range v.members {
			if m.Kind == "worker" {
				workers = append(workers, workerView{name, m})
			}
		}
	})
	slices.SortFunc(workers, func(a, b workerView) int { return compareWorkerIDs(a.ID, b.ID) })
	return workers, queued
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	views, queued := s.relayWorkers()
	workers := make([]healthWorker, 0, len(views))
	for _, m := range views {
		workers = append(workers, healthWorker{ID: m.ID, Provider: m.provider, Models: m.Models,
			InFlight: m.InFlight, MaxConcurrent: m.MaxConcurrent, IsDraining: m.Draining})
	}
	body := map[string]any{
		"status":            "ok",
		"version":           s.opts.Version,
		"workers_connected": len(workers),
		"queue_depth":       queued,
		"uptime_secs":       time.Since(s.started).Seconds(),
		"workers":           workers,
	}
	s.extraMu.Lock()
	for _, e := range s.extras {
		body[e.key] = e.value()
	}
	s.extraMu.Unlock()
	writeJSON(w, http.StatusOK, body)
}

// compareWorkerIDs orders worker-<n> ids numerically (worker-2 before worker-10).
func compareWorkerIDs(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	switch {
	case s.draining.Load():
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
	case s.notReady.Load() > 0:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	}
}
