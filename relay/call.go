package relay

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"modelrelay/protocol"
	"modelrelay/relay/endpoint"
	"modelrelay/relay/keys"
	"modelrelay/relay/prefix"
	"modelrelay/relay/usage"
)

// Placement says which pools may serve the models of a request's chain.
type Placement struct {
	// Pool, when set, serves the model the client asked for, whatever the body names (a
	// circuit's subdomain, where the body's model is only a label). Model is then the name
	// that keys its fallback chain (the circuit's canonical model; "" = the body's model).
	Pool, Model string
	// ByModel names the pools that serve a model, in order of preference: the asked model's
	// when Pool is empty, and the fallbacks'. Nil = none.
	ByModel func(model string) []string
	// OwnAuth says the caller passed the checks of the place it called (a circuit's token and
	// allow-list): client API keys do not apply there (a key of ours is still never forwarded).
	OwnAuth bool
}

// ServeInferenceAt answers an inference call: the asked model from its pools, then down its
// fallback chain while no byte has reached the client.
//
// The stages that read the request run in admitCall, whose frame (the body's view, the scratch
// of every check) is gone before the call is served. A held stream's goroutine waits on the
// frames from here down to the upstream read, and they are kept small: the runtime leaves a
// goroutine's stack at 8 KiB while its deepest call fits, and halves a 16 KiB one that waits
// using under a quarter of it.
func (s *Server) ServeInferenceAt(w http.ResponseWriter, r *http.Request, d Dialect, at Placement) {
	x := exchange{arrival: time.Now()}
	var c admitted
	defer c.release()
	if s.admitCall(w, r, d, at, &x, &c) {
		s.serveChain(r.Context(), c.req, at, walk(c.asked, allowedChain(c.key, c.chain)), c.out, &x)
		s.account(r.Context(), c.req, c.key, c.asked, c.out)
		x.answered(c.out)
	}
	s.metrics.observe(r.URL.Path, x.status, x.arrival, x.ttfb)
	s.logAccess(w, r, &x)
	x.abortIfTorn()
}

// admitted is what admitCall hands ServeInferenceAt: the request, ready to serve, and what to give
// back once it is answered.
type admitted struct {
	req   *Request
	key   *keys.Key
	asked string   // the model asked for: the body's, or a circuit's canonical one
	chain []string // the asked model's fallbacks, before the key's allowed models apply
	out   *answer
	body  *bodyReader
	tap   *usage.Tap
}

// release gives back what the call held, last taken first.
func (c *admitted) release() {
	if c.tap != nil {
		taps.Put(c.tap)
	}
	if c.req != nil {
		if c.req.prompt != nil {
			prompts.Put(c.req.prompt)
		}
		c.req.dropForeign()
	}
	if c.body != nil {
		c.body.release()
	}
}

