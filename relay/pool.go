package relay

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"modelrelay/relay/prefix"
)

// Pool is a set of targets with its own queue (priority classes, first come first served
// within each): ModelRelay's "provider". In standalone
// mode one pool holds the relay workers and the static upstreams; in AppProxy mode every
// circuit is a pool of upstreams. A pool's mutex guards only that pool, so requests on
// different pools never contend, and nothing under it does I/O.
type Pool struct {
	name     string
	cfg      *poolConfig
	failFast bool // a model no member names is 503 "no replica", never 404 (circuit pools)

	mu         sync.Mutex
	members    []*member // registration order
	queue      requestQueue
	cursor     map[string]uint64    // per model: seq of the member chosen last
	index      map[string][]*member // model -> members naming it; nil = rebuild (see indexLocked)
	stars      []*member            // the catch-all members (see serving)
	knownUntil map[string]time.Time // models whose last advertiser left recently
	ramping    []*member            // members in slow start (see rampLocked)
	// Optional answers of the control plane's own for the two failures it defines.
	onUnavailable func(http.ResponseWriter) // no usable upstream
	onRefused     func(http.ResponseWriter) // every upstream tried refused the connection
	removed       bool
	// meanService is the EWMA of how long completed requests held their slot: with the queue
	// and the capacity it makes the estimated wait (Retry-After, max_latency_ms).
	meanService time.Duration
	// wakeAt is when the pool must look at its queue again with nothing else to prompt it (a
	// breaker's cool-down ends, a worker grace runs out); timer fires then.
	wakeAt time.Time
	timer  *time.Timer
	// Cache-aware routing (nil with least_load): the prompt blocks each target recently
	// served, and each session's last target. Both lock themselves; selection reads them
	// under mu, the request path records into them after mu.
	prefixes *prefix.Index
	sessions *prefix.Sessions
	// Selection (select.go): the rules that read a request's wishes, and the working set
	// every selection reuses.
	rules []policy
	sel   candidates
}

// poolConfig is what every pool of a server shares.
type poolConfig struct {
	maxQueue    int           // 0 = unbounded
	keepKnown   time.Duration // a model stays known this long after its last advertiser left
	workerGrace time.Duration // ... but requests wait for it only this long
	slowStart   time.Duration // a target whose breaker closes again ramps up over this (0 = off)
	breaker     BreakerOptions
	sched       Scheduling
	log         *slog.Logger
	names       *modelNames // model names metrics may use as labels
}

// meanServiceStart is the service time assumed before any request completed.
const meanServiceStart = time.Second

func newPool(name string, cfg *poolConfig, failFast bool) *Pool {
	p := &Pool{
		name:        name,
		cfg:         cfg,
		failFast:    failFast,
		queue:       requestQueue{byModel: make(map[string]*classLists), aging: cfg.sched.PriorityAging},
		cursor:      make(map[string]uint64),
		knownUntil:  make(map[string]time.Time),
		meanService: meanServiceStart,
	}
	if cfg.sched.CacheAware {
		p.prefixes = prefix.NewIndex(cfg.sched.PrefixCacheEntries)
		p.sessions = prefix.NewSessions(cfg.sched.AffinityTTL, maxSessions)
	}
	p.rules = selectionRules(&cfg.sched, p.sessions, p.prefixes)
	return p
}

// maxSessions bounds the session keys a pool remembers (the oldest are forgotten first).
const maxSessions = 100_000

// placed records where req went, for the next selection: the session's target and the
// prompt blocks the target now holds. Called after the pool's lock, off it.
func (p *Pool) placed(req *Request, m *member) {
	pr := req.prompt
	if pr == nil || p.prefixes == nil {
		return
	}
	if pr.Session != "" {
		p.sessions.Set(pr.Session, m.seq, time.Now())
	}
	if len(pr.Blocks) > 0 {
		p.prefixes.Record(m.seq, pr.Blocks)
		if m.left.Load() {
			p.prefixes.Forget(m.seq) // it left while we recorded: nothing may outlive it
		}
	}
}

