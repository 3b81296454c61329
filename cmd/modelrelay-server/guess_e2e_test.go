package main

// Wrong admin tokens and wrong circuit tokens are guesses: through the real binary, a flood of
// them from one address gets a few answers a second (it got thousands before the throttle),
// while the right token from the same address is answered at once.

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"
)

func TestE2EWrongTokensAreThrottledCorrectOnesAreNot(t *testing.T) {
	rep := newReplica(t, "r", "m")
	c := newCircuit("guess", route{port: rep.port()})
	e, _ := startBinaryEnv(t, nil, c)
	good := tokenFor(t, c.id)
	e.waitServing(circuitHost("guess"), bearer(good))
	forged := mintToken(t, jwt.MapClaims{"id": c.id, "exp": time.Now().Add(time.Hour).Unix()}, "a-guessed-secret")

	kinds := []struct {
		name       string
		host, path string
		wrong      http.Header
		right      http.Header
		wrongWant  int
		from       string // the guessers' and the honest client's address
	}{
		{"admin token", "", "/admin/stats", bearer("guess"), bearer(e2eAdmin), http.StatusForbidden, "127.0.0.2"},
		{"circuit token", circuitHost("guess"), "/v1/models", bearer(forged), bearer(good), http.StatusUnauthorized, "127.0.0.3"},
	}
	for _, k := range kinds {
		const guessers, window = 32, 2 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), window)
		var answered atomic.Int64
		var wg sync.WaitGroup
		client := clientFrom(k.from, guessers)
		honest := clientFrom(k.from, 1)
		for range guessers {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+e.addr+k.path, nil)
					req.Host = k.host
					if k.host == "" {
						req.Host = e.addr
					}
					req.Header = k.wrong.Clone()
					resp, err := client.Do(req)
					if err != nil {
						continue
					}
					resp.Body.Close()
					if resp.StatusCode != k.wrongWant {
						t.Errorf("%s: a wrong token got %d", k.name, resp.StatusCode)
					}
					answered.Add(1)
				}
			})
		}
		time.Sleep(200 * time.Millisecond)
		for i := range 5 {
			start := time.Now()
			req, _ := http.NewRequest("GET", "http://"+e.addr+k.path, nil)
			if k.host != "" {
				req.Host = k.host
			}
			req.Header = k.right.Clone()
			resp, err := honest.Do(req)
			if err != nil {
				t.Fatalf("%s: the right token during the flood: %v", k.name, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: the right token during the flood: %d", k.name, resp.StatusCode)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("%s: right token %d answered after %s", k.name, i, took)
			}
		}
		wg.Wait()
		cancel()
		client.CloseIdleConnections()
		rate := float64(answered.Load()) / window.Seconds()
		t.Logf("%s: %d guessers got %.1f answers/s", k.name, guessers, rate)
		// One verdict per 250 ms in turn; the rest wait up to 5 s, longer than the window.
		if rate > 10 {
			t.Errorf("%s: %d guessers got %.1f answers a second", k.name, guessers, rate)
		}
	}
}

// clientFrom is an HTTP client whose connections come from the loopback address local.
func clientFrom(local string, conns int) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, DialContext: d.DialContext, MaxIdleConnsPerHost: conns}}
}