// admitCall runs the stages before a target is chosen: the cross-origin guard, the client's key,
// the body (read once into one view), the Responses API's history, scheduling wishes, the
// key's admission and the response cache. It answers the client itself and returns false when
// one of them ends the call.
func (s *Server) admitCall(w http.ResponseWriter, r *http.Request, d Dialect, at Placement, x *exchange, c *admitted) bool {
	arrival := x.arrival
	if s.crossOrigin(w, r, DialectErrors(d)) {
		x.status = http.StatusForbidden
		return false
	}
	if s.draining.Load() {
		writeError(w, d, errShuttingDown)
		x.status = errShuttingDown.status
		return false
	}
	var key *keys.Key
	if !at.OwnAuth && (s.opts.RequireAPIKeys || presentsKey(r.Header)) {
		sw := &statusWriter{ResponseWriter: w}
		if key = s.authorize(sw, r, d, arrival); key == nil {
			x.status, x.reason = sw.status, sw.reason // 401, or 503 while the key store is down; 0 if the client left
			return false
		}
		x.keyID = key.ID
	}
	c.key = key
	br := s.bodyReader(w, r)
	c.body = br
	body, err := br.read()
	if err != nil {
		x.status, x.reason = s.refuseBody(w, r, d, err), reasonOf(err)
		return false
	}
	ep, _ := endpoint.For(r.URL.Path)
	who, asSent := owner(key, at), body
	var f bodyView
	err = f.parse(body)
	if err == nil && ep.Route == endpoint.RouteResponses {
		var expanded []byte
		if expanded, err = s.withHistory(r.Context(), body, &f, who); err != nil {
			re := err.(*relayError)
			writeError(w, d, re)
			x.status, x.reason = re.status, re.message
			return false
		}
		if expanded != nil {
			body = expanded
			err = f.parse(body)
		}
	}
	req := s.newRequest(r, d, arrival)
	req.Model, req.Streaming = f.Model, f.Stream
	req.endpoint = ep
	if ep.Route == endpoint.RouteResponses {
		req.responses = &responsesCall{asSent: asSent, keep: s.keepResponse(req, who)}
	}
	req.waiting = br
	c.req = req
	x.id, x.model, x.stream = req.ID, f.Model, f.Stream
	if err == nil {
		// An OpenAI stream reports usage only when asked. For a key's accounting the relay
		// asks, and takes the usage chunk out again for a client that did not; without keys
		// the body goes as the client sent it (the metrics count what streams report).
		ask := key != nil && f.Stream && req.endpoint.Usage && req.endpoint.AskUsage
		var clientAsked bool
		req.Body, req.modelAt, clientAsked = f.rewrite(body, ask)
		req.askedUsage = ask && !clientAsked
		err = s.wishes(req, r, body, &f, key)
	}
	if err != nil {
		x.status, x.reason = s.refuseBody(w, r, d, err), reasonOf(err)
		return false
	}
	asked := f.Model
	if at.Pool != "" && at.Model != "" {
		asked = at.Model
	}
	x.model, c.asked = asked, asked
	if key != nil {
		if no := s.admit(r.Context(), key, asked, arrival); no != nil {
			writeError(w, d, no)
			x.status, x.reason = no.status, no.message
			return false
		}
	}
	var chain []string
	if f.options != nil {
		chain = f.options.fallbacks
	}
	if chain == nil {
		chain = s.opts.Fallbacks[asked]
	}
	out := newAnswer(w, d, s.opts.MaxStreamBytes, arrival)
	c.out = out
	if s.lookup(r, at, key, asked, body, &f, out) {
		x.answered(out) // from the cache: no target, no tokens
		return false
	}
	if f.options != nil {
		out.addMeta()
	}
	if req.endpoint.Usage {
		c.tap = taps.Get().(*usage.Tap)
		out.tapUsage(c.tap, req.askedUsage) // the relay asked for the usage chunk: the client gets none
	}
	c.chain = chain
	return true
}

// prompts and parsers are reused across requests: reading a prompt's blocks allocates nothing
// in steady state.
var (
	prompts = sync.Pool{New: func() any { return new(prefix.Prompt) }}
	parsers = sync.Pool{New: func() any { return new(prefix.Parser) }}
)

// wishes reads what the request asks of scheduling: its priority (x_pool_options, else the
// x-modelrelay-priority header, else its key's default; never above its ceiling), a preferred
// target, its latency bound, and for cache-aware routing (on calls that carry a prompt) its
// session key and prompt blocks, read from the client's body where its view says they lie.
func (s *Server) wishes(req *Request, r *http.Request, body []byte, v *bodyView, key *keys.Key) error {
	o := v.options
	name := field(r.Header, "X-Modelrelay-Priority")
	if o != nil {
		req.maxLatency, req.prefer = o.maxLatency, o.preferGPU
		if o.priority != "" {
			name = o.priority
		}
	}
	def, ceiling := priorityNormal, s.clientCeiling
	if key != nil {
		def, ceiling = keyClasses(key.Limits)
	}
	p, capped, ok := admitClass(name, def, ceiling)
	if !ok {
		return badRequest("x-modelrelay-priority must be high, normal or low")
	}
	if capped {
		keyID := "" // none: the server's max_client_priority capped it
		if key != nil {
			keyID = key.ID
		}
		s.log.Debug("priority capped at the client's ceiling", "request_id", req.ID, "asked", name,
			"served_as", priorityNames[p], "key_id", keyID)
	}
	req.priority = p
	if !s.opts.Scheduling.CacheAware || !req.endpoint.Prompt {
		return nil
	}
	req.prompt = prompts.Get().(*prefix.Prompt)
	ps := parsers.Get().(*prefix.Parser)
	ps.ParseTop(body, &v.prompt, req.prompt)
	parsers.Put(ps)
	if key := field(r.Header, "X-Session-Id"); key != "" {
		req.prompt.Session = key
	}
	return nil
}

