// Package reconcile turns the coordinator's circuit set into the relay's pools and the ingress
// table: Plan is a pure function from (circuits, discovered model names) to the desired state,
// and Applier changes only what differs between that and what is live.
package reconcile

import (
	"net/http"
	"slices"

	"modelrelay/ingress"
	"modelrelay/protocol"
	"modelrelay/relay"
)

// Options shape every circuit's pool.
type Options struct {
	RouteMaxConcurrent int // per-replica concurrency before requests queue; 0 = none
	// OnServed, when set, hears of every request a replica answered (last-used markers). It
	// must not block.
	OnServed func(circuitID, sessionID string)
}

// Desired is what the relay and ingress should look like for one circuit set.
type Desired struct {
	Pools    map[string]relay.PoolSpec // by pool name
	Circuits []ingress.Circuit         // for the ingress table
	Models   map[string][]string       // model name -> pools serving it, for aggregation hosts
}

// PoolName is the relay pool that serves a circuit.
func PoolName(circuitID string) string { return "circuit:" + circuitID }

// Plan computes the desired state. Circuits that cannot be served (interactive, port mode, no
// subdomain) are left out; so are routes the coordinator marked unhealthy, routes that are
// not valid, and routes with a traffic ratio of 0 (the coordinator's way to hold traffic).
func Plan(circuits []protocol.Circuit, models map[string][]string, opts Options) Desired {
	d := Desired{Pools: make(map[string]relay.PoolSpec, len(circuits)),
		Circuits: make([]ingress.Circuit, 0, len(circuits)), Models: make(map[string][]string)}
	for _, c := range circuits {
		if !c.Serveable() {
			continue
		}
		name := PoolName(c.ID)
		ups := upstreams(c.ID, c.RouteInfo, opts)
		if speaks := variantSpeaks(c.RuntimeVariant); speaks != nil {
			for i := range ups {
				ups[i].Speaks = speaks
			}
		}
		d.Pools[name] = relay.PoolSpec{
			Upstreams:   ups,
			ClientHost:  true,
			Unavailable: answer(ingress.WorkerNotAvailable()),
			Refused:     answer(ingress.ContainerConnectionRefused()),
		}
		names := modelNames(c, models[c.ID])
		for _, model := range names {
			d.Models[model] = append(d.Models[model], name)
		}
		canonical := ""
		if len(names) > 0 {
			canonical = names[0]
		}
		d.Circuits = append(d.Circuits, ingress.Circuit{
			ID:           c.ID,
			Subdomain:    c.Host(),
			OpenToPublic: c.OpenToPublic,
			AllowList:    ingress.ParseAllowList(c.AllowedClientIPs),
			Pool:         name,
			Model:        canonical,
		})
	}
	return d
}

func upstreams(circuitID string, routes []protocol.Route, opts Options) []relay.UpstreamSpec {
	out := make([]relay.UpstreamSpec, 0, len(routes))
	for _, r := range routes {
		if r.Unhealthy() || r.Valid() != nil || r.TrafficRatio <= 0 {
			continue
		}
		spec := relay.UpstreamSpec{
			ID:            routeKey(r),
			URL:           "http://" + r.Addr(),
			Weight:        r.TrafficRatio,
			MaxConcurrent: opts.RouteMaxConcurrent,
		}
		if opts.OnServed != nil {
			session := r.SessionID
			spec.OnServed = func() { opts.OnServed(circuitID, session) }
		}
		out = append(out, spec)
	}
	return out
}

// variantSpeaks is what a circuit's runtime variant tells about its replicas' API: these
// Backend.AI variants all serve OpenAI chat, so a 404 on /v1/chat/completions from them is the
// model server's own answer (an unknown model), never "wrong family". Anthropic stays to be
// learned: recent vLLM and SGLang serve /v1/messages too. cmd and custom say nothing.
func variantSpeaks(variant *string) []relay.Dialect {
	if variant == nil {
		return nil
	}
	switch *variant {
	case "vllm", "sglang", "nim", "huggingface-tgi", "modular-max", "llamacpp", "ollama":
		return []relay.Dialect{relay.OpenAI}
	}
	return nil
}

// routeKey identifies a replica. A new route_id at the same address is a kernel swap, so it
// must be a new upstream with fresh health and connections.
func routeKey(r protocol.Route) string {
	if r.RouteID != nil && *r.RouteID != "" {
		return *r.RouteID + "/" + r.SessionID + "@" + r.Addr()
	}
	return r.SessionID + "@" + r.Addr()
}

// modelNames are what aggregation hosts route by: the replicas' model ids, then the circuit's
// app name when it has one.
func modelNames(c protocol.Circuit, discovered []string) []string {
	names := slices.Clone(discovered)
	if c.App != "" && !slices.Contains(names, c.App) {
		names = append(names, c.App)
	}
	return names
}

// sameSpec reports whether applying b over a would change nothing. The problem handlers are
// the same answers every time, so they do not count.
func sameSpec(a, b relay.PoolSpec) bool {
	return a.ClientHost == b.ClientHost && slices.EqualFunc(a.Upstreams, b.Upstreams,
		func(x, y relay.UpstreamSpec) bool {
			return x.ID == y.ID && x.URL == y.URL && x.Weight == y.Weight && x.MaxConcurrent == y.MaxConcurrent &&
				slices.Equal(x.Models, y.Models)
		})
}

// answer writes a Backend.AI problem as a pool's own error response.
func answer(p *ingress.Problem) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) { p.ServeHTTP(w, nil) } // Problem reads nothing of the request
}
