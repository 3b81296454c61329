package relay

import (
	"net/http"
	"time"

	"modelrelay/protocol"
	"modelrelay/relay/keys"
)

// What the operator's surface (admin routes, key admin, the status page: package relay/admin)
// uses of the server. That package imports relay and mounts itself with Mount; relay never
// imports it, so the core builds and runs without it.

// Route is a route added with Mount.
type Route struct {
	Pattern string // "METHOD /path"
	Handler http.Handler
}

// Mount adds a route ("METHOD /path") beside the relay's own; its refusals, a 405 included,
// are in the shape of the relay's own routes ({"error": "..."}). Mount before the surface is
// built (relay/api's Handler), from the goroutine that builds the server.
func (s *Server) Mount(pattern string, h http.Handler) {
	s.mounted = append(s.mounted, Route{pattern, h})
}

// Mounted returns the routes added with Mount, in order.
func (s *Server) Mounted() []Route { return s.mounted }

// Options returns the options the server runs with, defaults filled in.
func (s *Server) Options() Options { return s.opts }

// Keys is the client API keys' store with its cache of validated keys: a key changed or
// revoked through the store is forgotten here so the change applies at once.
func (s *Server) Keys() *keys.Auth { return s.keys }

// Ledger is what keys used, on its way to the key store.
func (s *Server) Ledger() *keys.Ledger { return s.ledger }

// RefuseCrossOrigin answers a non-safe browser request from an origin not in trusted_origins
// with 403 {"error": ...}, counts and logs it, and reports whether it did.
func (s *Server) RefuseCrossOrigin(w http.ResponseWriter, r *http.Request) bool {
	return s.crossOrigin(w, r, PlainErrors)
}

// RefuseGuess counts a wrong credential r presented (kind labels the metric) and holds it until
// its turn in the guess throttle (WrongCredential, for r's client address). When it got no
// turn, RefuseGuess answers 429 {"error": ...} with Retry-After and reports true; on false the
// caller answers its own verdict.
func (s *Server) RefuseGuess(w http.ResponseWriter, r *http.Request, kind string) bool {
	if s.WrongCredential(r.Context(), kind, peerIP(r, s.opts.TrustedProxies)) {
		return false
	}
	w.Header().Set("Retry-After", retryAfter(tooManyFailures))
	PlainErrors(w, tooManyFailures.status, tooManyFailures.message)
	return true
}

// WorkerControl acts on one connected relay worker.
type WorkerControl struct{ ws *workerSession }

// Worker returns the connected relay worker with this id; false when there is none.
func (s *Server) Worker(id string) (WorkerControl, bool) {
	v, ok := s.sessions.Load(id)
	if !ok {
		return WorkerControl{}, false
	}
	return WorkerControl{v.(*workerSession)}, true
}

// Drain tells the worker to finish what it holds within timeout and take nothing new; reason
// travels in its graceful_shutdown message.
func (c WorkerControl) Drain(timeout time.Duration, reason string) { c.ws.drain(timeout, reason) }

// RefreshModels asks the worker to advertise its models again (models_refresh).
func (c WorkerControl) RefreshModels(reason string) {
	c.ws.enqueueMessage(protocol.ModelsRefresh{Reason: &reason})
}