// walk is the models a request may be served by, in order: the asked one, then its chain,
// each once.
func walk(asked string, chain []string) []string {
	models := make([]string, 1, 1+len(chain))
	models[0] = asked
	for _, m := range chain {
		if m != "" && !slices.Contains(models, m) {
			models = append(models, m)
		}
	}
	return models
}

func (s *Server) bodyReader(w http.ResponseWriter, r *http.Request) *bodyReader {
	return &bodyReader{r: r, rc: *http.NewResponseController(w), limits: &s.opts.BodyLimits,
		budget: s.bodyBudget, max: s.opts.MaxBodyBytes}
}

// ServeInference answers an inference call from the named pools (for every model of its
// chain).
func (s *Server) ServeInference(w http.ResponseWriter, r *http.Request, d Dialect, pools ...string) {
	s.ServeInferenceAt(w, r, d, Placement{ByModel: func(string) []string { return pools }})
}

// Provider is the pool of relay workers and static backends.
func (s *Server) Provider() string { return s.opts.Provider }

// ServePassThrough forwards any request (any method and path, body streamed) to a target of
// the named upstream pool, answering it unchanged: a circuit's URL must behave like the model
// service itself.
func (s *Server) ServePassThrough(w http.ResponseWriter, r *http.Request, pool string) {
	arrival := time.Now()
	if s.draining.Load() {
		writeError(w, OpenAI, errShuttingDown)
		s.logAccess(w, r, &exchange{arrival: arrival, status: errShuttingDown.status})
		return
	}
	req := s.newRequest(r, OpenAI, arrival)
	req.Streaming = true // unknown content: relay each read as it comes
	req.stream = &streamedBody{r: r.Body, rc: http.NewResponseController(w), rate: s.opts.BodyLimits.MinRate, start: arrival}
	req.streamLength = r.ContentLength
	out := newAnswer(w, OpenAI, 0, arrival)
	x := exchange{arrival: arrival, id: req.ID}
	s.serveChain(r.Context(), req, Placement{Pool: pool}, nil, out, &x)
	x.answered(out)
	s.logAccess(w, r, &x)
	x.abortIfTorn()
}

func (s *Server) newRequest(r *http.Request, d Dialect, arrival time.Time) *Request {
	req := &Request{
		ID:       requestID(s.reqSeq.Add(1)),
		Path:     r.URL.RequestURI(),
		Header:   filterHeader(r.Header),
		Dialect:  d,
		Method:   r.Method,
		Host:     r.Host,
		arrival:  arrival,
		priority: priorityNormal,
	}
	forwardHeaders(req.Header, r, s.opts.TrustedProxies, &req.forwarded)
	return req
}

// requestID is "req-" and the request's number, built in one allocation (a concatenation
// with strconv.FormatUint takes two).
func requestID(n uint64) string {
	var b [24]byte
	return string(strconv.AppendUint(append(b[:0], "req-"...), n, 10))
}

// choosePool picks among candidate pools for model: the first, in rotating order, with a free
// target; else the first in that order (the request queues there).
func (s *Server) choosePool(names []string, model string) *Pool {
	if len(names) == 0 {
		return nil
	}
	if len(names) == 1 {
		return s.pool(names[0])
	}
	start := int(s.reqSeq.Load())
	var fallback *Pool
	for i := range names {
		p := s.pool(names[(start+i)%len(names)])
		if p == nil {
			continue
		}
		if fallback == nil {
			fallback = p
		}
		if p.hasFree(model) {
			return p
		}
	}
	return fallback
}

