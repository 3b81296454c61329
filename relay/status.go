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
	Suspect       bool     `json:"suspect"` // workers: silent since a ping; no new requests until it speaks
	Healthy       bool     `json:"healthy"` // upstreams: breaker closed; workers: not suspect
	Weight        float64  `json:"weight"`
	Breaker       string   `json:"breaker,omitempty"` // upstreams: closed, open or half-open
	breakerState  breakerState
}

type poolView struct {
	queued      int
	wait        time.Duration // estimated for a request that queues now
	meanService time.Duration
	members     []MemberView
}

func (p *Pool) view() poolView {
	now := clock{t: time.Now()}
	p.mu.Lock()
	defer p.mu.Unlock()
	v := poolView{queued: p.queue.len(), wait: p.estimateLocked("", &now), meanService: p.meanService,
		members: make([]MemberView, 0, len(p.members))}
	for _, m := range p.members {
		models := slices.Clone(m.models)
		if m.star {
			models = append(models, "*")
		}
		kind, name, brk := "worker", "", ""
		if m.kind == kindUpstream {
			kind = "upstream"
			brk = m.brk.state.String()
		} else if ws, ok := m.target.(*workerSession); ok {
			name = ws.name
		}
		v.members = append(v.members, MemberView{ID: m.id, Kind: kind, Name: name, Models: models,
			MaxConcurrent: m.maxConcurrent, ReportedLoad: m.reported, InFlight: m.inFlight,
			Draining: m.draining, Suspect: m.suspect(), Healthy: m.brk.state == breakerClosed && !m.suspect(), Weight: m.weight,
			Breaker: brk, breakerState: m.brk.state})
	}
	return v
}

// poolStatus is one pool in /health and /admin/stats.
type poolStatus struct {
	Queued          int            `json:"queued"`
	EstimatedWaitMS int64          `json:"estimated_wait_ms"`
	MeanServiceMS   int64          `json:"mean_service_ms"`
	Targets         []targetStatus `json:"targets"`
}

type targetStatus struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Healthy  bool   `json:"healthy"`
	InFlight int    `json:"in_flight"`
	Breaker  string `json:"breaker,omitempty"`
}

// poolStatuses reports every pool's queue, estimated wait and targets' health.
func (s *Server) poolStatuses() map[string]poolStatus {
	out := map[string]poolStatus{}
	s.eachPool(func(name string, p *Pool) {
		v := p.view()
		ps := poolStatus{Queued: v.queued, EstimatedWaitMS: v.wait.Milliseconds(), MeanServiceMS: v.meanService.Milliseconds(),
			Targets: make([]targetStatus, 0, len(v.members))}
		for _, m := range v.members {
			ps.Targets = append(ps.Targets, targetStatus{ID: m.ID, Kind: m.Kind, Healthy: m.Healthy, InFlight: m.InFlight, Breaker: m.Breaker})
		}
		out[name] = ps
	})
	return out
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
	Suspect       bool     `json:"suspect"`
}

// SetHealthExtra adds a named object to /health and /admin/stats (AppProxy mode reports its
// coordinator state).
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
			InFlight: m.InFlight, MaxConcurrent: m.MaxConcurrent, IsDraining: m.Draining, Suspect: m.Suspect})
	}
	body := map[string]any{
		"status":            "ok",
		"version":           s.opts.Version,
		"workers_connected": len(workers),
		"queue_depth":       queued,
		"uptime_secs":       time.Since(s.started).Seconds(),
		"workers":           workers,
		"pools":             s.poolStatuses(),
	}
	s.addExtras(body)
	writeJSON(w, http.StatusOK, body)
}

// addExtras puts the objects given to SetHealthExtra into a /health or /admin/stats body.
func (s *Server) addExtras(body map[string]any) {
	s.extraMu.Lock()
	defer s.extraMu.Unlock()
	for _, e := range s.extras {
		body[e.key] = e.value()
	}
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
