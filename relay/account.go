package relay

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"modelrelay/relay/keys"
	"modelrelay/relay/usage"
)

// This file is the account stage: what an answer used (read by a usage.Tap as it passes, see
// sink_tap.go), charged to the client's key and its limits, written to the usage ledger,
// observed in the OpenTelemetry GenAI metrics, and written to the access log.

// genAI are the OpenTelemetry GenAI semantic-convention metrics, named as the Prometheus
// exporter renders them so that community dashboards read them unchanged.
type genAI struct {
	tokens   *prometheus.HistogramVec // gen_ai.client.token.usage
	ttft     *prometheus.HistogramVec // gen_ai.server.time_to_first_token
	tpot     *prometheus.HistogramVec // gen_ai.server.time_per_output_token
	duration *prometheus.HistogramVec // gen_ai.server.request.duration
	// Their series, bound once per operation, model label (and token type).
	tokensBy                   bound[[3]string, prometheus.Observer]
	ttftBy, tpotBy, durationBy bound[[2]string, prometheus.Observer]
}

// The conventions' advisory bucket boundaries.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	ttftBuckets     = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	tpotBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

func newGenAI(reg prometheus.Registerer) *genAI {
	labels := []string{"gen_ai_operation_name", "gen_ai_request_model"}
	g := &genAI{
		tokens: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_client_token_usage", Help: "Input and output tokens per request (OpenTelemetry gen_ai.client.token.usage).",
			Buckets: tokenBuckets,
		}, []string{"gen_ai_operation_name", "gen_ai_request_model", "gen_ai_token_type"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_server_time_to_first_token_seconds", Help: "Time to the first token of streamed answers.", Buckets: ttftBuckets,
		}, labels),
		tpot: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_server_time_per_output_token_seconds", Help: "Time per output token after the first, of streamed answers.",
			Buckets: tpotBuckets,
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_server_request_duration_seconds", Help: "Time from arrival to the end of successful answers.",
			Buckets: durationBuckets,
		}, labels),
	}
	reg.MustRegister(g.tokens, g.ttft, g.tpot, g.duration)
	g.tokensBy.bind = func(l [3]string) prometheus.Observer { return g.tokens.WithLabelValues(l[:]...) }
	g.ttftBy.bind = func(l [2]string) prometheus.Observer { return g.ttft.WithLabelValues(l[:]...) }
	g.tpotBy.bind = func(l [2]string) prometheus.Observer { return g.tpot.WithLabelValues(l[:]...) }
	g.durationBy.bind = func(l [2]string) prometheus.Observer { return g.duration.WithLabelValues(l[:]...) }
	return g
}

// modelNames are the model names metrics may use as label values: configured ones and those
// targets registered, at most maxModelLabels of them. Any other name a client sends counts
// as "other", so clients cannot grow the series.
type modelNames struct {
	names sync.Map // string -> struct{}
	count atomic.Int32
}

const maxModelLabels = 512

func (n *modelNames) note(models ...string) {
	for _, m := range models {
		if m == "" || m == "*" {
			continue
		}
		if _, ok := n.names.Load(m); ok {
			continue
		}
		if n.count.Add(1) > maxModelLabels {
			n.count.Add(-1)
			return
		}
		if _, dup := n.names.LoadOrStore(m, struct{}{}); dup {
			n.count.Add(-1)
		}
	}
}

// label is model as a metric label value.
func (n *modelNames) label(model string) string {
	if _, ok := n.names.Load(model); ok {
		return model
	}
	return "other"
}

// taps are reused across answers.
var taps = sync.Pool{New: func() any { return new(usage.Tap) }}

// account charges what an answered request used: to its key's token limit and the usage
// ledger (for the model that served it, after any fallback), and to the GenAI metrics (for
// the model asked). Only successful answers of generating calls (those with a GenAI operation)
// count.
func (s *Server) account(ctx context.Context, req *Request, key *keys.Key, asked string, out *answer) {
	op := req.endpoint.Operation
	if op == "" || !success(out.client.status) {
		return
	}
	used := out.usage()
	now := time.Now()
	if key != nil {
		s.budget.Charge(context.WithoutCancel(ctx), key.ID, key.Limits, used.Input+used.Output, now)
		s.ledger.Add(key.ID, out.where.served, used.Input, used.Output, now)
	}
	g, labels := s.metrics.genAI, [2]string{op, s.poolConf.names.label(asked)}
	if used.Seen {
		g.tokensBy.get([3]string{labels[0], labels[1], "input"}).Observe(float64(used.Input))
		g.tokensBy.get([3]string{labels[0], labels[1], "output"}).Observe(float64(used.Output))
	}
	took := now.Sub(req.arrival)
	g.durationBy.get(labels).Observe(took.Seconds())
	if ttfb := out.commit.ttfb; req.Streaming && ttfb > 0 {
		g.ttftBy.get(labels).Observe(ttfb.Seconds())
		if used.Output > 1 {
			g.tpotBy.get(labels).Observe((took - ttfb).Seconds() / float64(used.Output-1))
		}
	}
}

