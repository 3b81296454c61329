package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"modelrelay/relay"
)

// The router answers a plain path's only method from its map; every request must reach the
// handler the mux alone would have picked, whatever its method, path, escaping or host.
func TestRouterPicksWhatTheMuxPicks(t *testing.T) {
	for _, hostPattern := range []bool{false, true} {
		rt := newRoutes()
		mark := func(name string) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Header().Set("X-Handler", name) })
		}
		rt.handle("POST /v1/chat/completions", mark("chat"), relay.PlainErrors)
		rt.handle("POST /v1/messages", mark("messages"), relay.PlainErrors)
		rt.handle("GET /v1/models", mark("models"), relay.PlainErrors)
		rt.handle("GET /v1/responses/{id}", mark("stored"), relay.PlainErrors)
		rt.handle("DELETE /v1/responses/{id}", mark("stored-delete"), relay.PlainErrors)
		if hostPattern {
			rt.handle("POST models.example/v1/chat/completions", mark("host-chat"), relay.PlainErrors)
		}
		router := rt.serve()
		for _, c := range []struct{ method, target, host string }{
			{"POST", "/v1/chat/completions", "relay.local"},
			{"POST", "/v1/chat/completions", "models.example"},
			{"GET", "/v1/chat/completions", "relay.local"},
			{"POST", "/v1/chat%2Fcompletions", "relay.local"},
			{"POST", "/v1/chat/%63ompletions", "relay.local"},
			{"POST", "/v1//chat/completions", "relay.local"},
			{"POST", "/v1/./chat/completions", "relay.local"},
			{"POST", "/v1/chat/completions/", "relay.local"},
			{"POST", "/v1/messages", "relay.local"},
			{"GET", "/v1/models", "relay.local"},
			{"HEAD", "/v1/models", "relay.local"},
			{"POST", "/v1/models", "relay.local"},
			{"GET", "/v1/responses/resp_1", "relay.local"},
			{"DELETE", "/v1/responses/resp_1", "relay.local"},
			{"POST", "/nowhere", "relay.local"},
		} {
			via := func(h http.Handler) (int, string) {
				r := httptest.NewRequest(c.method, "http://"+c.host+c.target, nil)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w.Code, w.Header().Get("X-Handler") + " " + w.Header().Get("Location")
			}
			gotCode, got := via(router)
			wantCode, want := via(rt.mux)
			if gotCode != wantCode || got != want {
				t.Errorf("host pattern %v, %s %s (Host %s): router %d %q, mux %d %q",
					hostPattern, c.method, c.target, c.host, gotCode, got, wantCode, want)
			}
		}
	}
}

// BenchmarkRoute is the cost of picking an inference call's handler on the relay's own
// surface: the router's map against the mux alone.
func BenchmarkRoute(b *testing.B) {
	s, err := relay.New(relay.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	router := surface(s).(*router)
	r := httptest.NewRequest("POST", "http://relay.local/v1/chat/completions", nil)
	b.Run("router", func(b *testing.B) {
		for b.Loop() {
			router.handler(r)
		}
	})
	b.Run("mux", func(b *testing.B) {
		for b.Loop() {
			router.mux.Handler(r)
		}
	})
}
