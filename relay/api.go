package relay

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"modelrelay/protocol"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// inference serves one OpenAI or Anthropic route on the relay's default pool.
func (s *Server) inference(d Dialect) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeInference(w, r, d, s.opts.Provider)
	})
}

// ServeInference answers an inference call from one of the named pools: the one with a free
// target for the body's model, else the first (rotating, so load spreads). AppProxy mode passes
// a circuit's pool, where the body's model is only a label.
func (s *Server) ServeInference(w http.ResponseWriter, r *http.Request, d Dialect, pools ...string) {
	s.ServeInferenceFor(w, r, d, func(string) ([]string, http.Handler) { return pools, nil })
}

// ServeInferenceFor is ServeInference for routes that pick pools by the body's model: choose
// names the candidate pools for model, or answers the request itself with deny.
func (s *Server) ServeInferenceFor(w http.ResponseWriter, r *http.Request, d Dialect, choose func(model string) (pools []string, deny http.Handler)) {
	arrival := time.Now()
	route := r.URL.Path
	if s.draining.Load() {
		writeError(w, d, errShuttingDown)
		s.metrics.observe(route, errShuttingDown.status, arrival, 0)
		return
	}
	br := s.bodyReader(w, r)
	defer br.release()
	body, err := br.read()
	if err != nil {
		s.metrics.observe(route, s.refuseBody(w, r, d, err), arrival, 0)
		return
	}
	f, err := parseInference(body)
	if err != nil {
		s.metrics.observe(route, s.refuseBody(w, r, d, err), arrival, 0)
		return
	}
	pools, deny := choose(f.Model)
	if deny != nil {
		rec := statusRecorder{ResponseWriter: w}
		deny.ServeHTTP(&rec, r)
		s.metrics.observe(route, rec.status, arrival, 0)
		return
	}
	req := s.newRequest(r, d, arrival)
	req.Model, req.Streaming, req.Body = f.Model, f.Stream, body
	req.route = routeOf(r.URL.Path)
	req.dispatched = br.release
	out := newResponder(w, d, s.opts.MaxStreamBytes, arrival)
	s.run(r.Context(), req, s.choosePool(pools, f.Model), out)
	s.metrics.observe(route, out.status, arrival, out.ttfb)
	s.logRequest(r, req, out)
}

func (s *Server) bodyReader(w http.ResponseWriter, r *http.Request) *bodyReader {
	return &bodyReader{r: r, rc: http.NewResponseController(w), limits: &s.opts.BodyLimits,
		budget: s.bodyBudget, max: s.opts.MaxBodyBytes}
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
		return
	}
	req := s.newRequest(r, OpenAI, arrival)
	req.Streaming = true // unknown content: relay each read as it comes
	req.stream = &streamedBody{r: r.Body, rc: http.NewResponseController(w), rate: s.opts.BodyLimits.MinRate, start: arrival}
	req.streamLength = r.ContentLength
	out := newResponder(w, OpenAI, 0, arrival)
	s.run(r.Context(), req, s.pool(pool), out)
}