// serveChain takes req down models, its chain, until one answers or a failure may not move
// it on: a request moves to the next model only before any byte reached the client. With
// models nil (a pass-through) it is served from at.Pool alone. x learns the pools it went to.
func (s *Server) serveChain(clientCtx context.Context, req *Request, at Placement, models []string, out *answer, x *exchange) {
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	ctx := newCallCtx(clientCtx)
	defer ctx.end(context.Canceled) // what still watches the call (a request body going up) stops
	defer s.serving.remove(s.serving.add(ctx))
	if s.opts.RequestTimeout > 0 {
		t := startTimeout(time.Until(req.arrival.Add(s.opts.RequestTimeout)), out, ctx)
		defer t.stop()
	}
	if models != nil {
		s.walkChain(ctx, req, at, models, out, x)
		return
	}
	pool := s.pool(at.Pool)
	if err := s.run(ctx, req, pool, out, x); err != nil {
		s.fail(ctx, pool, out, err)
	}
}

// requestTimeout ends a request whose answer has not begun by its deadline. Its timer is
// reused from request to request: a timer stopped before it fired serves the next request;
// one that fired (or is firing) is dropped, since its function may still be running.
type requestTimeout struct {
	t    *time.Timer
	out  *answer
	call *callCtx
}

var requestTimeouts = sync.Pool{New: func() any {
	rt := new(requestTimeout)
	rt.t = time.AfterFunc(time.Hour, rt.fire)
	rt.t.Stop()
	return rt
}}

func startTimeout(d time.Duration, out *answer, call *callCtx) *requestTimeout {
	rt := requestTimeouts.Get().(*requestTimeout)
	rt.out, rt.call = out, call
	rt.t.Reset(d)
	return rt
}

func (rt *requestTimeout) fire() {
	if rt.out.expire() {
		rt.call.end(errRequestTimeout)
	}
}

func (rt *requestTimeout) stop() {
	if rt.t.Stop() {
		rt.out, rt.call = nil, nil
		requestTimeouts.Put(rt)
	}
}

// walkChain is serveChain's walk down the models of a chain.
func (s *Server) walkChain(ctx context.Context, req *Request, at Placement, models []string, out *answer, x *exchange) {
	// If the chain runs out, the client gets the asked model's failure, unless it was that no
	// pool serves it and an alternate got further (its targets exist but are busy or down):
	// "no provider for model <alternate>" would only puzzle a client that asked for another.
	var failPool *Pool
	var failErr, last error
	for i, model := range models {
		var names []string
		switch {
		case i == 0 && at.Pool != "":
			names = []string{at.Pool}
		case at.ByModel != nil:
			names = at.ByModel(model)
		}
		out.where.served, out.where.from = model, ""
		if i > 0 {
			if err := s.moveOn(req, models[i-1], model, last); err != nil {
				s.fail(ctx, nil, out, err)
				return
			}
			out.where.from = models[0]
		}
		var err error
		pool := s.choosePool(names, req.Model)
		if pool == nil {
			err = errNoProvider(req.Model)
		} else {
			err = s.run(ctx, req, pool, out, x)
		}
		switch {
		case err == nil:
			return
		case out.started() || !movesOn(err):
			s.fail(ctx, pool, out, err)
			return
		case failErr == nil || (noPool(failErr) && !noPool(err)):
			failPool, failErr = pool, err
		}
		last = err
	}
	s.fail(ctx, failPool, out, failErr)
}

// fail answers a request that went no further: a target's own held 429/5xx beats the relay's
// error, unless the client has seen bytes already.
func (s *Server) fail(ctx context.Context, pool *Pool, out *answer, err error) {
	if k := out.kept; k != nil && !out.started() {
		out.where = k.where
		if err := out.replay(k); err != nil {
			out.client.fail(err)
		}
		return
	}
	s.answerError(ctx, pool, out, err)
}

