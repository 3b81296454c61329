package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"modelrelay/ingress"
	"modelrelay/protocol"
	"modelrelay/relay"
)

// Applier keeps the relay's circuit pools and the ingress table equal to the last circuit set
// it was given, and discovers each circuit's model names in the background.
type Applier struct {
	relay  *relay.Server
	router *ingress.Router
	hosts  ingress.Config
	opts   Options
	log    *slog.Logger

	index atomic.Pointer[map[string][]string] // model -> pools; read by the request path

	mu       sync.Mutex // serializes applies; never held by the request path
	circuits []protocol.Circuit
	applied  map[string]relay.PoolSpec
	models   map[string][]string // discovered, by circuit id
	kick     chan struct{}
}

// NewApplier applies to srv's pools and router's table.
func NewApplier(srv *relay.Server, router *ingress.Router, hosts ingress.Config, opts Options, log *slog.Logger) *Applier {
	return &Applier{relay: srv, router: router, hosts: hosts, opts: opts, log: log,
		applied: make(map[string]relay.PoolSpec), models: make(map[string][]string), kick: make(chan struct{}, 1)}
}

// Apply makes the live state match circuits. It returns once the circuits are routable: their
// pools exist with their routes and the ingress table knows them. Applying the same set twice
// changes nothing and drops no request.
func (a *Applier) Apply(_ context.Context, circuits []protocol.Circuit) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.circuits = circuits
	for id := range a.models {
		if !containsCircuit(circuits, id) {
			delete(a.models, id)
		}
	}
	err := a.applyLocked()
	select {
	case a.kick <- struct{}{}:
	default:
	}
	return err
}

func containsCircuit(circuits []protocol.Circuit, id string) bool {
	for _, c := range circuits {
		if c.ID == id {
			return true
		}
	}
	return false
}

func (a *Applier) applyLocked() error {
	d := Plan(a.circuits, a.models, a.opts)
	var firstErr error
	for name, spec := range d.Pools {
		if old, ok := a.applied[name]; ok && sameSpec(old, spec) {
			continue
		}
		if err := a.relay.SetUpstreamPool(name, spec); err != nil {
			a.log.Warn("circuit pool not applied", "pool", name, "err", err)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		a.applied[name] = spec
	}
	for name := range a.applied {
		if _, keep := d.Pools[name]; !keep {
			a.relay.RemovePool(name)
			delete(a.applied, name)
		}
	}
	a.router.Swap(ingress.NewTable(a.hosts, d.Circuits))
	a.index.Store(&d.Models)
	return firstErr
}

// Run discovers model names for circuits that have replicas but no names yet, retrying every
// interval until each answers, and re-applies when names arrive.
func (a *Applier) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		a.discover(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.kick:
		}
	}
}

type discoveryTarget struct {
	circuitID string
	url       string
}

func (a *Applier) discover(ctx context.Context) {
	a.mu.Lock()
	var todo []discoveryTarget
	for _, c := range a.circuits {
		if _, known := a.models[c.ID]; known || !c.Serveable() {
			continue
		}
		if ups := upstreams(c.ID, c.RouteInfo, a.opts); len(ups) > 0 {
			todo = append(todo, discoveryTarget{c.ID, ups[0].URL})
		}
	}
	a.mu.Unlock()
	found := make(map[string][]string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, d := range todo {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			names, err := a.relay.DiscoverModels(ctx, d.url)
			if err != nil {
				a.log.Debug("model discovery failed; will retry", "circuit", d.circuitID, "err", err)
				return
			}
			mu.Lock()
			found[d.circuitID] = names
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(found) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, names := range found {
		if containsCircuit(a.circuits, id) {
			a.models[id] = names
			a.log.Info("circuit models discovered", "circuit", id, "models", names)
		}
	}
	a.applyLocked()
}

// PoolsFor returns the circuit pools whose replicas serve model (lock-free).
func (a *Applier) PoolsFor(model string) []string {
	if idx := a.index.Load(); idx != nil {
		return (*idx)[model]
	}
	return nil
}

// ModelPools returns the whole model -> pools index (do not modify it).
func (a *Applier) ModelPools() map[string][]string {
	if idx := a.index.Load(); idx != nil {
		return *idx
	}
	return nil
}

// CircuitView is one circuit as /admin/circuits shows it.
type CircuitView struct {
	ID        string             `json:"id"`
	Subdomain string             `json:"subdomain"`
	Models    []string           `json:"models"`
	Public    bool               `json:"open_to_public"`
	Routes    []relay.MemberView `json:"routes"`
}

// Circuits lists the applied circuits with their models and replica health.
func (a *Applier) Circuits() []CircuitView {
	a.mu.Lock()
	circuits := a.circuits
	a.mu.Unlock()
	views := []CircuitView{}
	for _, c := range circuits {
		if !c.Serveable() {
			continue
		}
		name := PoolName(c.ID)
		a.mu.Lock()
		models := modelNames(c, a.models[c.ID])
		a.mu.Unlock()
		views = append(views, CircuitView{ID: c.ID, Subdomain: c.Host(), Models: models,
			Public: c.OpenToPublic, Routes: a.relay.PoolMembers(name)})
	}
	return views
}

// HealthyReplicas counts the replicas of every applied circuit that take traffic.
func (a *Applier) HealthyReplicas() int {
	a.mu.Lock()
	names := make([]string, 0, len(a.applied))
	for name := range a.applied {
		names = append(names, name)
	}
	a.mu.Unlock()
	n := 0
	for _, name := range names {
		for _, m := range a.relay.PoolMembers(name) {
			if m.Healthy {
				n++
			}
		}
	}
	return n
}
