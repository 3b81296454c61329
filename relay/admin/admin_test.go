package admin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"modelrelay/relay"
	"modelrelay/relay/keys"
)

// fakeRelay is the part of a relay the gate and the stats read; the loopback tests in package
// relay run the operator's surface against the real one.
type fakeRelay struct {
	mux         *http.ServeMux
	opts        relay.Options
	crossOrigin bool // RefuseCrossOrigin refuses
	throttled   bool // RefuseGuess finds no turn
	guesses     int
	status      relay.Status
}

func newFake(token string) *fakeRelay {
	return &fakeRelay{mux: http.NewServeMux(), opts: relay.Options{AdminToken: token}}
}

func (f *fakeRelay) Mount(pattern string, h http.Handler) { f.mux.Handle(pattern, h) }
func (f *fakeRelay) Options() relay.Options               { return f.opts }
func (f *fakeRelay) RefuseCrossOrigin(w http.ResponseWriter, _ *http.Request) bool {
	if f.crossOrigin {
		fail(w, http.StatusForbidden, "cross-origin")
	}
	return f.crossOrigin
}
func (f *fakeRelay) RefuseGuess(w http.ResponseWriter, _ *http.Request, kind string) bool {
	f.guesses++
	if f.throttled {
		fail(w, http.StatusTooManyRequests, "throttled "+kind)
	}
	return f.throttled
}
func (f *fakeRelay) Workers() []relay.WorkerView               { return nil }
func (f *fakeRelay) Worker(string) (relay.WorkerControl, bool) { return relay.WorkerControl{}, false }
func (f *fakeRelay) Status() relay.Status                      { return f.status }
func (f *fakeRelay) Keys() *keys.Auth                          { return nil }
func (f *fakeRelay) Ledger() *keys.Ledger                      { return nil }
func (f *fakeRelay) call(method, path, token string) (int, string) {
	r := httptest.NewRequest(method, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	f.mux.ServeHTTP(w, r)
	return w.Code, strings.TrimSpace(w.Body.String())
}

// The gate: a browser from another origin first, then the token; only a wrong token is a guess
// for the throttle, and a throttled guess is answered by the throttle, never with the verdict.
func TestGate(t *testing.T) {
	for _, c := range []struct {
		name, configured, sent string
		crossOrigin, throttled bool
		status                 int
		body                   string
		guesses                int
	}{
		{"disabled", "", "tok", false, false, 403, `{"error":"admin API is disabled: no admin_token is configured"}`, 0},
		{"missing", "tok", "", false, false, 403, `{"error":"admin token required: send Authorization: Bearer \u003cadmin_token\u003e"}`, 0},
		{"wrong", "tok", "nope", false, false, 403, `{"error":"wrong admin token"}`, 1},
		{"wrong, throttled", "tok", "nope", false, true, 429, `{"error":"throttled admin"}`, 1},
		{"right, another origin", "tok", "tok", true, false, 403, `{"error":"cross-origin"}`, 0},
		{"right", "tok", "tok", false, true, 200, `{"circuits":[]}`, 0},
	} {
		f := newFake(c.configured)
		f.crossOrigin, f.throttled = c.crossOrigin, c.throttled
		Mount(f)
		status, body := f.call(http.MethodGet, "/admin/circuits", c.sent)
		if status != c.status || body != c.body || f.guesses != c.guesses {
			t.Errorf("%s: %d %s (%d guesses), want %d %s (%d)", c.name, status, body, f.guesses, c.status, c.body, c.guesses)
		}
	}
}

func TestStatsCountOneSnapshot(t *testing.T) {
	f := newFake("tok")
	f.status = relay.Status{Uptime: 1500 * time.Millisecond, Draining: true, Extras: map[string]any{"appproxy": "up"},
		Pools: map[string]relay.PoolStatus{
			"local": {Queued: 2, Targets: []relay.TargetStatus{{Kind: "worker", InFlight: 3}, {Kind: "upstream", InFlight: 1}}},
			"c1":    {Queued: 1, Targets: []relay.TargetStatus{{Kind: "upstream", InFlight: 4}}},
		}}
	Mount(f)
	status, body := f.call(http.MethodGet, "/admin/stats", "tok")
	var got map[string]any
	if err := json.Unmarshal([]byte(body), &got); err != nil || status != 200 {
		t.Fatalf("%d %s: %v", status, body, err)
	}
	depth, _ := json.Marshal(got["queue_depth"])
	if string(depth) != `{"c1":1,"local":2}` || got["active_workers"] != 1.0 || got["upstreams"] != 2.0 ||
		got["in_flight"] != 8.0 || got["draining"] != true || got["uptime_secs"] != 1.5 || got["appproxy"] != "up" {
		t.Errorf("stats %s", body)
	}
}

// A change of a key's limits names the member that is wrong; members not sent stay as they
// are, null clears one.
func TestKeyLimitsPatch(t *testing.T) {
	for _, c := range []struct {
		body, err string
		want      keys.Limits
	}{
		{`{}`, "", keys.Limits{RateLimitRPM: 5, Priority: "low"}},
		{`{"rate_limit_rpm":null,"priority":"high"}`, "", keys.Limits{Priority: "high"}},
		{`{"allowed_models":["m*"],"cache":"off","expires_at":"2030-01-02T03:04:05.0000009Z"}`, "",
			keys.Limits{RateLimitRPM: 5, Priority: "low", AllowedModels: []string{"m*"}, Cache: "off",
				ExpiresAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}},
		{`{"rate_limit_rpm":-1}`, "rate_limit_rpm must be a non-negative integer or null", keys.Limits{}},
		{`{"token_limit_tpm":"5"}`, "token_limit_tpm must be a non-negative integer or null", keys.Limits{}},
		{`{"max_priority":"urgent"}`, "max_priority must be high, normal, low or null", keys.Limits{}},
		{`{"allowed_models":[""]}`, "allowed_models entries must be 1 to 256 characters", keys.Limits{}},
		{`{"allowed_models":"m"}`, "allowed_models must be an array of at most 64 model names or globs", keys.Limits{}},
		{`{"expires_at":"tomorrow"}`, "expires_at must be an RFC 3339 time or null", keys.Limits{}},
		{`{"cache":"always"}`, "cache must be default, off or null", keys.Limits{}},
	} {
		var l keyLimits
		if err := json.Unmarshal([]byte(c.body), &l); err != nil {
			t.Fatal(err)
		}
		p, err := l.patch()
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s: error %v, want %q", c.body, err, c.err)
			}
			continue
		}
		got := p.Apply(keys.Limits{RateLimitRPM: 5, Priority: "low"})
		gotJSON, _ := json.Marshal(got)
		wantJSON, _ := json.Marshal(c.want)
		if err != nil || string(gotJSON) != string(wantJSON) {
			t.Errorf("%s: %s %v, want %s", c.body, gotJSON, err, wantJSON)
		}
	}
}
