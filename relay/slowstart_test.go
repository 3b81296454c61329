package relay

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recoverBreaker takes m through a successful half-open trial: its breaker closes again.
func recoverBreaker(t *testing.T, p *Pool, m *member) {
	t.Helper()
	p.mu.Lock()
	m.brk = breaker{state: breakerHalfOpen, cooldown: p.cfg.breaker.Cooldown}
	p.assignLocked(m, &Request{Model: "any"})
	p.mu.Unlock()
	p.release(m, outcomeOK, time.Millisecond)
	if m.brk.state != breakerClosed {
		t.Fatalf("breaker %v after a good trial, want closed", m.brk.state)
	}
}

// rampAt moves m's slow start so that the fraction f of it has passed (time driven by hand:
// the ramp is an hour long, so the test's own running time does not move it measurably).
func rampAt(p *Pool, m *member, f float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m.rampFrom = time.Now().Add(-time.Duration(f * float64(p.cfg.slowStart)))
}

// ramping says whether m is in slow start.
func ramping(p *Pool, m *member) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.ramping, m) && m.withheld > 0
}

// shareOf places n sequential requests (each released before the next: every target is at
// the same load, so the weights alone decide) and returns the share id got.
func shareOf(t *testing.T, p *Pool, id string, n int) float64 {
	t.Helper()
	got := 0
	for _, placed := range picks(t, p, "any", n, true) {
		if placed == id {
			got++
		}
	}
	return float64(got) / float64(n)
}

// A backend whose breaker closes again gets its share back over slow_start: from about
// slowStartFloor of its weight to all of it, linearly; after the ramp it is an equal again.
func TestSlowStartRampsTheShareOfARecoveredTarget(t *testing.T) {
	a, b := upstreamMember("a", 1), upstreamMember("b", 1)
	p := testPool(a, b)
	p.cfg.slowStart = time.Hour
	recoverBreaker(t, p, b)
	if !ramping(p, b) {
		t.Fatal("a target whose breaker closed is not in slow start")
	}
	const n = 400
	var shares []float64
	for _, f := range []float64{0, 1.0 / 6, 1.0 / 3, 2.0 / 3} {
		rampAt(p, b, f)
		share := shareOf(t, p, "b", n)
		w := slowStartFloor + (1-slowStartFloor)*f // b's weight now; a's is 1
		if want := w / (1 + w); math.Abs(share-want) > 0.02 {
			t.Errorf("%.0f%% into the ramp: b got %.3f of the requests, want %.3f", 100*f, share, want)
		}
		shares = append(shares, share)
	}
	rampAt(p, b, 1.01)
	after := shareOf(t, p, "b", n)
	if ramping(p, b) {
		t.Error("still in slow start after the ramp")
	}
	if after != 0.5 {
		t.Errorf("after the ramp b got %.3f of the requests, want 0.5", after)
	}
	t.Logf("b's share at 0, 1/6, 1/3 and 2/3 of the ramp: %.3f; after it: %.3f", shares, after)
	for i := 1; i < len(shares); i++ {
		if shares[i] <= shares[i-1] {
			t.Errorf("share did not grow over the ramp: %v", shares)
		}
	}
	if third := shares[2]; third >= 0.6*after {
		t.Errorf("share a third into the ramp %.3f is not clearly below the share after it %.3f", third, after)
	}
}

// Under concurrent load the ramp shows too: selection minimizes in-flight per unit of weight,
// so a target at a tenth of its weight holds about a tenth as many requests.
func TestSlowStartUnderConcurrentLoad(t *testing.T) {
	a, b := upstreamMember("a", 1), upstreamMember("b", 1)
	p := testPool(a, b)
	p.cfg.slowStart = time.Hour
	recoverBreaker(t, p, b)
	rampAt(p, b, 0)
	picks(t, p, "any", 110, false) // none released: they pile up
	if a.inFlight != 100 || b.inFlight != 10 {
		t.Fatalf("in flight a=%d b=%d, want 100 and 10", a.inFlight, b.inFlight)
	}
}

