package relay

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// UpstreamSpec is one HTTP upstream of a pool that the control plane manages.
type UpstreamSpec struct {
	ID            string // stable identity: a new ID at the same URL is a new upstream
	URL           string
	Weight        float64
	MaxConcurrent int      // 0 = no cap
	Models        []string // what it serves; nil = any model
	OnServed      func()   // called, off the lock, each time the upstream answers a request
	// Speaks seeds what the upstream is known to serve (a circuit's runtime variant); it stays
	// auto, so the other family is still tried and learned.
	Speaks []Dialect
}

// PoolSpec is the desired state of an upstream pool.
type PoolSpec struct {
	Upstreams []UpstreamSpec
	// ClientHost sends the client's Host header upstream instead of the upstream's own
	// (model servers behind Backend.AI see the circuit's host, as with the stock worker).
	ClientHost bool
	// Unavailable answers when the pool has no usable upstream; Refused when every upstream
	// tried refused the connection. Nil means the relay's own JSON errors (503 and 502).
	Unavailable, Refused func(http.ResponseWriter)
}

// SetUpstreamPool makes the named pool match spec, changing only what differs: upstreams that
// stay keep their state and their in-flight requests; removed ones finish what they hold. A
// pool with no usable upstream fails requests at once rather than queueing them.
func (s *Server) SetUpstreamPool(name string, spec PoolSpec) error {
	s.poolsMu.Lock()
	p := s.pool(name)
	if p == nil {
		p = newPool(name, s.poolConf, true)
		s.pools.Store(name, p)
	}
	s.poolsMu.Unlock()

	want := make(map[string]UpstreamSpec, len(spec.Upstreams))
	for _, u := range spec.Upstreams {
		want[u.ID] = u
	}
	p.mu.Lock()
	p.onUnavailable, p.onRefused = spec.Unavailable, spec.Refused
	var stale []*member
	have := make(map[string]bool, len(p.members))
	for _, m := range p.members {
		u, ok := m.target.(*upstream)
		if !ok {
			continue
		}
		w, keep := want[m.id]
		if !keep || w.URL != u.base.String() {
			stale = append(stale, m)
			continue
		}
		have[m.id] = true
		if w.Weight > 0 {
			m.weight = w.Weight
		}
		m.maxConcurrent = w.MaxConcurrent
		if w.Models != nil {
			m.setModels(w.Models)
			p.index = nil
		}
	}
	p.mu.Unlock()
	for _, m := range stale {
		p.drop(m)
	}
	for _, w := range spec.Upstreams {
		if have[w.ID] {
			continue
		}
		models := w.Models
		if models == nil {
			models = []string{"*"}
		}
		u, err := newUpstream(s, Backend{Name: w.ID, URL: w.URL, Models: models, Weight: w.Weight,
			MaxConcurrent: w.MaxConcurrent}, !spec.ClientHost)
		if err != nil {
			return fmt.Errorf("pool %s: %w", name, err)
		}
		u.pool = p
		u.onServed = w.OnServed
		for _, d := range w.Speaks {
			u.m.speech.assumeSpeaks(d)
		}
		if err := p.add(u.m); err != nil {
			return fmt.Errorf("pool %s: %w", name, err)
		}
	}
	return nil
}

// RemovePool takes a pool out of service: it accepts nothing new, its queued requests fail
// with 503 "pool removed", and its in-flight requests run to completion.
func (s *Server) RemovePool(name string) {
	s.poolsMu.Lock()
	p := s.pool(name)
	if p != nil {
		s.pools.Delete(name)
	}
	s.poolsMu.Unlock()
	if p != nil {
		p.failQueued(errPoolRemoved, true)
	}
}

// healthLoop probes every upstream each interval: one that stops answering goes out of
// rotation (its breaker opens), and one whose breaker opened on refused connections gets its
// trial request as soon as a probe connects again.
func (s *Server) healthLoop(ctx context.Context) {
	t := time.NewTicker(s.timings.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.probeAll(ctx)
		}
	}
}

func (s *Server) probeAll(ctx context.Context) {
	var targets []*upstream
	s.eachPool(func(_ string, p *Pool) {
		p.mu.Lock()
		for _, m := range p.members {
			if u, ok := m.target.(*upstream); ok {
				targets = append(targets, u)
			}
		}
		p.mu.Unlock()
	})
	sem := make(chan struct{}, 64) // bounded: a large circuit set must not open thousands of sockets at once
	var wg sync.WaitGroup
	for _, u := range targets {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			u.pool.probed(u.m, u.probe(ctx))
		}()
	}
	wg.Wait()
}
