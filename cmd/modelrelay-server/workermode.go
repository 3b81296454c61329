package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"modelrelay/appproxy"
	"modelrelay/ingress"
	"modelrelay/protocol"
	"modelrelay/reconcile"
	"modelrelay/relay"
	"modelrelay/relay/admin"
)

// workerMode is the Backend.AI AppProxy side of the process: the coordinator conversation
// (appproxy), circuits turned into pools and routes (reconcile), and the host-routing front.
type workerMode struct {
	worker  *appproxy.Worker
	applier *reconcile.Applier
	markers *appproxy.Markers
	front   *front
	clients []*redis.Client
}

// newWorkerMode builds the AppProxy side of srv; ops lists its circuits in /admin/circuits.
func newWorkerMode(cfg Config, log *slog.Logger, srv *relay.Server, ops *admin.Surface) (*workerMode, error) {
	ap := cfg.AppProxy
	log = log.With("mode", "appproxy")
	// go-redis reports each failed dial itself; the subscriber already says what matters.
	redis.SetLogger(redisLog{log})
	coord, err := appproxy.NewCoordinator(ap.CoordinatorURL, ap.APISecret, nil)
	if err != nil {
		return nil, fmt.Errorf("appproxy.coordinator_url: %w", err)
	}
	apiPort := ap.APIPort
	if apiPort == 0 {
		if _, port, err := net.SplitHostPort(cfg.Listen); err == nil {
			apiPort, _ = strconv.Atoi(port)
		}
	}
	m := &workerMode{}
	var events *redis.Client
	if ap.RedisURL != "" && (ap.EventsEnabled || ap.LiveMarkers) {
		var live *redis.Client
		if events, live, err = appproxy.RedisClients(ap.RedisURL); err != nil {
			return nil, fmt.Errorf("appproxy.%w", err)
		}
		m.clients = append(m.clients, events, live)
		if ap.LiveMarkers {
			m.markers = appproxy.NewMarkers(live, 0, log)
		}
		if !ap.EventsEnabled {
			events = nil
		}
	}
	hosts := ingress.Config{WildcardDomain: ap.WildcardDomain, AggregationHosts: ap.AggregationHosts}
	// Before the first pull the table is empty but knows the domain: wildcard hosts answer
	// "unknown subdomain" rather than reaching the relay's own surface.
	router := ingress.NewRouter(ingress.NewTable(hosts, nil))
	m.applier = reconcile.NewApplier(srv, router, hosts,
		reconcile.Options{RouteMaxConcurrent: ap.RouteMaxConcurrent, OnServed: m.markUsed}, log)

	reg := protocol.NewInferenceRegistration(ap.Authority, ap.Hostname, apiPort, ap.TLSListen,
		ap.TLSAdvertised, ap.WildcardDomain, ap.WildcardTrafficPort)
	reg.NodeID = ap.NodeID
	m.worker, err = appproxy.NewWorker(appproxy.Config{
		Registration:      reg,
		Coordinator:       coord,
		Events:            events,
		Apply:             m.applier.Apply,
		OnFirstPull:       srv.HoldReady(), // /readyz waits for the first applied pull
		Metrics:           appproxy.NewMetrics(srv.Registry()),
		HeartbeatPeriod:   ap.HeartbeatPeriod,
		ReconcileInterval: ap.ReconcileInterval,
		Logger:            log,
	})
	if err != nil {
		return nil, err
	}
	verifier := ingress.NewVerifier([]byte(ap.JWTSecret))
	verifier.RequireExp = ap.RequireTokenExp
	m.front = newFront(srv, router, m.applier, verifier, cfg.TrustedProxies)
	srv.SetHealthExtra("appproxy", func() any { return m.worker.Status() })
	ops.SetCircuitLister(func() any { return m.applier.Circuits() })
	srv.Registry().MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelrelay_appproxy_circuits", Help: "Circuits assigned to this worker."},
			func() float64 { return float64(m.worker.Status().Circuits) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelrelay_appproxy_replicas_healthy", Help: "Circuit replicas taking traffic."},
			func() float64 { return float64(m.applier.HealthyReplicas()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelrelay_appproxy_registered", Help: "1 while registered with the coordinator."},
			func() float64 { return boolGauge(m.worker.Status().Registered) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelrelay_appproxy_events_connected", Help: "1 while subscribed to the events channel."},
			func() float64 { return boolGauge(m.worker.Status().EventsConnected) }),
	)
	return m, nil
}

// run drives the coordinator conversation and the background loops until ctx ends; the worker
// deregisters on the way out. An error means the coordinator rejected our configuration.
func (m *workerMode) run(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { m.applier.Run(ctx, 2*time.Second) })
	if m.markers != nil {
		wg.Go(func() { m.markers.Run(ctx) })
	}
	err := m.worker.Run(ctx)
	stop() // the worker may return on its own (a rejected configuration): end the loops too
	wg.Wait()
	for _, c := range m.clients {
		c.Close()
	}
	return err
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// redisLog sends go-redis's own messages to the debug log.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

// markUsed records a served request for the coordinator's statistics (live markers).
func (m *workerMode) markUsed(circuitID, sessionID string) {
	if m.markers != nil {
		m.markers.MarkUsed(circuitID, sessionID)
	}
}
