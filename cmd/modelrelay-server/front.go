package main

import (
	"net/http"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"

	"modelrelay/ingress"
	"modelrelay/reconcile"
	"modelrelay/relay"
	"modelrelay/relay/api"
	"modelrelay/relay/endpoint"
)

// front routes every request by its Host in AppProxy mode: a circuit's subdomain reaches that
// circuit's model service (after its allow-list and token), the apex and aggregation hosts
// pick circuits by the body's model, and any other host is the relay's own surface, where
// inference also routes by model across what the caller may use.
type front struct {
	relay    *relay.Server
	own      http.Handler
	router   *ingress.Router
	circuits *reconcile.Applier
	verifier ingress.Verifier
	trusted  []netip.Prefix
	// rejections counts the requests ingress refused, by ingress.Reasons (each from zero, so
	// that rate() has a series from the start).
	rejections *prometheus.CounterVec
}

// newFront builds the front of srv and registers its rejection counter on srv's registry.
func newFront(srv *relay.Server, router *ingress.Router, circuits *reconcile.Applier,
	verifier ingress.Verifier, trusted []netip.Prefix) *front {
	f := &front{relay: srv, own: api.Handler(srv), router: router, circuits: circuits,
		verifier: verifier, trusted: trusted,
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelrelay_ingress_rejections_total",
			Help: "Requests refused at ingress in AppProxy mode, by reason (unknown_subdomain, client_ip_not_allowed, missing_token, unsupported_scheme, invalid_token, expired_token, token_mismatch).",
		}, []string{"reason"})}
	for _, reason := range ingress.Reasons() {
		f.rejections.WithLabelValues(reason)
	}
	srv.Registry().MustRegister(f.rejections)
	return f
}

// inferenceCall says whether r is a call the relay parses ({model, stream}), and its family;
// everything else on a circuit host passes through untouched.
func inferenceCall(r *http.Request) (relay.Dialect, bool) {
	if r.Method != http.MethodPost {
		return 0, false
	}
	e, ok := endpoint.For(r.URL.Path)
	return e.Dialect, ok
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res := f.router.Resolve(ingress.Host(r, f.trusted))
	switch res.Kind {
	case ingress.HostCircuit:
		f.serveCircuit(w, r, res.Circuit)
	case ingress.HostAggregation:
		f.serveByModel(w, r, false)
	case ingress.HostUnknown:
		f.refuse(w, r, res.Problem())
	default:
		f.serveByModel(w, r, true)
	}
}

func (f *front) serveCircuit(w http.ResponseWriter, r *http.Request, c *ingress.Circuit) {
	ip, _ := ingress.ClientIP(r, f.trusted) // an unparseable address is denied by a restricted allow-list
	if p := f.verifier.Check(r, c, ip); p != nil {
		if p.Status == http.StatusUnauthorized && r.Header.Get("Authorization") != "" {
			// A token that does not open this circuit is a guess: its answer waits its turn.
			if !f.relay.WrongCredential(r.Context(), "circuit", ip.String()) {
				p = p.Throttled()
			}
		}
		f.refuse(w, r, p)
		return
	}
	if d, ok := inferenceCall(r); ok {
		// Pinned to the circuit; when none of its replicas can serve, the chain of its
		// canonical model takes over, among what this caller may use (after its checks above;
		// who the caller is is read only if the chain is walked). The circuit's own checks
		// are its auth: client API keys apply to the relay's and the aggregation hosts.
		f.relay.ServeInferenceAt(w, r, d, relay.Placement{Pool: c.Pool, Model: c.Model, OwnAuth: true,
			ByModel: func(model string) []string { return f.poolsFor(f.verifier.Caller(r, ip), model) }})
		return
	}
	if relay.StoredResponsePath(r) && f.relay.ServeStoredResponse(w, r, relay.Placement{Pool: c.Pool, OwnAuth: true}) {
		return // a response the relay stored for this circuit
	}
	f.relay.ServePassThrough(w, r, c.Pool)
}

// refuse answers a request ingress turned away, counting it by reason.
func (f *front) refuse(w http.ResponseWriter, r *http.Request, p *ingress.Problem) {
	if reason := p.Reason(); reason != "" {
		f.rejections.WithLabelValues(reason).Inc()
	}
	p.ServeHTTP(w, r)
}

// serveByModel answers on hosts that route by model: the circuits this caller may use (public
// ones, the one its token names, where its address is allowed), then the relay's own pool.
// On the relay's own host every other path is the relay's own surface.
func (f *front) serveByModel(w http.ResponseWriter, r *http.Request, ownHost bool) {
	d, inference := inferenceCall(r)
	listing := r.Method == http.MethodGet && r.URL.Path == endpoint.ModelList
	if !inference && !listing {
		switch {
		case ownHost:
			f.own.ServeHTTP(w, r)
		case relay.StoredResponsePath(r):
			f.relay.ServeStoredResponse(w, r, relay.Placement{}) // by client key, as on the relay's own host
		default:
			http.NotFound(w, r)
		}
		return
	}
	ip, _ := ingress.ClientIP(r, f.trusted)
	caller := f.verifier.Caller(r, ip)
	if listing {
		relay.WriteModels(w, f.router.Table().Models(caller, f.circuits.ModelPools(), f.relay.Models(f.relay.Provider())))
		return
	}
	byModel := func(model string) []string { return f.poolsFor(caller, model) }
	f.relay.ServeInferenceAt(w, r, d, relay.Placement{ByModel: byModel})
}

// poolsFor names the pools that serve model to caller: the circuits it may use, else the
// relay's own pool (ingress decides).
func (f *front) poolsFor(caller ingress.Caller, model string) []string {
	return f.router.Table().PoolsFor(caller, f.circuits.PoolsFor(model), f.relay.Provider())
}
