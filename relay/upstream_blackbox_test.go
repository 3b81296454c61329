package relay_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"modelrelay/relay"
)

// backend is an OpenAI-compatible model server on loopback that records what it was sent.
type backend struct {
	*httptest.Server
	mu   sync.Mutex
	seen []*seenRequest
}

type seenRequest struct {
	path   string
	host   string
	header http.Header
	body   string
}

func newBackend(t *testing.T, h http.HandlerFunc) *backend {
	t.Helper()
	b := &backend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.seen = append(b.seen, &seenRequest{path: r.URL.RequestURI(), host: r.Host, header: r.Header.Clone(), body: string(body)})
		b.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) requests() []*seenRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*seenRequest(nil), b.seen...)
}

func (b *backend) host() string { return strings.TrimPrefix(b.URL, "http://") }

func TestUpstreamNonStreamingPassThrough(t *testing.T) {
	for _, status := range []int{200, 400, 429, 500} {
		be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Backend", "vllm")
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(status)
			io.WriteString(w, `{"from":"backend"}`)
		})
		_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{{Name: "b1", URL: be.URL, Models: []string{"m"}}}})
		body := markedBody("m", false, "hello")
		r := wait(t, goPost(ts, "/v1/chat/completions", body))
		if r.resp.StatusCode != status || string(r.body) != `{"from":"backend"}` {
			t.Fatalf("status %d: got %d %q", status, r.resp.StatusCode, r.body)
		}
		if r.resp.Header.Get("X-Backend") != "vllm" || r.resp.Header.Get("Content-Type") != "application/json" ||
			r.resp.Header.Get("Retry-After") != "7" {
			t.Fatalf("status %d: headers %v", status, r.resp.Header)
		}
		seen := be.requests()
		if len(seen) != 1 || seen[0].body != body || seen[0].path != "/v1/chat/completions" {
			t.Fatalf("backend saw %+v", seen)
		}
		if seen[0].host != be.host() {
			t.Fatalf("static upstream got Host %q, want its own %q", seen[0].host, be.host())
		}
	}
}

func TestUpstreamNoContentTypeInvented(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil // the backend sends none
		io.WriteString(w, `{"a":1}`)
	})
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{{URL: be.URL, Models: []string{"m"}}}})
	r := wait(t, goPost(ts, "/v1/chat/completions", chatBody("m", false)))
	if ct, ok := r.resp.Header["Content-Type"]; ok {
		t.Fatalf("relay invented content-type %q", ct)
	}
}

func TestUpstreamStreamingPassThrough(t *testing.T) {
	next := make(chan struct{})
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Stream", "1")
		w.WriteHeader(200)
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-next: // the client has read the first event
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: two\n\n")
	})
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{{URL: be.URL, Models: []string{"m"}}}})
	r := wait(t, goStream(context.Background(), ts, "/v1/chat/completions", chatBody("m", true)))
	defer r.resp.Body.Close()
	if r.resp.StatusCode != 200 || r.resp.Header.Get("Content-Type") != "text/event-stream" || r.resp.Header.Get("X-Stream") != "1" {
		t.Fatalf("got %d %v", r.resp.StatusCode, r.resp.Header)
	}
	if got := readN(t, r.resp.Body, len("data: one\n\n")); got != "data: one\n\n" {
		t.Fatalf("first event %q", got)
	}
	close(next)
	if rest := readAll(t, r.resp.Body); rest != "data: two\n\n" {
		t.Fatalf("rest %q", rest)
	}
}

func TestUpstreamStreamingErrorStatusPassThrough(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		io.WriteString(w, `{"error":"bad"}`)
	})
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{{URL: be.URL, Models: []string{"m"}}}})
	r := wait(t, goPost(ts, "/v1/chat/completions", chatBody("m", true)))
	if r.resp.StatusCode != 400 || string(r.body) != `{"error":"bad"}` || r.resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %v %q", r.resp.StatusCode, r.resp.Header, r.body)
	}
}

func TestUpstreamModelDiscovery(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
			io.WriteString(w, `{"object":"list","data":[{"id":"qwen"},{"id":"llama"},{"id":"qwen"}]}`)
			return
		}
		io.WriteString(w, `{"served":true}`)
	})
	srv, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{{URL: be.URL}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, "discovered models", func() bool { return equalStrings(modelIDs(t, ts), []string{"qwen", "llama"}) })
	r := wait(t, goPost(ts, "/v1/chat/completions", chatBody("llama", false)))
	if r.resp.StatusCode != 200 || string(r.body) != `{"served":true}` {
		t.Fatalf("got %d %q", r.resp.StatusCode, r.body)
	}
}

