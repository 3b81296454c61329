// Package admin is the operator's surface of the relay: the admin API under /admin (relay
// workers, stats, drain, refresh, circuits, the response cache, client keys and their usage)
// and the /ui status page that reads it. It reaches the relay only through Relay, which
// *relay.Server satisfies, and adds its routes to the relay's with Mount: relay never imports
// this package.
//
// /health, /livez, /readyz, /status and /metrics stay in package relay: they are the
// process's, not the operator's. Probes and scrapers call them without a token, what they
// report (readiness, the drain, the pools) is the core's own state, and a relay served
// without this package must still answer them.
package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"modelrelay/relay"
	"modelrelay/relay/keys"
	"modelrelay/relay/ui"
)

// Relay is what the operator's surface uses of the relay; *relay.Server is one.
type Relay interface {
	Mount(pattern string, h http.Handler)
	Options() relay.Options // the admin token, the drain timeout, the cache store, the logger
	RefuseCrossOrigin(w http.ResponseWriter, r *http.Request) bool
	RefuseGuess(w http.ResponseWriter, r *http.Request, kind string) bool
	Workers() []relay.WorkerView
	Worker(id string) (relay.WorkerControl, bool)
	Status() relay.Status
	Keys() *keys.Auth
	Ledger() *keys.Ledger
}

// Surface is the operator's routes on one relay.
type Surface struct {
	relay    Relay
	opts     relay.Options
	circuits atomic.Pointer[func() any]
}

// Mount adds the operator's routes to r's and returns them. Every /admin route asks for the
// bearer admin_token: 403 when none is configured or the one sent is wrong (429 when wrong
// ones come from the address faster than the guess throttle answers them), and 403 for a
// non-safe method from a browser on another origin. The /ui page needs no token to load: it
// holds no state and asks /admin for everything, with the token the operator types into it.
func Mount(r Relay) *Surface {
	s := &Surface{relay: r, opts: r.Options()}
	r.Mount("GET /admin/workers", s.admin(s.handleWorkers))
	r.Mount("GET /admin/stats", s.admin(s.handleStats))
	r.Mount("POST /admin/workers/{id}/drain", s.admin(s.handleDrain))
	r.Mount("POST /admin/workers/{id}/refresh", s.admin(s.handleRefresh))
	r.Mount("GET /admin/circuits", s.admin(s.handleCircuits))
	r.Mount("DELETE /admin/cache", s.admin(s.handleClearCache))
	s.keyRoutes()
	page := ui.Handler()
	r.Mount("GET /ui", page)
	r.Mount("GET /ui/", page)
	return s
}

// SetCircuitLister provides /admin/circuits (AppProxy mode); without one the list is empty.
func (s *Surface) SetCircuitLister(list func() any) { s.circuits.Store(&list) }

// The admin API's refusals, 403 as in the Rust server; the message tells an operator which of
// the two settings to look at.
const (
	adminDisabled    = "admin API is disabled: no admin_token is configured"
	adminTokenNeeded = "admin token required: send Authorization: Bearer <admin_token>"
	adminTokenWrong  = "wrong admin token"
)

func (s *Surface) admin(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.relay.RefuseCrossOrigin(w, r) {
			return
		}
		if refusal := s.refusal(r); refusal != "" {
			// A wrong token is a guess: its answer waits its turn (a correct one never does).
			if refusal == adminTokenWrong && s.relay.RefuseGuess(w, r, "admin") {
				return
			}
			fail(w, http.StatusForbidden, refusal)
			return
		}
		next(w, r)
	})
}

// refusal says why r may not use the admin API, or "" when it may.
func (s *Surface) refusal(r *http.Request) string {
	if s.opts.AdminToken == "" {
		return adminDisabled
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return adminTokenNeeded
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.opts.AdminToken)) != 1 {
		return adminTokenWrong
	}
	return ""
}