func (s *Server) newRequest(r *http.Request, d Dialect, arrival time.Time) *Request {
	header := filterHeader(r.Header)
	forwardHeaders(header, r, s.opts.TrustedProxies)
	return &Request{
		ID:      "req-" + strconv.FormatUint(s.reqSeq.Add(1), 10),
		Path:    r.URL.RequestURI(),
		Header:  header,
		Dialect: d,
		Method:  r.Method,
		Host:    r.Host,
		arrival: arrival,
		handoff: make(chan handoff, 1),
	}
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

// run takes req through its pool until it is answered: acquire a target, serve, and on loss of
// the target before the first byte, requeue at the front (at most maxRequeues times).
func (s *Server) run(clientCtx context.Context, req *Request, pool *Pool, out *responder) {
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	if pool == nil {
		out.fail(errNoProvider(req.Model))
		return
	}
	ctx, cancel := context.WithCancelCause(clientCtx)
	defer cancel(nil)
	stopOnShutdown := context.AfterFunc(s.hardStop, func() { cancel(errShuttingDown) })
	defer stopOnShutdown()
	if s.opts.RequestTimeout > 0 {
		t := time.AfterFunc(time.Until(req.arrival.Add(s.opts.RequestTimeout)), func() {
			if out.expire() {
				cancel(errRequestTimeout)
			}
		})
		defer t.Stop()
	}
	var queueDeadline time.Time
	if s.opts.QueueTimeout > 0 {
		queueDeadline = req.arrival.Add(s.opts.QueueTimeout)
	}
	for {
		m, err := pool.acquire(ctx, req, req.requeues > 0, queueDeadline)
		if err != nil {
			if errors.Is(err, errNoReplica) && req.requeues > 0 {
				err = errAllRefused // every replica we tried refused, and none is left
			}
			pool.fail(out, s.answerFor(ctx, err))
			return
		}
		if req.dispatched != nil {
			req.dispatched()
			req.dispatched = nil
		}
		var once sync.Once
		release := func() { once.Do(func() { pool.release(m) }) }
		err = s.attempt(ctx, req, m, out, release)
		if err == nil {
			if err = out.finish(); err == nil {
				return
			}
		}
		if errors.Is(err, errTargetLost) && !out.started {
			req.requeues++
			if req.requeues > maxRequeues {
				pool.fail(out, errRequeueLimit)
				return
			}
			s.log.Debug("target lost before first byte; requeueing", "request_id", req.ID, "target", m.id, "requeues", req.requeues)
			continue
		}
		var re *relayError
		clientFault := errors.As(err, &re) && re.status < 500
		if !errors.Is(err, context.Canceled) && !errors.Is(err, errClientGone) && !clientFault {
			s.log.Warn("request failed", "request_id", req.ID, "pool", pool.name, "target", m.id, "err", err)
		}
		pool.fail(out, s.answerFor(ctx, err))
		return
	}
}

// attempt serves req on m, in the client's family or translated for the target's. A probe
// the target refuses as the wrong family is replayed translated on the same target, holding the
// same slot: that is no failure and no requeue.
func (s *Server) attempt(ctx context.Context, req *Request, m *member, out *responder, release func()) error {
	p := m.speech.plan(req.Dialect, req.route, time.Now())
	if err := s.prepare(req, out, p == planTranslate); err != nil {
		release()
		return err
	}
	if p != planProbe {
		return m.target.serve(ctx, req, out, release)
	}
	// Two holds on the slot: the probe's, and ours that passes to the replay.
	var holds atomic.Int32
	holds.Store(2)
	drop := func() {
		if holds.Add(-1) == 0 {
			release()
		}
	}
	out.probing = true
	if req.route != routeCountTokens {
		out.learn = m.speech
	}
	err := m.target.serve(ctx, req, out, drop)
	refusal := out.refusal
	out.probing, out.learn, out.refusal = false, nil, nil
	if refusal == nil {
		drop()
		return err
	}
	if req.route != routeCountTokens {
		m.speech.heardRefuses(req.Dialect, time.Now())
	}
	s.log.Debug("target refused the route's API family; replaying translated", "request_id", req.ID,
		"target", m.id, "route", req.nativePath(), "status", refusal.status)
	if err := s.prepare(req, out, true); err != nil {
		drop()
		return err
	}
	err = m.target.serve(ctx, req, out, drop)
	if err == nil && req.route != routeCountTokens && out.conv.refused() {
		// Refused in both families: the refusal was about the request (an unknown model, say),
		// not the family. The client gets the target's own first answer.
		m.speech.forget(req.Dialect)
		return out.writeHeld(refusal)
	}
	return err
}

// prepare dresses req for one attempt and sets out to convert its answer when translated.
func (s *Server) prepare(req *Request, out *responder, translated bool) error {
	if err := s.dress(req, translated); err != nil {
		return err
	}
	out.conv, out.length = nil, -1
	if translated {
		out.conv = newConversion(req, s.log)
	}
	return nil
}

// answerFor turns a context error into the reason the context ended.
func (s *Server) answerFor(ctx context.Context, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
	}
	return err
}

// handleModels lists the default pool's models in registration order, without "*".
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	WriteModels(w, s.Models(s.opts.Provider))
}

// WriteModels answers an OpenAI model list.
func WriteModels(w http.ResponseWriter, models []string) {
	writeJSON(w, http.StatusOK, protocol.NewModelList(models))
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

func writeJSON(w http.ResponseWriter, status int, v any) {
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

// logRequest writes the per-request debug line; the level check keeps it free when off.
func (s *Server) logRequest(r *http.Request, req *Request, out *responder) {
	if !s.log.Enabled(r.Context(), slog.LevelDebug) {
		return
	}
	s.log.Debug("request", "request_id", req.ID, "route", r.URL.Path, "model", req.Model, "stream", req.Streaming,
		"status", out.status, "requeues", req.requeues, "ttfb_ms", out.ttfb.Milliseconds(),
		"duration_ms", time.Since(req.arrival).Milliseconds(), "bytes", out.streamed)
}
