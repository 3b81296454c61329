package api

import (
	"maps"
	"net/http"

	"modelrelay/relay"
)

// healthWorker is a connected relay worker as /health lists it.
type healthWorker struct {
	ID            string   `json:"id"`
	Provider      string   `json:"provider"`
	Models        []string `json:"models"`
	InFlight      int      `json:"in_flight"`
	MaxConcurrent int      `json:"max_concurrent"`
	IsDraining    bool     `json:"is_draining"`
	Suspect       bool     `json:"suspect"`
}

// health answers GET /health: the version, the connected workers, the queues and the pools,
// and what other parts of the process add (relay.Server.SetHealthExtra).
func health(s *relay.Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		views := s.Workers()
		workers := make([]healthWorker, 0, len(views))
		for _, m := range views {
			workers = append(workers, healthWorker{ID: m.ID, Provider: m.Provider, Models: m.Models,
				InFlight: m.InFlight, MaxConcurrent: m.MaxConcurrent, IsDraining: m.Draining, Suspect: m.Suspect})
		}
		st := s.Status()
		queued := 0
		for _, p := range st.Pools {
			queued += p.Queued
		}
		body := map[string]any{
			"status":            "ok",
			"version":           s.Options().Version,
			"workers_connected": len(workers),
			"queue_depth":       queued,
			"uptime_secs":       st.Uptime.Seconds(),
			"workers":           workers,
			"pools":             st.Pools,
		}
		maps.Copy(body, st.Extras)
		relay.WriteJSON(w, http.StatusOK, body)
	})
}

// ready answers GET /readyz: 200 {"status": "ready"} once the process may take traffic, else
// 503 with why not ("starting", "draining").
func ready(s *relay.Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		status := s.Readiness()
		code := http.StatusOK
		if status != "ready" {
			code = http.StatusServiceUnavailable
		}
		relay.WriteJSON(w, code, map[string]string{"status": status})
	})
}