// Name is the pool's name (a provider name, or "circuit:<id>").
func (p *Pool) Name() string { return p.name }

func (p *Pool) assignLocked(m *member, req *Request) {
	m.inFlight++
	m.reported++
	m.brk.taken()
	p.cursor[req.Model] = m.seq
	req.state = stateAssigned
}

// outlookLocked says what becomes of a request for model that found no free target: it
// waits in the queue (until grace, when that is set: the model's last relay worker left and
// may come back), or it fails at once with err. A model with a live member waits; one whose
// static backends or replicas are all down or breaker-open is 503 at once, and so is one
// whose last worker left more than worker_grace ago; one never seen is 404.
func (p *Pool) outlookLocked(model string, now *clock) (grace time.Time, err error) {
	byModel, stars := p.indexLocked(model)
	var reopens time.Time // earliest end of a cool-down among the model's members
	for _, list := range [2][]*member{byModel, stars} {
		for _, m := range list {
			if m.live(now) {
				return time.Time{}, nil
			}
			if m.brk.state == breakerOpen && (reopens.IsZero() || m.brk.until.Before(reopens)) {
				reopens = m.brk.until
			}
		}
	}
	for _, name := range [2]string{model, "*"} {
		if until, ok := p.knownUntil[name]; ok && now.get().Before(until) {
			end := until.Add(p.cfg.workerGrace - p.cfg.keepKnown)
			if now.get().Before(end) {
				return end, nil
			}
			return time.Time{}, noReplica(time.Second)
		}
	}
	if len(byModel) > 0 || len(stars) > 0 || p.failFast {
		wait := time.Second
		if !reopens.IsZero() {
			wait = reopens.Sub(now.get())
		}
		return time.Time{}, noReplica(wait)
	}
	return time.Time{}, errNoProvider(model)
}

// estimateLocked is how long a request for model that joins the queue now may expect to wait:
// (the requests queued ahead of it + 1) × the mean service time ÷ the live capacity serving
// the model. The +1 is its own turn: with every slot busy and nobody queued, it still waits
// for one to free. Zero when a live member has no concurrency cap.
func (p *Pool) estimateLocked(model string, now *clock) time.Duration {
	ahead := p.queue.len()
	list := p.members
	if model != "" {
		list = p.servingLocked(model, now)
		ahead = 0
		if l := p.queue.byModel[model]; l != nil {
			ahead = l.len()
		}
	}
	capacity := 0
	for _, m := range list {
		if m.draining || !m.live(now) {
			continue
		}
		if m.maxConcurrent == 0 {
			return 0
		}
		capacity += m.maxConcurrent
	}
	return time.Duration(float64(ahead+1) * float64(p.meanService) / float64(max(capacity, 1)))
}

// enter offers req to the pool: it is assigned at once, queued (front for a requeue), or
// refused. When queued is true the caller must wait for the handoff.
func (p *Pool) enter(req *Request, requeue bool) (m *member, queued bool, err error) {
	var now clock
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.removed {
		return nil, false, errPoolRemoved
	}
	if m, _ = p.pickLocked(req.Model, nil, req); m != nil {
		p.assignLocked(m, req)
		return m, false, nil
	}
	grace, err := p.outlookLocked(req.Model, &now)
	if err != nil {
		return nil, false, err
	}
	if !requeue {
		full := p.cfg.maxQueue > 0 && p.queue.len() >= p.cfg.maxQueue
		if full || req.maxLatency > 0 {
			wait := p.estimateLocked(req.Model, &now)
			if req.maxLatency > 0 && wait > req.maxLatency {
				return nil, false, busy(errTooSlow, wait)
			}
			if full {
				// A full queue takes a request by shedding the newest waiter of a lower class.
				shed := p.queue.newestBelow(req.priority, &now)
				if shed == nil {
					return nil, false, busy(errQueueFull, wait)
				}
				p.refuseLocked(shed, busy(errQueueFull, wait))
			}
		}
	}
	if !grace.IsZero() {
		p.wakeLocked(grace)
	}
	req.state = stateQueued
	if req.handoff == nil {
		req.handoff = make(chan handoff, 1) // made only for a request that waits
	}
	p.queue.push(req, requeue)
	return nil, true, nil
}

