package relay

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// inference serves one OpenAI or Anthropic route on the relay's default pool.
func (s *Server) inference(d Dialect) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeInference(w, r, s.opts.Provider, d)
	})
}

// ServeInference answers an inference call from the named pool. AppProxy mode calls it with a
// circuit's pool; the body's model is then only a label.
func (s *Server) ServeInference(w http.ResponseWriter, r *http.Request, poolName string, d Dialect) {
	arrival := time.Now()
	route := r.URL.Path
	if s.draining.Load() {
		writeError(w, d, errShuttingDown)
		s.metrics.observe(route, errShuttingDown.status, arrival, 0)
		return
	}
	body, err := readBody(r, s.opts.MaxBodyBytes)
	if err == nil {
		var f inferenceFields
		if f, err = parseInference(body); err == nil {
			req := &Request{
				ID:        "req-" + strconv.FormatUint(s.reqSeq.Add(1), 10),
				Model:     f.Model,
				Path:      r.URL.RequestURI(),
				Streaming: f.Stream,
				Body:      body,
				Header:    filterHeader(r.Header),
				Dialect:   d,
				Method:    r.Method,
				Host:      r.Host,
				arrival:   arrival,
				handoff:   make(chan handoff, 1),
			}
			out := newResponder(w, d, s.opts.MaxStreamBytes, arrival)
			s.run(r.Context(), req, s.pool(poolName), out)
			s.metrics.observe(route, out.status, arrival, out.ttfb)
			return
		}
	}
	var re *relayError
	if errors.As(err, &re) {
		writeError(w, d, re)
		s.metrics.observe(route, re.status, arrival, 0)
	}
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
			out.fail(s.answerFor(ctx, err))
			return
		}
		var once sync.Once
		release := func() { once.Do(func() { pool.release(m) }) }
		err = m.target.serve(ctx, req, out, release)
		if err == nil {
			return
		}
		if errors.Is(err, errTargetLost) && !out.started {
			req.requeues++
			if req.requeues > maxRequeues {
				out.fail(errRequeueLimit)
				return
			}
			s.log.Debug("target lost before first byte; requeueing", "request_id", req.ID, "target", m.id, "requeues", req.requeues)
			continue
		}
		if !errors.Is(err, context.Canceled) && !errors.Is(err, errClientGone) {
			s.log.Warn("request failed", "request_id", req.ID, "pool", pool.name, "target", m.id, "err", err)
		}
		out.fail(s.answerFor(ctx, err))
		return
	}
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

type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	OwnedBy string `json:"owned_by"`
}

// handleModels lists the default pool's models in registration order, without "*".
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeModels(w, s.Models(s.opts.Provider))
}

func writeModels(w http.ResponseWriter, models []string) {
	data := make([]modelEntry, 0, len(models))
	for _, id := range models {
		data = append(data, modelEntry{ID: id, Object: "model", OwnedBy: "worker-proxy"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
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
