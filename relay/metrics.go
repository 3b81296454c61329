package relay

import (
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the relay's Prometheus series. Counters and histograms are atomic on the request
// path; queue depth and in-flight counts are read from the pools only at scrape time.
type metrics struct {
	registry         *prometheus.Registry
	requests         *prometheus.CounterVec
	duration         *prometheus.HistogramVec
	ttfb             *prometheus.HistogramVec
	workersConnected prometheus.Gauge
	strayFrames      prometheus.Counter
	bodyErrors       *prometheus.CounterVec
	authFailures     *prometheus.CounterVec
	crossOrigin      prometheus.Counter
	fallbacks        *prometheus.CounterVec
	queueWait        *prometheus.HistogramVec
	cacheRequests    *prometheus.CounterVec
	genAI            *genAI
	// The request path's series, each bound to its label values once (see bound).
	requestsBy bound[routeStatus, prometheus.Counter]
	durationBy bound[string, prometheus.Observer] // by route
	ttfbBy     bound[string, prometheus.Observer] // by route
	waitBy     bound[string, prometheus.Observer] // by pool
}

// routeStatus are the labels of modelrelay_requests_total.
type routeStatus struct {
	route  string
	status int
}

// bound is the series of one metric vector bound to label values once: WithLabelValues
// hashes every value and looks the set up under the vector's lock on each call, and the
// request path would make seven such calls a request. A bound series is one read of a map
// that is copied on write. The label values come from bounded sets (routes, statuses, pools,
// operations, and the model labels of modelNames); past maxBound sets, the vector is asked
// each time. A series is bound on its first use, so /metrics shows the same series as
// without the binding.
type bound[K comparable, M any] struct {
	bind func(K) M // asks the vector
	mu   sync.Mutex
	seen atomic.Pointer[map[K]M]
}

// maxBound is the most label sets one vector keeps bound.
const maxBound = 1024

func (b *bound[K, M]) get(k K) M {
	if seen := b.seen.Load(); seen != nil {
		if m, ok := (*seen)[k]; ok {
			return m
		}
	}
	m := b.bind(k)
	b.mu.Lock()
	defer b.mu.Unlock()
	var old map[K]M
	if p := b.seen.Load(); p != nil {
		old = *p
	}
	if len(old) < maxBound {
		next := make(map[K]M, len(old)+1)
		maps.Copy(next, old)
		next[k] = m
		b.seen.Store(&next)
	}
	return m
}

var latencyBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// queueWaitBuckets span a free target (0, in the first bucket) to the longest queue timeouts.
var queueWaitBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60}

// The bounded label values of the reason and kind counters, each started at zero so that a
// dashboard's rate() has a series before the first event.
var (
	bodyErrorReasons = []string{"malformed", "truncated", "timeout", "too_large", "over_budget", "client_gone", "invalid"}
	authFailureKinds = []string{"worker", "admin", "circuit", "api_key"}
)