// hasFree reports whether a target could take a request for model right now.
func (p *Pool) hasFree(model string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.removed {
		return false
	}
	// Eligibility alone: picking would move the weighted round robin on for a request this
	// pool may never serve, skewing the weights' shares on routes with several pools.
	var now clock
	served := p.servingLocked(model, &now)
	if len(served) == 0 {
		return false
	}
	p.sel.gather(served, nil)
	return len(p.sel.least) > 0
}

// another assigns req to a free target of the pool other than tried, if there is one now:
// the one retry a request gets on another target after its first answered 429 or 5xx.
func (p *Pool) another(req *Request, tried *member) *member {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.removed {
		return nil
	}
	m, _ := p.pickLocked(req.Model, tried, req)
	if m != nil {
		p.assignLocked(m, req)
	}
	return m
}

// ownAnswer is the pool's own answer to a request it could not serve, for the failures the
// control plane words itself; nil means the relay answers err in the route's dialect.
func (p *Pool) ownAnswer(err error) func(http.ResponseWriter) {
	p.mu.Lock()
	unavailable, refused := p.onUnavailable, p.onRefused
	p.mu.Unlock()
	switch {
	case errors.Is(err, errNoReplica):
		if unavailable == nil {
			return nil
		}
		return func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", retryAfter(err)) // the control plane's 503
			unavailable(w)
		}
	case errors.Is(err, errAllRefused), errors.Is(err, errRequeueLimit):
		return refused
	}
	return nil
}

