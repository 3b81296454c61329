package relay

import (
	"fmt"
	"net/http"
)

// A web page can make its visitor's browser send a form or a text/plain POST to any address
// the browser reaches, an internal relay included; the browser sends it without asking (no
// preflight), and with keys off, or an address allow-list as the only fence, the relay would
// serve it. Browsers mark such requests (Sec-Fetch-Site, else an Origin that is not the Host),
// and net/http's CrossOriginProtection refuses the non-safe ones. The inference and admin
// routes stand behind it; GET routes (/health, /metrics, GET /v1/models, the worker WebSocket,
// the /ui page) change nothing and are left alone, as are a circuit's pass-through paths,
// which belong to its model service. Clients that are no browser (curl, the SDKs, coding
// agents) send neither header and are never refused; a browser app on another origin is
// let in by naming its origin in trusted_origins.

// newOriginGuard builds the cross-origin protection with the operator's trusted origins
// ("scheme://host[:port]", as browsers send Origin).
func newOriginGuard(trusted []string) (*http.CrossOriginProtection, error) {
	guard := http.NewCrossOriginProtection()
	for _, origin := range trusted {
		if err := guard.AddTrustedOrigin(origin); err != nil {
			return nil, fmt.Errorf("trusted origins: %w", err)
		}
	}
	return guard, nil
}

// crossOrigin answers a non-safe browser request from an untrusted origin with a 403 in the
// route's shape, counts and logs it, and reports whether it did. It calls the guard's Check
// rather than wrapping routes in its Handler: one deny handler could not know the dialect of
// the route it answers for (the same guard serves OpenAI, Anthropic and admin routes, and
// the circuit and aggregation hosts' inference).
func (s *Server) crossOrigin(w http.ResponseWriter, r *http.Request, shape ErrorShape) bool {
	if field(r.Header, "Sec-Fetch-Site") == "" && field(r.Header, "Origin") == "" {
		return false // no browser's request: not the guard's business (and its Get calls cost)
	}
	err := s.origins.Check(r)
	if err == nil {
		return false
	}
	s.metrics.crossOrigin.Inc()
	s.log.Info("cross-origin browser request refused", "route", r.URL.Path, "origin", truncateRunes(r.Header.Get("Origin"), 128),
		"sec_fetch_site", truncateRunes(r.Header.Get("Sec-Fetch-Site"), 32), "peer", peerIP(r, s.opts.TrustedProxies), "why", err)
	shape(w, http.StatusForbidden, "cross-origin request from a browser refused: this origin is not in the relay's trusted_origins")
	return true
}
