package appproxy

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count the coordinator conversation. A nil *Metrics counts nothing.
type Metrics struct {
	calls  *prometheus.CounterVec // coordinator REST calls by call and result
	events *prometheus.CounterVec // events received by kind
	acks   *prometheus.CounterVec // acks by result
}

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelrelay_appproxy_coordinator_calls_total",
			Help: "Coordinator REST calls by call (register, heartbeat, pull, deregister) and result (ok, not_found, error).",
		}, []string{"call", "result"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelrelay_appproxy_events_total",
			Help: "Messages on the events channel by kind (created, removed, route_updated, other, malformed).",
		}, []string{"kind"}),
		acks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelrelay_appproxy_acks_total", Help: "Circuit-added acks published, by result (ok, error).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.calls, m.events, m.acks)
	return m
}

func (m *Metrics) call(name string, err error) {
	if m == nil {
		return
	}
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, ErrNotFound):
		result = "not_found"
	default:
		result = "error"
	}
	m.calls.WithLabelValues(name, result).Inc()
}

func (m *Metrics) event(kind string) {
	if m != nil {
		m.events.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) ack(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.acks.WithLabelValues("error").Inc()
		return
	}
	m.acks.WithLabelValues("ok").Inc()
}