// With slow start off (or for a target that never failed) the share is whole at once.
func TestSlowStartOff(t *testing.T) {
	a, b := upstreamMember("a", 1), upstreamMember("b", 1)
	p := testPool(a, b)
	p.cfg.slowStart = 0
	recoverBreaker(t, p, b)
	if ramping(p, b) {
		t.Fatal("slow start with slow_start off")
	}
	if share := shareOf(t, p, "b", 100); share != 0.5 {
		t.Fatalf("b got %.2f of the requests, want 0.5", share)
	}
}

// Options.SlowStart reaches the pools (0 = the 30 s default, negative = off).
func TestSlowStartOption(t *testing.T) {
	for _, tc := range []struct {
		set, want time.Duration
	}{{0, 30 * time.Second}, {-1, 0}, {5 * time.Second, 5 * time.Second}} {
		s, err := New(Options{SlowStart: tc.set})
		if err != nil {
			t.Fatal(err)
		}
		if s.poolConf.slowStart != tc.want {
			t.Errorf("SlowStart %v: pools ramp over %v, want %v", tc.set, s.poolConf.slowStart, tc.want)
		}
		s.Close()
	}
}

// End to end on real sockets: backend b answers 500, its breaker opens, it heals, its trial
// request closes the breaker; then of the next sequential requests it gets about a tenth of
// a's share while slow start runs (an hour here), and half of them with slow start off.
func TestSlowStartAfterBreakerClosesOnRealBackends(t *testing.T) {
	const n = 40
	for _, tc := range []struct {
		slowStart time.Duration
		min, max  int // requests b serves of n
	}{{time.Hour, 1, 8}, {-1, n / 2, n / 2}} {
		var failing atomic.Bool
		failing.Store(true)
		backend := func(sick *atomic.Bool) *httptest.Server {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				if sick != nil && sick.Load() {
					w.WriteHeader(500)
				}
				io.WriteString(w, `{}`)
			}))
			t.Cleanup(ts.Close)
			return ts
		}
		a, b := backend(nil), backend(&failing)
		s, err := New(Options{SlowStart: tc.slowStart, Breaker: BreakerOptions{Failures: 1, Cooldown: 20 * time.Millisecond},
			Backends: []Backend{{Name: "a", URL: a.URL, Models: []string{"m"}}, {Name: "b", URL: b.URL, Models: []string{"m"}}}})
		if err != nil {
			t.Fatal(err)
		}
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.ServeInference(w, r, OpenAI, s.Provider()) // the test calls chat completions only
		}))
		t.Cleanup(func() { s.Close(); front.Close() })
		served := func() string {
			t.Helper()
			resp, err := http.Post(front.URL+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			return resp.Header.Get("X-Modelrelay-Target")
		}
		status := func() breakerState {
			for _, m := range s.PoolMembers("local") {
				if m.ID == "b" {
					return m.breakerState
				}
			}
			t.Fatal("b is not in the pool")
			return 0
		}
		for i := 0; status() != breakerOpen; i++ { // b's 500 opens it (the request retries on a)
			if i == 10 {
				t.Fatal("b's breaker did not open")
			}
			served()
		}
		failing.Store(false)
		deadline := time.Now().Add(10 * time.Second)
		for served() != "b" { // its trial, once the cool-down is over
			if time.Now().After(deadline) {
				t.Fatal("b got no trial request")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if status() != breakerClosed {
			t.Fatalf("b's breaker %v after a good trial", status())
		}
		got := 0
		for range n {
			if served() == "b" {
				got++
			}
		}
		if got < tc.min || got > tc.max {
			t.Errorf("slow start %v: b served %d of %d requests after its breaker closed, want %d..%d", tc.slowStart, got, n, tc.min, tc.max)
		}
	}
}