// moveOn points req at the next model of its chain, after the one before failed with last.
// (Never inlined: its log line's arguments take no room in serveChain's frame, which every held
// stream keeps on its stack.)
//
//go:noinline
func (s *Server) moveOn(req *Request, from, to string, last error) error {
	reason := fallbackReason(last)
	s.metrics.fallbacks.WithLabelValues(s.poolConf.names.label(from), reason).Inc()
	s.log.Debug("moving to the next model of the chain", "request_id", req.ID, "from", from, "to", to,
		"reason", reason, "err", last)
	return req.retarget(to)
}

// answerError writes a failure the relay answers itself, in the pool's own words where it has
// them.
func (s *Server) answerError(ctx context.Context, pool *Pool, out *answer, err error) {
	err = s.answerFor(ctx, err)
	if pool != nil && !out.started() {
		if own := pool.ownAnswer(err); own != nil {
			out.client.answerWith(own)
			return
		}
	}
	out.client.fail(err)
}

// noPool reports whether err says no pool serves the model.
func noPool(err error) bool {
	var re *relayError
	return errors.As(err, &re) && re.status == http.StatusNotFound
}

// errHeld means a target answered 429 or 5xx and the answer is held (the answer's kept).
var errHeld = errors.New("target answered with a failure")

// movesOn says whether a failure before the first byte sends the request to the next model
// of its chain: no pool serves the model, none of its targets is up, the queue is full or too
// slow, or a target failed (429, 5xx, a broken call).
func movesOn(err error) bool {
	var re *relayError
	switch {
	case errors.Is(err, errHeld):
		return true
	case !errors.As(err, &re), errors.Is(err, errShuttingDown):
		return false
	}
	switch re.status {
	case http.StatusNotFound, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable:
		return true
	}
	return false
}

// fallbackReason names, for the metric, why a request moved on (a bounded set).
func fallbackReason(err error) string {
	switch {
	case errors.Is(err, errHeld):
		return "target_failed"
	case errors.Is(err, errQueueFull):
		return "queue_full"
	case errors.Is(err, errTooSlow):
		return "too_slow"
	}
	var re *relayError
	if errors.As(err, &re) && re.status == http.StatusNotFound {
		return "no_pool"
	}
	if errors.As(err, &re) && re.status == http.StatusBadGateway {
		return "target_failed"
	}
	return "down"
}

// run takes req through one pool until it is answered: acquire a target, serve, and on loss
// of the target before the first byte, requeue at the front (at most maxRequeues times); a
// 429 or 5xx (held, not written) or a broken call gets one more try on another target that is
// free at once. It returns nil once the client was answered, else the failure, unwritten.
// Every target handed over from the queue observes the wait in the queue-wait histogram.
func (s *Server) run(ctx context.Context, req *Request, pool *Pool, out *answer, x *exchange) error {
	if pool == nil {
		return errNoProvider(req.Model)
	}
	x.pool = pool.name
	var queueDeadline time.Time
	if s.opts.QueueTimeout > 0 {
		queueDeadline = req.arrival.Add(s.opts.QueueTimeout)
	}
	var retry *member // the target a retry goes to, chosen already
	retried := false
	for {
		m := retry
		if m == nil {
			var err error
			var waited time.Duration
			m, waited, err = pool.acquire(ctx, req, req.requeues > 0, queueDeadline)
			if err != nil {
				if errors.Is(err, errNoReplica) && req.requeues > 0 {
					err = errAllRefused // every replica we tried refused, and none is left
				}
				return err
			}
			s.metrics.queued(pool.name, waited)
			x.queued += waited
		}
		retry = nil
		if req.waiting != nil {
			req.waiting.release()
			req.waiting = nil
		}
		pool.placed(req, m)
		out.where.target, out.where.queued = m.name, time.Since(req.arrival)
		// A failure held from an earlier attempt stays kept, unless this one holds its own.
		err := s.serveOn(ctx, req, pool, m, out)
		if err == nil {
			return nil
		}
		if errors.Is(err, errTargetLost) && !out.started() {
			req.requeues++
			if req.requeues > maxRequeues {
				return errRequeueLimit
			}
			s.logRequeue(req, m)
			continue
		}
		if !out.started() && !retried && req.stream == nil && movesOn(err) {
			retried = true
			if retry = pool.another(req, m); retry != nil {
				s.logRetry(req, m, retry, err)
				continue
			}
		}
		s.logFailure(req, pool, m, err)
		return err
	}
}