func TestUpstreamRefusingConnectionsIsSkipped(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close() // nothing listens here now: connections are refused
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "alive") })
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{
		{Name: "dead", URL: dead, Models: []string{"m"}},
		{Name: "alive", URL: be.URL, Models: []string{"m"}},
	}})
	for i := 0; i < 4; i++ {
		r := wait(t, goPost(ts, "/v1/chat/completions", chatBody("m", false)))
		if r.resp.StatusCode != 200 || string(r.body) != "alive" {
			t.Fatalf("request %d: %d %q", i+1, r.resp.StatusCode, r.body)
		}
	}
	if n := len(be.requests()); n != 4 {
		t.Fatalf("live backend saw %d requests, want 4 (each exactly once)", n)
	}
}

func TestUpstreamClientDisconnectCancelsCall(t *testing.T) {
	arrived := make(chan struct{})
	cancelled := make(chan struct{})
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
		close(cancelled)
	})
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{{URL: be.URL, Models: []string{"m"}}}})
	ctx, cancel := context.WithCancel(context.Background())
	c := goCall(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", chatBody("m", true), nil)
	select {
	case <-arrived:
	case r := <-c:
		t.Fatalf("answered before the backend was called: %+v", r)
	}
	cancel()
	<-c
	select {
	case <-cancelled:
	case <-waitTimer():
		t.Fatal("backend call was not cancelled after the client went away")
	}
}

func TestUpstreamHeadersFiltered(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "X-Hop")
		w.Header().Set("X-Hop", "1")
		w.Header().Set("X-End", "2")
		io.WriteString(w, "{}")
	})
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{{URL: be.URL, Models: []string{"m"}}}})
	r := wait(t, rawPost(t, ts, "/v1/chat/completions", clientHeaders, chatBody("m", false)))
	if r.resp.Header.Get("X-End") != "2" {
		t.Errorf("end-to-end response header lost: %v", r.resp.Header)
	}
	if v := r.resp.Header.Get("X-Hop"); v != "" {
		t.Errorf("Connection-listed response header passed on: %q", v)
	}
	seen := be.requests()
	if len(seen) != 1 {
		t.Fatalf("backend saw %d requests", len(seen))
	}
	h := seen[0].header
	if h.Get("Authorization") != "Bearer sk-client" || strings.Join(h.Values("X-Custom"), ", ") != "a, b" {
		t.Errorf("end-to-end request headers lost: %v", h)
	}
	for _, k := range []string{"X-Conn-Listed", "Keep-Alive", "Te", "Trailer", "Upgrade", "Proxy-Authorization", "Proxy-Connection"} {
		if v, ok := h[k]; ok {
			t.Errorf("request header %s = %q reached the backend", k, v)
		}
	}
}

func TestUpstreamLostMidStreamEndsWithErrorEvent(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			next := make(chan struct{})
			be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "data: partial\n\n")
				w.(http.Flusher).Flush()
				select {
				case <-next:
				case <-r.Context().Done():
				}
				panic(http.ErrAbortHandler) // the backend dies mid-stream
			})
			_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{{URL: be.URL, Models: []string{"m"}}}})
			r := wait(t, goStream(context.Background(), ts, rt.path, chatBody("m", true)))
			defer r.resp.Body.Close()
			readN(t, r.resp.Body, len("data: partial\n\n"))
			close(next)
			checkStreamError(t, rt, readAll(t, r.resp.Body), "")
			if n := len(be.requests()); n != 1 {
				t.Fatalf("backend saw %d requests: the stream was re-run", n)
			}
		})
	}
}

// TestUpstreamPathAsEscaped: a pass-through path reaches the upstream as the client escaped
// it, after the upstream URL's own path: not unescaped, not escaped a second time (a
// "%20" once went out as "%2520").
func TestUpstreamPathAsEscaped(t *testing.T) {
	seen := make(chan string, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.RequestURI
	}))
	defer be.Close()
	srv, err := relay.New(relay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.SetUpstreamPool("circuit", relay.PoolSpec{Upstreams: []relay.UpstreamSpec{{ID: "r", URL: be.URL + "/base%20dir/"}}}); err != nil {
		t.Fatal(err)
	}
	pass := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServePassThrough(w, r, "circuit")
	}))
	defer pass.Close()
	const path = "/files/a%20b%2Fc%25?q=1%202&r=%2F"
	resp, err := http.Get(pass.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-seen; got != "/base%20dir"+path {
		t.Fatalf("upstream saw %q, want %q", got, "/base%20dir"+path)
	}
}
