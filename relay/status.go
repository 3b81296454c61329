package relay

import (
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

// PoolStatus is one pool in /health and /admin/stats.
type PoolStatus struct {
	Queued          int            `json:"queued"`
	EstimatedWaitMS int64          `json:"estimated_wait_ms"`
	MeanServiceMS   int64          `json:"mean_service_ms"`
	Targets         []TargetStatus `json:"targets"`
}

// TargetStatus is one target of a PoolStatus.
type TargetStatus struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Healthy  bool   `json:"healthy"`
	InFlight int    `json:"in_flight"`
	Breaker  string `json:"breaker,omitempty"`
}

// Status is the process's state as /health and /admin/stats report it.
type Status struct {
	Pools    map[string]PoolStatus // every pool's queue, estimated wait and targets' health
	Draining bool                  // SIGTERM came: new inference requests get 503
	Uptime   time.Duration
	Extras   map[string]any // the objects given to SetHealthExtra, by name
}

// Status takes one snapshot of every pool, with what SetHealthExtra added.
func (s *Server) Status() Status {
	st := Status{Pools: map[string]PoolStatus{}, Draining: s.draining.Load(), Uptime: time.Since(s.started),
		Extras: map[string]any{}}
	s.eachPool(func(name string, p *Pool) {
		v := p.view()
		ps := PoolStatus{Queued: v.queued, EstimatedWaitMS: v.wait.Milliseconds(), MeanServiceMS: v.meanService.Milliseconds(),
			Targets: make([]TargetStatus, 0, len(v.members))}
		for _, m := range v.members {
			ps.Targets = append(ps.Targets, TargetStatus{ID: m.ID, Kind: m.Kind, Healthy: m.Healthy, InFlight: m.InFlight, Breaker: m.Breaker})
		}
		st.Pools[name] = ps
	})
	s.extraMu.Lock()
	defer s.extraMu.Unlock()
	for _, e := range s.extras {
		st.Extras[e.key] = e.value()
	}
	return st
}

// PoolMembers returns a snapshot of a pool's targets (nil for an unknown pool).
func (s *Server) PoolMembers(pool string) []MemberView {
	p := s.pool(pool)
	if p == nil {
		return nil
	}
	return p.view().members
}

// SetHealthExtra adds a named object to Status, so to /health and /admin/stats (AppProxy mode
// reports its coordinator state).
func (s *Server) SetHealthExtra(key string, value func() any) {
	s.extraMu.Lock()
	defer s.extraMu.Unlock()
	s.extras = append(s.extras, healthExtra{key, value})
}

type healthExtra struct {
	key   string
	value func() any
}

// WorkerView is a connected relay worker with the provider it joined.
type WorkerView struct {
	Provider string
	MemberView
}

// Workers returns every connected relay worker, ordered by id (worker-2 before worker-10).
func (s *Server) Workers() []WorkerView {
	var workers []WorkerView
	s.eachPool(func(name string, p *Pool) {
		for _, m := range p.view().members {
			if m.Kind == "worker" {
				workers = append(workers, WorkerView{name, m})
			}
		}
	})
	slices.SortFunc(workers, func(a, b WorkerView) int { return compareWorkerIDs(a.ID, b.ID) })
	return workers
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

// Readiness is what /readyz says: "ready", or why not yet ("starting": a part of the process
// holds readiness back, see HoldReady) or no longer ("draining").
func (s *Server) Readiness() string {
	switch {
	case s.draining.Load():
		return "draining"
	case s.notReady.Load() > 0:
		return "starting"
	}
	return "ready"
}