// The log lines of run's rarer turns are functions of their own (never inlined), so that their
// arguments take no room in run's frame, which every held stream keeps on its stack.

//go:noinline
func (s *Server) logRequeue(req *Request, m *member) {
	s.log.Debug("target lost before first byte; requeueing", "request_id", req.ID, "target", m.id, "requeues", req.requeues)
}

//go:noinline
func (s *Server) logRetry(req *Request, m, next *member, err error) {
	s.log.Debug("target failed; one more try on another", "request_id", req.ID, "target", m.id, "next", next.id, "reason", err)
}

// logFailure logs a request that failed on a target, unless the client caused or ended it.
//
//go:noinline
func (s *Server) logFailure(req *Request, pool *Pool, m *member, err error) {
	var re *relayError
	clientFault := errors.As(err, &re) && re.status < 500
	if !errors.Is(err, context.Canceled) && !errors.Is(err, errClientGone) && !errors.Is(err, errHeld) && !clientFault &&
		!errors.Is(err, errBodyBudget) {
		s.log.Warn("request failed", "request_id", req.ID, "pool", pool.name, "target", m.id, "err", err)
	}
}

// serveOn runs one attempt on m, holding its slot until the target is done with it.
func (s *Server) serveOn(ctx context.Context, req *Request, pool *Pool, m *member, out *answer) error {
	return s.attempt(ctx, req, m, out, &slot{pool: pool, m: m, start: time.Now()})
}

// slot is an attempt's hold on one target's capacity, given back once with the outcome that
// counts (the target may be done with it after the attempt returned).
type slot struct {
	pool  *Pool
	m     *member
	start time.Time
	done  atomic.Bool
}

func (sl *slot) release(o outcome) {
	if sl.done.CompareAndSwap(false, true) {
		sl.pool.release(sl.m, o, time.Since(sl.start))
	}
}

// attempt serves req on m, in the client's family or translated for the target's. A probe
// the target refuses as the wrong family is replayed translated on the same target, holding the
// same slot: that is no failure and no requeue. A Responses call refused as chat too is
// replayed once more as Anthropic Messages.
func (s *Server) attempt(ctx context.Context, req *Request, m *member, out *answer, held releaser) error {
	now := time.Now()
	p := m.speech.plan(req.Dialect, req.endpoint.Route, now)
	via := m.speech.via(req.Dialect, now)
	conv, err := s.prepare(req, p == planTranslate, via)
	if err != nil {
		held.release(outcomeNone)
		return err
	}
	// A body streamed to the target cannot be sent again: its failure is the answer.
	keep := req.stream == nil
	if p != planProbe {
		sink := out.compose(attemptPlan{conv: conv, keepFailures: keep})
		return out.settle(sink, conv, m.target.serve(ctx, req, call{out: sink, slot: held}))
	}
	return s.probe(ctx, req, m, out, held, via)
}

