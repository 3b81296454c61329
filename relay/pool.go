package relay

import (
	"container/list"
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Pool is a set of targets with its own FIFO queue: ModelRelay's "provider". In standalone
// mode one pool holds the relay workers and the static upstreams; in AppProxy mode every
// circuit is a pool of upstreams. A pool's mutex guards only that pool, so requests on
// different pools never contend, and nothing under it does I/O.
type Pool struct {
	name      string
	maxQueue  int  // 0 = unbounded
	failFast  bool // no usable member => fail at once instead of queueing (circuit pools)
	keepKnown time.Duration

	mu         sync.Mutex
	members    []*member // registration order
	queue      requestQueue
	cursor     map[string]uint64    // per model: seq of the member chosen last
	index      map[string][]*member // model -> members naming it; nil = rebuild (see candidatesLocked)
	stars      []*member            // members serving any model
	knownUntil map[string]time.Time // models whose last advertiser left recently
	// Optional answers of the control plane's own for the two failures it defines.
	onUnavailable func(http.ResponseWriter) // no usable upstream
	onRefused     func(http.ResponseWriter) // every upstream tried refused the connection
	removed       bool
}

func newPool(name string, maxQueue int, failFast bool, keepKnown time.Duration) *Pool {
	return &Pool{
		name:       name,
		maxQueue:   maxQueue,
		failFast:   failFast,
		keepKnown:  keepKnown,
		queue:      requestQueue{byModel: make(map[string]*list.List)},
		cursor:     make(map[string]uint64),
		knownUntil: make(map[string]time.Time),
	}
}

// Name is the pool's name (a provider name, or "circuit:<id>").
func (p *Pool) Name() string { return p.name }

// pickLocked chooses the member for model: lowest load among available members that serve
// it; ties go round-robin after the member chosen last for this model (or by smooth weighted
// round-robin when the tied members carry different weights). known reports whether any
// member serves the model at all, available or not. Ties are decided by seq, not by the
// order of iteration, so the model index needs no merging.
func (p *Pool) pickLocked(model string) (chosen *member, known bool) {
	byModel, stars := p.candidatesLocked(model)
	if len(byModel) == 0 && len(stars) == 0 {
		return nil, false
	}
	last := p.cursor[model]
	best := -1.0
	var first, afterCursor *member
	var total float64
	sameWeight := true
	for _, list := range [2][]*member{byModel, stars} {
		for _, m := range list {
			if !m.available() {
				continue
			}
			l := m.load()
			switch {
			case best < 0 || l < best:
				best, first, afterCursor, total, sameWeight = l, m, nil, 0, true
			case l > best:
				continue
			case m.seq < first.seq:
				first = m
			}
			total += m.weight
			if m.weight != first.weight {
				sameWeight = false
			}
			if m.seq > last && (afterCursor == nil || m.seq < afterCursor.seq) {
				afterCursor = m
			}
		}
	}
	switch {
	case first == nil:
		return nil, true
	case !sameWeight:
		return p.smoothWeightedLocked(model, best, total), true
	case afterCursor != nil:
		return afterCursor, true
	}
	return first, true
}

// candidatesLocked returns the members that serve model by name and those that serve any model,
// each in registration order. The index is rebuilt only after membership or models changed.
func (p *Pool) candidatesLocked(model string) (byModel, stars []*member) {
	if p.index == nil {
		p.index = make(map[string][]*member)
		p.stars = p.stars[:0]
		for _, m := range p.members {
			if m.star {
				p.stars = append(p.stars, m)
			}
			for _, name := range m.models {
				p.index[name] = append(p.index[name], m)
			}
		}
	}
	return p.index[model], p.stars
}

func (p *Pool) smoothWeightedLocked(model string, load, total float64) *member {
	byModel, stars := p.candidatesLocked(model)
	var chosen *member
	for _, list := range [2][]*member{byModel, stars} {
		for _, m := range list {
			if !m.available() || m.load() != load {
				continue
			}
			m.swrrCurrent += m.weight
			if chosen == nil || m.swrrCurrent > chosen.swrrCurrent {
				chosen = m
			}
		}
	}
	chosen.swrrCurrent -= total
	return chosen
}

func (p *Pool) assignLocked(m *member, req *Request) {
	m.inFlight++
	m.reported++
	p.cursor[req.Model] = m.seq
	req.state = stateAssigned
}

// knowsLocked says whether a request for model should wait rather than fail with 404.
func (p *Pool) knowsLocked(model string, anyServes bool) bool {
	if anyServes {
		return true
	}
	now := time.Now()
	for _, name := range [2]string{model, "*"} {
		if until, ok := p.knownUntil[name]; ok && now.Before(until) {
			return true
		}
	}
	return false
}

func (p *Pool) anyUsableLocked() bool {
	for _, m := range p.members {
		if !m.draining && !m.unhealthy {
			return true
		}
	}
	return false
}

// enter offers req to the pool: it is assigned at once, queued (front for a requeue), or
// refused. When queued is true the caller must wait for the handoff.
func (p *Pool) enter(req *Request, requeue bool) (m *member, queued bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.removed {
		return nil, false, errPoolRemoved
	}
	m, serves := p.pickLocked(req.Model)
	if m != nil {
		p.assignLocked(m, req)
		return m, false, nil
	}
	if !p.knowsLocked(req.Model, serves) && !p.failFast {
		return nil, false, errNoProvider(req.Model)
	}
	if p.failFast && !p.anyUsableLocked() {
		return nil, false, errNoReplica
	}
	if !requeue && p.maxQueue > 0 && p.queue.len() >= p.maxQueue {
		return nil, false, errQueueFull
	}
	req.state = stateQueued
	p.queue.push(req, requeue)
	return nil, true, nil
}

// hasFree reports whether a target could take a request for model right now.
func (p *Pool) hasFree(model string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, _ := p.pickLocked(model)
	return m != nil && !p.removed
}

// fail answers a request the pool could not serve, in the pool's own words where it has them.
func (p *Pool) fail(out *responder, err error) {
	p.mu.Lock()
	unavailable, refused := p.onUnavailable, p.onRefused
	p.mu.Unlock()
	var answer func(http.ResponseWriter)
	switch {
	case out.started:
	case errors.Is(err, errNoReplica):
		answer = unavailable
	case errors.Is(err, errAllRefused), errors.Is(err, errRequeueLimit) && refused != nil:
		answer = refused
	}
	if answer == nil {
		out.fail(err)
		return
	}
	out.started = true
	rec := statusRecorder{ResponseWriter: out.w}
	answer(&rec)
	out.status = rec.status
}

// withdraw takes a queued request out of the queue. It reports false when the pool already
// handed the request off (the handoff is then waiting in req.handoff).
func (p *Pool) withdraw(req *Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if req.state != stateQueued {
		return false
	}
	p.queue.remove(req)
	req.state = stateDone
	return true
}

// acquire finds a member for req, queueing it when none is free, until the queue deadline,
// the request deadline or ctx ends the wait.
//
// The request timeout is not its business: it arrives as ctx's cause.
func (p *Pool) acquire(ctx context.Context, req *Request, requeue bool, queueDeadline time.Time) (*member, error) {
	m, queued, err := p.enter(req, requeue)
	if !queued {
		return m, err
	}
	var expired <-chan time.Time
	if !queueDeadline.IsZero() {
		t := time.NewTimer(time.Until(queueDeadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case h := <-req.handoff:
		return h.m, h.err
	case <-ctx.Done():
		err = context.Cause(ctx)
	case <-expired:
		err = errQueueTimeout
	}
	if p.withdraw(req) {
		return nil, err
	}
	h := <-req.handoff
	if h.m != nil && err == errQueueTimeout {
		return h.m, h.err // it got a target in the same instant: better served than refused
	}
	if h.m != nil {
		p.release(h.m)
	}
	return nil, err
}

// release frees the slot a request held on m and gives it to the oldest queued request m can
// serve.
func (p *Pool) release(m *member) {
	p.mu.Lock()
	m.inFlight--
	if m.reported > 0 {
		m.reported--
	}
	drained := m.draining && !m.gone && m.inFlight == 0
	p.dispatchForLocked(m)
	p.mu.Unlock()
	if drained {
		m.target.drained()
	}
}

// dispatchForLocked hands queued requests to m while it has room: the oldest it can serve
// first. Called whenever m may have gained capacity, so a waiting request never sits next to
// an idle compatible target.
func (p *Pool) dispatchForLocked(m *member) {
	for m.available() {
		req := p.queue.oldestFor(m)
		if req == nil {
			return
		}
		p.queue.remove(req)
		p.assignLocked(m, req)
		req.handoff <- handoff{m: m}
	}
}

// add registers a new member and lets it take queued work at once.
func (p *Pool) add(m *member) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.removed {
		return errPoolRemoved
	}
	p.members = append(p.members, m)
	p.index = nil
	for _, name := range m.models {
		delete(p.knownUntil, name)
	}
	p.dispatchForLocked(m)
	return nil
}

// update changes m's state under the pool lock, then dispatches to it if it gained room.
func (p *Pool) update(m *member, change func(*member)) {
	p.mu.Lock()
	change(m)
	drained := m.draining && !m.gone && m.inFlight == 0
	p.dispatchForLocked(m)
	p.mu.Unlock()
	if drained {
		m.target.drained()
	}
}

// setModels replaces what m serves (and its load, unless load < 0). Models it stops serving
// stay known for a while, as when a worker leaves.
func (p *Pool) setModels(m *member, models []string, load int) {
	p.update(m, func(m *member) {
		until := time.Now().Add(p.keepKnown)
		for _, old := range m.models {
			if !slices.Contains(models, old) {
				p.knownUntil[old] = until
			}
		}
		m.setModels(models)
		p.index = nil
		for _, name := range m.models {
			delete(p.knownUntil, name)
		}
		if load >= 0 {
			m.reported = load
		}
	})
}

// drop removes m from the pool. Its models stay known for keepKnown (workers restart).
func (p *Pool) drop(m *member) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m.gone {
		return
	}
	m.gone = true
	p.index = nil
	for i, other := range p.members {
		if other == m {
			p.members = append(p.members[:i:i], p.members[i+1:]...)
			break
		}
	}
	until := time.Now().Add(p.keepKnown)
	for _, name := range m.models {
		p.knownUntil[name] = until
	}
	if m.star {
		p.knownUntil["*"] = until
	}
}

// failQueued fails every queued request with err; removing marks the pool closed for good.
func (p *Pool) failQueued(err error, removing bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if removing {
		p.removed = true
	}
	for req := p.queue.oldest(); req != nil; req = p.queue.oldest() {
		p.queue.remove(req)
		req.state = stateDone
		req.handoff <- handoff{err: err}
	}
}