func newMetrics(s *Server) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelrelay_requests_total", Help: "Inference requests answered, by route and status.",
		}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "modelrelay_request_duration_seconds", Help: "Time from arrival to the end of the answer.", Buckets: latencyBuckets,
		}, []string{"route"}),
		ttfb: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "modelrelay_time_to_first_byte_seconds", Help: "Time from arrival to the first byte of the target's answer.", Buckets: latencyBuckets,
		}, []string{"route"}),
		workersConnected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "modelrelay_workers_connected", Help: "Relay worker sessions connected.",
		}),
		strayFrames: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "modelrelay_worker_stray_frames_total", Help: "Worker frames for requests the worker does not hold (dropped).",
		}),
		bodyErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelrelay_request_body_errors_total",
			Help: "Request bodies refused or abandoned, by reason (malformed, truncated, timeout, too_large, over_budget, client_gone, invalid).",
		}, []string{"reason"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelrelay_auth_failures_total", Help: "Wrong secrets, tokens and keys presented, by kind (worker, admin, circuit, api_key).",
		}, []string{"kind"}),
		crossOrigin: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "modelrelay_cross_origin_refusals_total",
			Help: "Non-safe requests to the inference and admin routes refused because a browser sent them from an origin not in trusted_origins.",
		}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelrelay_fallbacks_total",
			Help: "Requests moved to the next model of their chain, by the model they left (configured or registered names, else other) and reason (no_pool, down, queue_full, too_slow, target_failed).",
		}, []string{"model", "reason"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "modelrelay_queue_wait_seconds",
			Help:    "Time a request waited in a pool's queue before it got a target (0 when one was free), by pool; observed each time a target is handed over.",
			Buckets: queueWaitBuckets,
		}, []string{"pool"}),
	}
	for _, reason := range bodyErrorReasons {
		m.bodyErrors.WithLabelValues(reason)
	}
	for _, kind := range authFailureKinds {
		m.authFailures.WithLabelValues(kind)
	}
	bodiesHeld := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "modelrelay_request_body_bytes_held",
		Help: "Bytes held in request bodies not yet handed to a target and in translated bodies (bounded by body_budget_bytes).",
	}, func() float64 { return float64(s.bodyBudget.held.Load()) })
	usagePending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "modelrelay_usage_pending_rows",
		Help: "Usage rows (key, model, day) waiting to be written to the key store.",
	}, func() float64 { return float64(s.ledger.Pending()) })
	usageDropped := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "modelrelay_usage_dropped_total",
		Help: "Requests whose usage was dropped because too much waited for a key store that was down.",
	}, func() float64 { return float64(s.ledger.Dropped()) })
	usageFailures := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "modelrelay_usage_write_failures_total",
		Help: "Usage batches the key store refused (kept and retried).",
	}, func() float64 { return float64(s.ledger.Failures()) })
	m.requestsBy.bind = func(k routeStatus) prometheus.Counter {
		return m.requests.WithLabelValues(k.route, strconv.Itoa(k.status))
	}
	m.durationBy.bind = func(route string) prometheus.Observer { return m.duration.WithLabelValues(route) }
	m.ttfbBy.bind = func(route string) prometheus.Observer { return m.ttfb.WithLabelValues(route) }
	m.waitBy.bind = func(pool string) prometheus.Observer { return m.queueWait.WithLabelValues(pool) }
	m.genAI = newGenAI(m.registry)
	m.registry.MustRegister(usagePending, usageDropped, usageFailures)
	m.cacheRequests = cacheMetrics(s, m.registry)
	m.registry.MustRegister(bodiesHeld, m.requests, m.duration, m.ttfb, m.workersConnected, m.strayFrames, m.bodyErrors, m.authFailures, m.crossOrigin, m.fallbacks,
		m.queueWait, poolCollector{s}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(route string, status int, arrival time.Time, ttfb time.Duration) {
	m.requestsBy.get(routeStatus{route, status}).Inc()
	m.durationBy.get(route).Observe(time.Since(arrival).Seconds())
	if ttfb > 0 {
		m.ttfbBy.get(route).Observe(ttfb.Seconds())
	}
}

// queued observes the time a request waited in pool's queue for a target.
func (m *metrics) queued(pool string, waited time.Duration) {
	m.waitBy.get(pool).Observe(waited.Seconds())
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// MetricsHandler serves the server's Prometheus metrics (GET /metrics).
func (s *Server) MetricsHandler() http.Handler { return s.metrics.handler() }

// Registry lets other parts of the process (AppProxy mode) add their series to /metrics.
func (s *Server) Registry() prometheus.Registerer { return s.metrics.registry }

var (
	queueDepthDesc = prometheus.NewDesc("modelrelay_queue_depth", "Requests waiting, by pool.", []string{"pool"}, nil)
	inFlightDesc   = prometheus.NewDesc("modelrelay_target_in_flight", "Requests running, by pool and target.", []string{"pool", "target"}, nil)
	breakerDesc    = prometheus.NewDesc("modelrelay_target_breaker_state",
		"Circuit breaker of each static backend and circuit replica: 0 closed, 1 open, 2 half-open.", []string{"pool", "target"}, nil)
	healthyDesc = prometheus.NewDesc("modelrelay_target_healthy",
		"1 while a target takes traffic on its health, 0 while it does not: a static backend or circuit replica whose breaker is not closed, a suspect relay worker.",
		[]string{"pool", "target"}, nil)
	waitDesc = prometheus.NewDesc("modelrelay_pool_estimated_wait_seconds",
		"Estimated wait of a request that queues now, by pool (what Retry-After says).", []string{"pool"}, nil)
	suspectDesc = prometheus.NewDesc("modelrelay_workers_suspect",
		"Relay workers connected but suspect: silent since a ping, so they take no new requests.", nil, nil)
)

// poolCollector reads queue depths and in-flight counts when Prometheus scrapes.
type poolCollector struct{ s *Server }

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- inFlightDesc
	ch <- breakerDesc
	ch <- healthyDesc
	ch <- waitDesc
	ch <- suspectDesc
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	suspect := 0
	c.s.eachPool(func(name string, p *Pool) {
		view := p.view()
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(view.queued), name)
		ch <- prometheus.MustNewConstMetric(waitDesc, prometheus.GaugeValue, view.wait.Seconds(), name)
		for _, m := range view.members {
			ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(m.InFlight), name, m.ID)
			ch <- prometheus.MustNewConstMetric(healthyDesc, prometheus.GaugeValue, gauge(m.Healthy), name, m.ID)
			if m.Kind == "upstream" {
				ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, float64(m.breakerState), name, m.ID)
			}
			if m.Suspect {
				suspect++
			}
		}
	})
	ch <- prometheus.MustNewConstMetric(suspectDesc, prometheus.GaugeValue, float64(suspect))
}

// gauge is a yes or no as a Prometheus value.
func gauge(yes bool) float64 {
	if yes {
		return 1
	}
	return 0
}
