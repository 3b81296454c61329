// Package api is the relay's HTTP surface: the routes a client, a relay worker and a monitor
// call, each path's refusals in its route's shape, mounted on the core (package relay), which
// knows pools, queues, targets and the stages of a call but mounts no route.
package api

import (
	"net/http"

	"modelrelay/relay"
	"modelrelay/relay/endpoint"
)

// Handler serves s's surface with relay.WholeAnswers: the inference routes of the endpoint
// table on s's own provider, stored Responses API answers, the model list, the worker hub,
// liveness, readiness, health and metrics, and the routes mounted on s (relay.Server.Mount).
func Handler(s *relay.Server) http.Handler {
	return relay.WholeAnswers(surface(s))
}

func surface(s *relay.Server) http.Handler {
	own := []string{s.Provider()}
	at := relay.Placement{ByModel: func(string) []string { return own }}
	rt := newRoutes()
	for _, e := range endpoint.All() {
		d := e.Dialect
		rt.handle("POST "+e.Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.ServeInferenceAt(w, r, d, at)
		}), relay.DialectErrors(d))
	}
	stored := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeStoredResponse(w, r, relay.Placement{}) // by client key
	})
	rt.handle("GET /v1/responses/{id}", stored, relay.DialectErrors(relay.Responses))
	rt.handle("DELETE /v1/responses/{id}", stored, relay.DialectErrors(relay.Responses))
	rt.handle("GET "+endpoint.ModelList, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		relay.WriteModels(w, s.Models(s.Provider()))
	}), relay.DialectErrors(relay.OpenAI))
	rt.handle("GET /v1/worker/connect", http.HandlerFunc(s.ServeWorkerConnect), relay.PlainErrors)
	rt.handle("GET /health", health(s), relay.PlainErrors)
	rt.handle("GET /livez", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		relay.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}), relay.PlainErrors)
	rt.handle("GET /readyz", ready(s), relay.PlainErrors)
	rt.handle("GET /status", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		relay.WriteJSON(w, http.StatusOK, map[string]string{"api_version": "v2"})
	}), relay.PlainErrors)
	rt.handle("GET /metrics", s.MetricsHandler(), relay.PlainErrors)
	for _, m := range s.Mounted() {
		rt.handle(m.Pattern, m.Handler, relay.PlainErrors)
	}
	return rt.serve()
}