// fail answers {"error": message}, the shape of every admin refusal.
func fail(w http.ResponseWriter, status int, message string) {
	relay.WriteJSON(w, status, map[string]string{"error": message})
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

func (s *Surface) handleWorkers(w http.ResponseWriter, _ *http.Request) {
	views := s.relay.Workers()
	workers := make([]adminWorker, 0, len(views))
	for _, m := range views {
		workers = append(workers, adminWorker{WorkerID: m.ID, Provider: m.Provider, WorkerName: m.Name,
			Models: m.Models, MaxConcurrent: m.MaxConcurrent, ReportedLoad: m.ReportedLoad,
			InFlightCount: m.InFlight, IsDraining: m.Draining, Suspect: m.Suspect})
	}
	relay.WriteJSON(w, http.StatusOK, map[string]any{"workers": workers})
}

// handleStats answers the counts over every pool, the pools themselves and the objects added
// with SetHealthExtra, all from one snapshot.
func (s *Surface) handleStats(w http.ResponseWriter, _ *http.Request) {
	st := s.relay.Status()
	depth := map[string]int{}
	workers, upstreams, inFlight := 0, 0, 0
	for name, p := range st.Pools {
		depth[name] = p.Queued
		for _, t := range p.Targets {
			inFlight += t.InFlight
			if t.Kind == "worker" {
				workers++
			} else {
				upstreams++
			}
		}
	}
	body := map[string]any{
		"queue_depth":    depth,
		"active_workers": workers,
		"upstreams":      upstreams,
		"in_flight":      inFlight,
		"draining":       st.Draining,
		"uptime_secs":    st.Uptime.Seconds(),
		"pools":          st.Pools,
	}
	maps.Copy(body, st.Extras)
	relay.WriteJSON(w, http.StatusOK, body)
}

// worker returns the relay worker the path names, or answers 404 itself.
func (s *Surface) worker(w http.ResponseWriter, r *http.Request) (relay.WorkerControl, bool) {
	c, ok := s.relay.Worker(r.PathValue("id"))
	if !ok {
		fail(w, http.StatusNotFound, "unknown worker "+r.PathValue("id"))
	}
	return c, ok
}

// handleDrain drains a relay worker within the body's timeout_secs, or drain_timeout.
func (s *Surface) handleDrain(w http.ResponseWriter, r *http.Request) {
	c, ok := s.worker(w, r)
	if !ok {
		return
	}
	timeout := s.opts.DrainTimeout
	var body struct {
		TimeoutSecs *float64 `json:"timeout_secs"`
	}
	if raw, _ := io.ReadAll(io.LimitReader(r.Body, 4096)); len(strings.TrimSpace(string(raw))) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil || (body.TimeoutSecs != nil && *body.TimeoutSecs < 0) {
			fail(w, http.StatusBadRequest, "body must be {\"timeout_secs\": <non-negative number>}")
			return
		}
	}
	if body.TimeoutSecs != nil {
		timeout = time.Duration(*body.TimeoutSecs * float64(time.Second))
	}
	c.Drain(timeout, "admin drain")
	relay.WriteJSON(w, http.StatusAccepted, map[string]string{"status": "draining", "worker_id": r.PathValue("id")})
}

func (s *Surface) handleRefresh(w http.ResponseWriter, r *http.Request) {
	c, ok := s.worker(w, r)
	if !ok {
		return
	}
	c.RefreshModels("admin")
	relay.WriteJSON(w, http.StatusAccepted, map[string]string{"status": "refresh requested", "worker_id": r.PathValue("id")})
}

func (s *Surface) handleCircuits(w http.ResponseWriter, _ *http.Request) {
	list := s.circuits.Load()
	if list == nil {
		relay.WriteJSON(w, http.StatusOK, map[string]any{"circuits": []any{}})
		return
	}
	relay.WriteJSON(w, http.StatusOK, map[string]any{"circuits": (*list)()})
}

// handleClearCache empties the response cache: 204, or 404 while the cache is off.
func (s *Surface) handleClearCache(w http.ResponseWriter, r *http.Request) {
	store := s.opts.Cache.Store
	if store == nil {
		fail(w, http.StatusNotFound, "the response cache is off (cache.enabled)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if err := store.Clear(ctx); err != nil {
		s.opts.Logger.Error("response cache not cleared", "err", err)
		fail(w, http.StatusServiceUnavailable, "clear the response cache: "+err.Error())
		return
	}
	s.opts.Logger.Info("response cache cleared")
	w.WriteHeader(http.StatusNoContent)
}
