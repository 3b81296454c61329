package relay_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"modelrelay/relay"
)

// Metrics of the relay's registry, each tested alone: the queue-wait histogram, the model label
// of the fallback counter (bounded: an unknown name counts as other), and reason and kind
// counters that start at zero. The full reference (every family, with AppProxy mode's) is
// generated and checked in cmd/modelrelay-server (metrics_reference_e2e_test.go).

// scrape reads /metrics into series -> value ("name{labels}" as the exposition writes them).
func scrape(t *testing.T, ts *httptest.Server) map[string]float64 {
	t.Helper()
	r := wait(t, goCall(context.Background(), http.MethodGet, ts.URL+"/metrics", "", nil))
	if r.resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", r.resp.StatusCode)
	}
	series := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(r.body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		series[line[:i]] = v
	}
	return series
}

func TestQueueWaitHistogram(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	first := goPost(ts, "/v1/chat/completions", chatBody("m", false))
	held := w.request()
	const count, sum = `modelrelay_queue_wait_seconds_count{pool="local"}`, `modelrelay_queue_wait_seconds_sum{pool="local"}`
	// A free target: observed once, as 0.
	if m := scrape(t, ts); m[count] != 1 || m[sum] != 0 || m[`modelrelay_queue_wait_seconds_bucket{pool="local",le="0.001"}`] != 1 {
		t.Fatalf("after a request served at once: count %v, sum %v", m[count], m[sum])
	}
	second := goPost(ts, "/v1/chat/completions", chatBody("m", false))
	waitQueueDepth(t, ts, 1)
	if m := scrape(t, ts); m[count] != 1 {
		t.Fatalf("a request still queued was observed: count %v", m[count])
	}
	w.complete(held.RequestID, 200, nil, "ok")
	wait(t, first)
	next := w.request()
	w.complete(next.RequestID, 200, nil, "ok")
	wait(t, second)
	// The queued one: observed once more, with the (nonzero) time it stood in the queue.
	if m := scrape(t, ts); m[count] != 2 || m[sum] <= 0 || m[`modelrelay_queue_wait_seconds_bucket{pool="local",le="+Inf"}`] != 2 {
		t.Fatalf("after a queued request: count %v, sum %v", m[count], m[sum])
	}
}

func TestFallbacksCountByTheModelTheyLeft(t *testing.T) {
	be := newBackend(t, openAIOnly)
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Fallbacks: map[string][]string{"ghost": {"m"}},
		Backends: []relay.Backend{{Name: "b", URL: be.URL, Models: []string{"m"}, Dialects: []relay.Dialect{relay.OpenAI}}}})
	if r := wait(t, goPost(ts, "/v1/chat/completions", chatBody("ghost", false))); r.resp.StatusCode != 200 {
		t.Fatalf("ghost -> m: %d %s", r.resp.StatusCode, r.body)
	}
	// A chain of the request's own, from a name no configuration or target knows.
	body := `{"model":"made-up-by-a-client","messages":[{"role":"user","content":"hi"}],"x_pool_options":{"fallback_models":["m"]}}`
	if r := wait(t, goPost(ts, "/v1/chat/completions", body)); r.resp.StatusCode != 200 {
		t.Fatalf("made-up -> m: %d %s", r.resp.StatusCode, r.body)
	}
	m := scrape(t, ts)
	for series, want := range map[string]float64{
		`modelrelay_fallbacks_total{model="ghost",reason="no_pool"}`: 1,
		`modelrelay_fallbacks_total{model="other",reason="no_pool"}`: 1,
	} {
		if m[series] != want {
			t.Errorf("%s = %v, want %v", series, m[series], want)
		}
	}
	for series := range m {
		if strings.Contains(series, "made-up-by-a-client") {
			t.Errorf("a client's model name became a label value: %s", series)
		}
	}
}

func TestReasonCountersStartAtZero(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	m := scrape(t, ts)
	for _, series := range []string{
		`modelrelay_request_body_errors_total{reason="malformed"}`, `modelrelay_request_body_errors_total{reason="too_large"}`,
		`modelrelay_request_body_errors_total{reason="client_gone"}`, `modelrelay_auth_failures_total{kind="worker"}`,
		`modelrelay_auth_failures_total{kind="api_key"}`, `modelrelay_auth_failures_total{kind="circuit"}`,
	} {
		if v, ok := m[series]; !ok || v != 0 {
			t.Errorf("%s: %v (present %v), want 0 before anything happened", series, v, ok)
		}
	}
}
