package relay

import (
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"modelrelay/protocol"
)

// adminRoutes mounts /admin/*: bearer admin_token, 403 when unset or wrong (429 when wrong
// ones come from the address faster than the guess throttle answers them), and no non-safe
// method from a browser on another origin (403).
func (s *Server) adminRoutes(rt *routes) {
	rt.handle("GET /admin/workers", s.admin(s.handleAdminWorkers), plainErrors)
	rt.handle("GET /admin/stats", s.admin(s.handleAdminStats), plainErrors)
	rt.handle("POST /admin/workers/{id}/drain", s.admin(s.handleAdminDrain), plainErrors)
	rt.handle("POST /admin/workers/{id}/refresh", s.admin(s.handleAdminRefresh), plainErrors)
	rt.handle("GET /admin/circuits", s.admin(s.handleAdminCircuits), plainErrors)
	rt.handle("DELETE /admin/cache", s.admin(s.handleClearCache), plainErrors)
	s.keyRoutes(rt)
}

// The admin API's refusals, 403 as in the Rust server; the message tells an operator which of
// the two settings to look at.
const (
	adminDisabled    = "admin API is disabled: no admin_token is configured"
	adminTokenNeeded = "admin token required: send Authorization: Bearer <admin_token>"
	adminTokenWrong  = "wrong admin token"
)

func (s *Server) admin(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.crossOrigin(w, r, plainErrors) {
			return
		}
		if status, refusal := s.adminRefusal(r); refusal != "" {
			if status == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", retryAfter(tooManyFailures))
			}
			plainErrors(w, status, refusal)
			return
		}
		next(w, r)
	})
}

// adminRefusal returns why r may not use the admin API and the status that says so, or ""
// when it may.
func (s *Server) adminRefusal(r *http.Request) (int, string) {
	if s.opts.AdminToken == "" {
		return http.StatusForbidden, adminDisabled
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return http.StatusForbidden, adminTokenNeeded
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.opts.AdminToken)) != 1 {
		// A wrong token is a guess: its answer waits its turn (a correct one never does).
		if !s.WrongCredential(r.Context(), "admin", peerIP(r, s.opts.TrustedProxies)) {
			return http.StatusTooManyRequests, tooManyFailures.message
		}
		return http.StatusForbidden, adminTokenWrong
	}
	return 0, ""
}

type adminWorker struct {
	WorkerID      string   `json:"worker_id"`
	Provider      string   `json:"provider"`
	WorkerName    string   `json:"worker_name"`
	Models        []string `json:"models"`
	MaxConcurrent int      `json:"max_concurrent"`
	ReportedLoad  int      `json:"reported_load"`
	InFlightCount int      `json:"in_flight_count"`
	IsDraining    bool     `json:"is_draining"`
	Suspect       bool     `json:"suspect"` // silent since the last ping: no new requests for now
}

func (s *Server) handleAdminWorkers(w http.ResponseWriter, _ *http.Request) {
	views, _ := s.relayWorkers()
	workers := make([]adminWorker, 0, len(views))
	for _, m := range views {
		workers = append(workers, adminWorker{WorkerID: m.ID, Provider: m.provider, WorkerName: m.Name,
			Models: m.Models, MaxConcurrent: m.MaxConcurrent, ReportedLoad: m.ReportedLoad,
			InFlightCount: m.InFlight, IsDraining: m.Draining, Suspect: m.Suspect})
	}
	writeJSON(w, http.StatusOK, map[string]any{"workers": workers})
}

func (s *Server) handleAdminStats(w http.ResponseWriter, _ *http.Request) {
	depth := map[string]int{}
	workers, upstreams, inFlight := 0, 0, 0
	s.eachPool(func(name string, p *Pool) {
		v := p.view()
		depth[name] = v.queued
		for _, m := range v.members {
			inFlight += m.InFlight
			if m.Kind == "worker" {
				workers++
			} else {
				upstreams++
			}
		}
	})
	body := map[string]any{
		"queue_depth":    depth,
		"active_workers": workers,
		"upstreams":      upstreams,
		"in_flight":      inFlight,
		"draining":       s.draining.Load(),
		"uptime_secs":    time.Since(s.started).Seconds(),
		"pools":          s.poolStatuses(),
	}
	s.addExtras(body)
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) *workerSession {
	v, ok := s.sessions.Load(r.PathValue("id"))
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown worker " + r.PathValue("id")})
		return nil
	}
	return v.(*workerSession)
}

func (s *Server) handleAdminDrain(w http.ResponseWriter, r *http.Request) {
	ws := s.session(w, r)
	if ws == nil {
		return
	}
	timeout := s.opts.DrainTimeout
	var body struct {
		TimeoutSecs *float64 `json:"timeout_secs"`
	}
	if raw, _ := io.ReadAll(io.LimitReader(r.Body, 4096)); len(strings.TrimSpace(string(raw))) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil || (body.TimeoutSecs != nil && *body.TimeoutSecs < 0) {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be {\"timeout_secs\": <non-negative number>}"})
			return
		}
	}
	if body.TimeoutSecs != nil {
		timeout = time.Duration(*body.TimeoutSecs * float64(time.Second))
	}
	ws.drain(timeout, "admin drain")
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "draining", "worker_id": ws.id})
}

func (s *Server) handleAdminRefresh(w http.ResponseWriter, r *http.Request) {
	ws := s.session(w, r)
	if ws == nil {
		return
	}
	reason := "admin"
	ws.enqueueMessage(protocol.ModelsRefresh{Reason: &reason})
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "refresh requested", "worker_id": ws.id})
}

// SetCircuitLister provides /admin/circuits (AppProxy mode).
func (s *Server) SetCircuitLister(list func() any) { s.circuitLister.Store(&list) }

func (s *Server) handleAdminCircuits(w http.ResponseWriter, _ *http.Request) {
	list := s.circuitLister.Load()
	if list == nil {
		writeJSON(w, http.StatusOK, map[string]any{"circuits": []any{}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"circuits": (*list)()})
}