// probe is attempt for a target whose API family is not known yet: the call goes in the
// client's family, and a refusal of the family is replayed translated. (A function of its own:
// its frame is not on the stack of every call a known target serves.)
func (s *Server) probe(ctx context.Context, req *Request, m *member, out *answer, held releaser, via Dialect) error {
	keep := req.stream == nil
	var conv *conversion
	var err error
	hold := &probeHold{slot: held}
	hold.holds.Store(1)
	drop := hold.release
	serve := func(sink Sink, probing bool) error {
		hold.holds.Add(1)
		return m.target.serve(ctx, req, call{out: sink, probing: probing, slot: hold})
	}
	first := attemptPlan{probing: true, keepFailures: keep}
	if req.endpoint.Route != endpoint.RouteCountTokens {
		first.learn = m.speech
	}
	sink := out.compose(first)
	err = serve(sink, true)
	refusal := out.hold.refusal()
	if err != nil || refusal == nil {
		drop(outcomeNone)
		return out.settle(sink, nil, err)
	}
	if req.endpoint.Route != endpoint.RouteCountTokens {
		m.speech.heardRefuses(req.Dialect, time.Now())
	}
	for {
		s.log.Debug("target refused the API family; replaying translated", "request_id", req.ID,
			"target", m.id, "route", req.nativePath(), "status", refusal.status, "as", via.String())
		if conv, err = s.prepare(req, true, via); err != nil {
			drop(outcomeNone)
			return err
		}
		sink = out.compose(attemptPlan{conv: conv, keepFailures: keep})
		err = serve(sink, false)
		if err != nil || req.endpoint.Route == endpoint.RouteCountTokens || !conv.refused() {
			drop(outcomeNone)
			return out.settle(sink, conv, err)
		}
		if req.Dialect == Responses && via == OpenAI {
			// Chat refused too: the target may speak Messages alone.
			m.speech.heardRefuses(OpenAI, time.Now())
			via = Anthropic
			continue
		}
		// Refused in every family: the refusal was about the request (an unknown model, say),
		// not the family. The client gets the target's own first answer.
		m.speech.forget(req.Dialect)
		if req.Dialect == Responses {
			m.speech.forget(OpenAI)
		}
		drop(outcomeNone)
		return out.replay(refusal)
	}
}

// probeHold is a probe's slot, held by each call to the target and by the probe, which passes
// it from call to call; it is given back with the last outcome that said something.
type probeHold struct {
	holds atomic.Int32
	said  atomic.Uint32
	slot  releaser
}

func (h *probeHold) release(o outcome) {
	if o != outcomeNone {
		h.said.Store(uint32(o))
	}
	if h.holds.Add(-1) == 0 {
		h.slot.release(outcome(h.said.Load()))
	}
}

// prepare dresses req for one attempt and returns the conversion of its answer when
// translated into family via.
func (s *Server) prepare(req *Request, translated bool, via Dialect) (*conversion, error) {
	if err := s.dress(req, translated, via); err != nil {
		return nil, err
	}
	if translated {
		return newConversion(req, s.log), nil
	}
	return nil, nil
}

// answerFor turns a context error into the reason the context ended.
func (s *Server) answerFor(ctx context.Context, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if cause := causeOf(ctx); cause != nil {
			return cause
		}
	}
	return err
}

// WriteModels answers an OpenAI model list.
func WriteModels(w http.ResponseWriter, models []string) {
	WriteJSON(w, http.StatusOK, protocol.NewModelList(models))
}

// Models returns the models the named pools serve, in registration order, de-duplicated.
func (s *Server) Models(pools ...string) []string {
	var models []string
	seen := make(map[string]bool)
	for _, name := range pools {
		p := s.pool(name)
		if p == nil {
			continue
		}
		p.mu.Lock()
		for _, m := range p.members {
			for _, id := range m.models {
				if !seen[id] {
					seen[id] = true
					models = append(models, id)
				}
			}
		}
		p.mu.Unlock()
	}
	return models
}

// WriteJSON answers v as JSON with its length: how the relay's own routes, and the operator's
// mounted beside them, answer.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// statusWriter remembers the status an answer was written with.
type statusWriter struct {
	http.ResponseWriter
	status int
	reason string // the message of the error the relay wrote, if it wrote one
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// noteReason tells a statusWriter why the relay refused the request, for the access log.
func noteReason(w http.ResponseWriter, message string) {
	if sw, ok := w.(*statusWriter); ok {
		sw.reason = message
	}
}

// reasonOf is the message of a refusal the relay answered, "" for anything else.
func reasonOf(err error) string {
	if re, ok := errors.AsType[*relayError](err); ok {
		return re.message
	}
	return ""
}
