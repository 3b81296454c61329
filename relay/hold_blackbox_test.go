package relay_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelrelay/relay"
)

// A target's failure larger than the relay holds for a retry is the answer after all: it
// reaches the client whole, with the length the target announced or none, never cut short
// under a length that makes it look complete.
func TestLargeFailureReachesTheClientWhole(t *testing.T) {
	big := `{"error":"` + strings.Repeat("x", 100<<10) + `"}`
	for _, announced := range []bool{true, false} {
		be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			if !announced {
				io.WriteString(w, big[:1000])
				w.(http.Flusher).Flush() // chunked: no length
			} else {
				io.WriteString(w, big[:1000])
			}
			io.WriteString(w, big[1000:])
		})
		_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{{Name: "b1", URL: be.URL, Models: []string{"m"}}}})
		r := wait(t, goPost(ts, "/v1/chat/completions", chatBody("m", false)))
		if r.err != nil || r.resp.StatusCode != http.StatusInternalServerError || string(r.body) != big {
			t.Fatalf("length announced %v: status %d, %d bytes of %d (%v)", announced, r.resp.StatusCode, len(r.body), len(big), r.err)
		}
	}
}

// A failure held for the next model loses to the request timeout when the timeout fires
// first: the client gets the relay's 504, never an empty answer.
func TestHeldFailureAfterTheRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	failing := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"down"}`)
	})
	slow := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), RequestTimeout: 300 * time.Millisecond,
		Fallbacks: map[string][]string{"m": {"m2"}},
		Backends: []relay.Backend{{Name: "down", URL: failing.URL, Models: []string{"m"}},
			{Name: "slow", URL: slow.URL, Models: []string{"m2"}}}})
	r := wait(t, goPost(ts, "/v1/chat/completions", chatBody("m", false)))
	if r.err != nil || r.resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("status %d %q (%v)", r.resp.StatusCode, r.body, r.err)
	}
}