// A worker daemon with the right secret joins at once while wrong secrets flood in from the
// same address (one host, or one NAT): the Rust relay's lockout refused it.
func TestE2EWorkerDaemonJoinsDuringAFloodOfWrongSecrets(t *testing.T) {
	config := writeConfig(t, "worker_secret: right-secret\n")
	e, _ := startBinaryEnv(t, map[string]string{"MODELRELAY_CONFIG": config})
	backend := newReplica(t, "backend", "flood-m")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var guesses atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait()
	for range 32 {
		wg.Go(func() {
			d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
			for ctx.Err() == nil {
				conn, _, err := d.DialContext(ctx, "ws://"+e.addr+"/v1/worker/connect?provider=local",
					http.Header{"X-Worker-Secret": {"wrong"}})
				if err == nil {
					conn.Close()
					guesses.Add(1)
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond) // the flood is under way
	start := time.Now()
	startWorkerDaemon(t, e.addr, "right-secret", "http://"+backend.addr, "flood-m")
	eventually(t, 10*time.Second, "the daemon to join during the flood", func() (bool, string) {
		st, _, body := e.do("GET", "", "/v1/models", nil, nil)
		return st == 200 && strings.Contains(string(body), "flood-m"), string(body)
	})
	t.Logf("daemon joined %s after starting, during a flood of 32 wrong-secret guessers", time.Since(start).Round(time.Millisecond))
	if st, _, body := e.chat("", "flood-m", nil); st != 200 {
		t.Errorf("request through the daemon during the flood: %d %s", st, body)
	}
	cancel()
}

// The guess throttle holds per address, not per connection: many connections from one
// address sending wrong admin tokens or wrong client API keys get at most one verdict (403,
// 401) per step (250 ms) between them; the rest are told, after the hold, that the address is
// rate limited (429). The right token or key from the same address is answered while the
// flood's answers are still held.
func TestE2EGuessThrottleHoldsPerAddressHoweverManyConnections(t *testing.T) {
	t.Parallel()
	r := startKeyRelay(t, "demo: true\n", map[string]string{"MODELRELAY_REQUIRE_API_KEYS": "true"})
	key := createKey(t, r.addr, `{"name":"honest"}`)
	kinds := []struct {
		name, from   string
		method, path string
		body         string
		wrong, right http.Header
		verdict      int
	}{
		{"admin token", "127.0.0.2", "GET", "/admin/stats", "", bearer("guess"), bearer(e2eAdmin), http.StatusForbidden},
		{"client API key", "127.0.0.3", "POST", "/v1/chat/completions", chatJSON("demo"),
			bearer(randomSecret(t)), bearer(key.Secret), http.StatusUnauthorized},
	}
	const (
		conns = 150
		flood = 2 * time.Second
		step  = 250 * time.Millisecond // the default auth failure step
	)
	var wg sync.WaitGroup
	for _, k := range kinds {
		wg.Go(func() {
			client := clientFrom(k.from, conns)
			defer client.CloseIdleConnections()
			call := func(h http.Header) (int, http.Header, error) {
				req, _ := http.NewRequest(k.method, "http://"+r.addr+k.path, strings.NewReader(k.body))
				req.Header = withJSON(h)
				resp, err := client.Do(req)
				if err != nil {
					return 0, nil, err
				}
				defer resp.Body.Close()
				io.Copy(io.Discard, resp.Body)
				return resp.StatusCode, resp.Header, nil
			}
			var mu sync.Mutex
			var verdicts []time.Duration // when each verdict arrived, since start
			var limited, sent, answered atomic.Int64
			start := time.Now()
			var guessers sync.WaitGroup
			for range conns {
				guessers.Go(func() {
					for time.Since(start) < flood {
						sent.Add(1)
						st, h, err := call(k.wrong)
						answered.Add(1)
						switch {
						case err != nil:
							t.Errorf("%s: a wrong one: %v", k.name, err)
							return
						case st == k.verdict:
							mu.Lock()
							verdicts = append(verdicts, time.Since(start))
							mu.Unlock()
						case st == http.StatusTooManyRequests && h.Get("Retry-After") != "":
							limited.Add(1)
						default:
							t.Errorf("%s: a wrong one answered %d", k.name, st)
							return
						}
					}
				})
			}
			time.Sleep(flood / 4)
			st, _, err := call(k.right)
			held := sent.Load() - answered.Load()
			if err != nil || st != http.StatusOK {
				t.Errorf("%s: the right one during the flood: %d %v", k.name, st, err)
			}
			if held == 0 {
				t.Errorf("%s: the right one was answered after every wrong one (it must never wait)", k.name)
			}
			guessers.Wait()
			mu.Lock()
			defer mu.Unlock()
			perSecond := map[int]int{}
			for _, at := range verdicts {
				perSecond[int(at/time.Second)]++
			}
			last := time.Duration(0)
			if n := len(verdicts); n > 0 {
				last = verdicts[n-1]
			}
			t.Logf("%s: %d connections from %s for %s: %d verdicts (per second %v), %d rate limited; the right one answered with %d wrong ones held",
				k.name, conns, k.from, flood, len(verdicts), perSecond, limited.Load(), held)
			// The n-th verdict's turn is n steps after the flood began at the earliest, so n
			// verdicts take n steps; one more for slack.
			if most := int(last/step) + 1; len(verdicts) > most {
				t.Errorf("%s: %d verdicts in %s; one per %s per address allows %d", k.name, len(verdicts), last.Round(time.Millisecond), step, most)
			}
			if limited.Load() == 0 {
				t.Errorf("%s: %d connections were never told they are rate limited", k.name, conns)
			}
		})
	}
	wg.Wait()
}