// exchange is what the access log (and the request metrics) say about one request, filled in
// as the request goes: one refused before it was read has little more than its status. It holds nothing a client
// could use to get in (no key, no token) and nothing it said (no prompt, no body).
type exchange struct {
	arrival time.Time
	id      string // the relay's request id ("" when refused before the body was read)
	keyID   string // the client API key's id (its name in /admin/keys; never the secret)
	model   string // the model asked for: the body's, or a circuit's canonical one
	stream  bool
	served  string // the model that answered, when the chain moved the request on
	pool    string // the last pool the request went to
	target  string // the target that answered
	queued  time.Duration
	ttfb    time.Duration
	status  int    // 0: the client left before it was answered
	reason  string // why the relay refused it itself (its error message), "" when a target answered
	torn    bool   // the answer was cut short mid-body: the connection is aborted once logged
	bytes   int64
	used    usage.Counts
}

// answered takes what the answer knows once the request is done.
func (x *exchange) answered(out *answer) {
	c := &out.client
	x.status, x.ttfb, x.bytes, x.target = c.status, out.commit.ttfb, c.streamed, out.where.target
	x.torn = c.torn
	x.reason = c.reason
	if out.where.from != "" {
		x.served = out.where.served
	}
	x.used = out.usage()
}

// abortIfTorn aborts the connection of an answer cut short mid-body, so that the client sees
// a broken answer rather than a complete-looking one.
func (x *exchange) abortIfTorn() {
	if x.torn {
		panic(http.ErrAbortHandler)
	}
}

// maxReasonRunes bounds the reason an access-log line gives for a refusal.
const maxReasonRunes = 256

// logAccess writes the access log: one INFO line per inference or pass-through request, with
// durations in milliseconds so that they graph and grep. Options.AccessLog turns it on.
func (s *Server) logAccess(w http.ResponseWriter, r *http.Request, x *exchange) {
	if !s.opts.AccessLog || !s.log.Enabled(r.Context(), slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 20)
	if x.id != "" {
		attrs = append(attrs, slog.String("request_id", x.id))
	}
	attrs = append(attrs, slog.String("method", r.Method), slog.String("route", r.URL.Path))
	if x.model != "" {
		attrs = append(attrs, slog.String("model", x.model), slog.Bool("stream", x.stream))
	}
	if x.served != "" {
		attrs = append(attrs, slog.String("served_model", x.served))
	}
	if tr := w.Header().Get(translatedHeader); tr != "" {
		attrs = append(attrs, slog.String("translated", tr))
	}
	if x.pool != "" {
		attrs = append(attrs, slog.String("pool", x.pool))
	}
	if x.target != "" {
		attrs = append(attrs, slog.String("target", x.target))
	}
	attrs = append(attrs, slog.Int("status", x.status))
	if x.reason != "" && x.status >= 400 && x.status < 500 {
		// The client's mistake, in the words it was told (a path, a model name, a limit; never
		// a secret or the body), cut short: a model name is the client's text.
		attrs = append(attrs, slog.String("reason", truncateRunes(x.reason, maxReasonRunes)))
	}
	attrs = append(attrs,
		slog.Int64("queue_ms", x.queued.Milliseconds()),
		slog.Int64("ttfb_ms", x.ttfb.Milliseconds()),
		slog.Int64("duration_ms", time.Since(x.arrival).Milliseconds()))
	if x.target != "" {
		attrs = append(attrs, slog.Int64("bytes", x.bytes))
	}
	if x.used.Seen {
		attrs = append(attrs, slog.Int64("input_tokens", x.used.Input), slog.Int64("output_tokens", x.used.Output))
	}
	if x.keyID != "" {
		attrs = append(attrs, slog.String("key_id", x.keyID))
	}
	attrs = append(attrs, slog.String("client_ip", peerIP(r, s.opts.TrustedProxies)))
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}