// refuseLocked takes a queued request out of the queue and hands it err.
func (p *Pool) refuseLocked(req *Request, err error) {
	p.queue.remove(req)
	req.state = stateDone
	req.handoff <- handoff{err: err}
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
// The request timeout is not its business: it arrives as ctx's cause. waited is how long req
// stood in the queue before it got m (0 when a member was free at once), for the metrics.
func (p *Pool) acquire(ctx context.Context, req *Request, requeue bool, queueDeadline time.Time) (m *member, waited time.Duration, err error) {
	m, queued, err := p.enter(req, requeue)
	if !queued {
		return m, 0, err
	}
	queuedAt := time.Now()
	var expired <-chan time.Time
	if !queueDeadline.IsZero() {
		t := time.NewTimer(time.Until(queueDeadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case h := <-req.handoff:
		return h.m, time.Since(queuedAt), h.err
	case <-ctx.Done():
		err = causeOf(ctx)
	case <-expired:
		err = errQueueTimeout
	}
	if p.withdraw(req) {
		return nil, 0, err
	}
	h := <-req.handoff
	if h.m != nil && err == errQueueTimeout {
		return h.m, time.Since(queuedAt), h.err // it got a target in the same instant: better served than refused
	}
	if h.m != nil {
		p.release(h.m, outcomeNone, 0)
	}
	return nil, 0, err
}

// release frees the slot a request held on m for served, with what the attempt said about
// m's health, and gives the slot to the oldest queued request m can serve.
func (p *Pool) release(m *member, o outcome, served time.Duration) {
	var now clock
	p.mu.Lock()
	m.inFlight--
	if m.reported > 0 {
		m.reported--
	}
	if o == outcomeOK {
		p.meanService = time.Duration(0.8*float64(p.meanService) + 0.2*float64(served))
	}
	var opened bool
	var was breakerState
	if m.kind == kindUpstream {
		was = m.brk.state
		opened = m.brk.record(o, &now, &p.cfg.breaker)
		if was != breakerClosed && m.brk.state == breakerClosed {
			p.slowStartLocked(m, now.get()) // back: its share returns over slow_start
		}
	}
	drained := m.draining && !m.gone() && m.inFlight == 0
	p.dispatchForLocked(m)
	if opened {
		p.openedLocked(m, &now)
	}
	state, cooldown := m.brk.state, m.brk.cooldown
	p.mu.Unlock()
	if drained {
		m.target.drained()
	}
	if m.kind == kindUpstream {
		p.logBreaker(m, was, state, cooldown)
	}
}

// slowStartLocked starts m's slow start at now: selection gives it back its weight over
// slow_start, from slowStartFloor of it (rampLocked). Queued requests still go to it at once
// when it has room (dispatchForLocked): slow start shapes its share among free targets, it
// never keeps a request waiting next to one.
func (p *Pool) slowStartLocked(m *member, now time.Time) {
	if p.cfg.slowStart <= 0 || m.gone() {
		return
	}
	if m.withheld == 0 {
		p.ramping = append(p.ramping, m)
	}
	m.rampFrom = now
	m.ramp(now, p.cfg.slowStart)
}

// rampLocked brings the weights of the members in slow start up to date before a selection. It
// reads the clock once, and only while some member is in slow start.
func (p *Pool) rampLocked() {
	now := time.Now()
	p.ramping = slices.DeleteFunc(p.ramping, func(m *member) bool { return m.ramp(now, p.cfg.slowStart) || m.gone() })
}

// openedLocked follows a breaker that just opened: the pool looks again when its cool-down
// ends, and requests queued for models that now have no live target fail (to their fallback).
func (p *Pool) openedLocked(m *member, now *clock) {
	p.wakeLocked(m.brk.until)
	p.sweepLocked(now)
}

// logBreaker tells the operator about an outage once: a WARN when a healthy target's breaker
// opens and an INFO when it closes again. The failed trials in between (half-open, then open
// for a longer cool-down) are the same outage going on: DEBUG, or a target that stays down for
// an hour would log a WARN a minute.
func (p *Pool) logBreaker(m *member, was, state breakerState, cooldown time.Duration) {
	switch {
	case state == was:
	case state == breakerOpen && was == breakerClosed:
		p.cfg.log.Warn("target unhealthy: breaker opened, no traffic until its cool-down ends", "pool", p.name,
			"target", m.id, "cooldown", cooldown.String())
	case state == breakerOpen:
		p.cfg.log.Debug("target still unhealthy: trial failed, breaker open again", "pool", p.name, "target", m.id,
			"cooldown", cooldown.String())
	case state == breakerClosed:
		p.cfg.log.Info("target healthy again: breaker closed", "pool", p.name, "target", m.id,
			"slow_start", p.cfg.slowStart.String())
	}
}

// probed feeds a TCP probe's result to m's breaker.
func (p *Pool) probed(m *member, connected bool) {
	now := clock{t: time.Now()}
	p.mu.Lock()
	was := m.brk.state
	if m.brk.probed(connected, now.t, &p.cfg.breaker) {
		p.openedLocked(m, &now)
	} else if connected && m.brk.state == breakerOpen {
		p.wakeLocked(m.brk.until)
	}
	state, cooldown := m.brk.state, m.brk.cooldown
	p.mu.Unlock()
	p.logBreaker(m, was, state, cooldown)
}

// wakeLocked makes the pool look at its queue again at t, when nothing else would prompt it.
func (p *Pool) wakeLocked(t time.Time) {
	if !p.wakeAt.IsZero() && !t.Before(p.wakeAt) {
		return
	}
	p.wakeAt = t
	if p.timer == nil {
		p.timer = time.AfterFunc(time.Until(t), p.wake)
	} else {
		p.timer.Reset(time.Until(t))
	}
}

// wake half-opens the breakers whose cool-down ended and dispatches to them, and fails the
// waits that ran out.
func (p *Pool) wake() {
	now := clock{t: time.Now()}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !now.t.Before(p.wakeAt) {
		p.wakeAt = time.Time{}
	}
	if p.removed {
		return
	}
	for _, m := range p.members {
		if m.brk.cool(now.t) {
			p.wakeLocked(m.brk.until) // still open: look again then
		}
		p.dispatchForLocked(m)
	}
	p.sweepLocked(&now)
}

// sweepLocked fails the queued requests whose model has no live target left and no grace to
// wait out (they move on to their fallback, or get 503), schedules a look at the end of any
// grace, and gives the catch-all members the requests whose named targets all went down.
func (p *Pool) sweepLocked(now *clock) {
	defer func() {
		_, stars := p.indexLocked("")
		for _, m := range stars {
			p.dispatchForLocked(m)
		}
	}()
	for model, l := range p.queue.byModel {
		grace, err := p.outlookLocked(model, now)
		if err == nil {
			if !grace.IsZero() {
				p.wakeLocked(grace)
			}
			continue
		}
		for c := range l {
			for l[c].Len() > 0 {
				p.refuseLocked(l[c].Front().Value.(*Request), err) // (deletes l from byModel once empty)
			}
		}
	}
}

// dispatchForLocked hands queued requests to m while it has room: the oldest it can serve
// first. Called whenever m may have gained capacity, so a waiting request never sits next to
// an idle compatible target.
func (p *Pool) dispatchForLocked(m *member) {
	var now clock
	var serves func(model string) bool // a catch-all's: the models it serves now (serving)
	if m.star {
		serves = func(model string) bool {
			named, _ := p.indexLocked(model)
			return slices.Contains(m.models, model) || !namedServe(named, &now)
		}
	}
	for m.available() {
		req := p.queue.nextFor(m, serves, &now)
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
	p.cfg.names.note(m.models...)
	for _, name := range m.models {
		delete(p.knownUntil, name)
	}
	p.dispatchForLocked(m)
	return nil
}

// update changes m's state under the pool lock, then dispatches to it if it gained room.
func (p *Pool) update(m *member, change func(*member)) {
	var now clock
	p.mu.Lock()
	change(m)
	drained := m.draining && !m.gone() && m.inFlight == 0
	p.dispatchForLocked(m)
	p.sweepLocked(&now)
	p.mu.Unlock()
	if drained {
		m.target.drained()
	}
}

// setModels replaces what m serves (and its load, unless load < 0). Models it stops serving
// stay known for a while, as when a worker leaves.
func (p *Pool) setModels(m *member, models []string, load int) {
	p.update(m, func(m *member) {
		until := time.Now().Add(p.cfg.keepKnown)
		for _, old := range m.models {
			if !slices.Contains(models, old) {
				p.knownUntil[old] = until
			}
		}
		m.setModels(models)
		p.cfg.names.note(m.models...)
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
	if m.gone() {
		return
	}
	m.setOut(outGone, true)
	m.left.Store(true)
	p.index = nil
	if p.prefixes != nil {
		p.prefixes.Forget(m.seq)
	}
	for i, other := range p.members {
		if other == m {
			p.members = append(p.members[:i:i], p.members[i+1:]...)
			break
		}
	}
	until := time.Now().Add(p.cfg.keepKnown)
	for _, name := range m.models {
		p.knownUntil[name] = until
	}
	if m.star {
		p.knownUntil["*"] = until
	}
	p.sweepLocked(&clock{})
}

// failQueued fails every queued request with err; removing marks the pool closed for good.
func (p *Pool) failQueued(err error, removing bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if removing {
		p.removed = true
		if p.timer != nil {
			p.timer.Stop()
		}
	}
	var now clock
	for req := p.queue.next(&now); req != nil; req = p.queue.next(&now) {
		p.refuseLocked(req, err)
	}
}
