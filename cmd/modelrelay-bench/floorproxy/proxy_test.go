package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// startFloor serves the floor proxy to upstream on a loopback listener with the server kind,
// and returns its base URL.
func startFloor(t *testing.T, kind, upstream string) string {
	t.Helper()
	up, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := newServer(kind, newHandler(up))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

var kinds = []string{"net/http", "lean"}

// echo answers 201 with the request's body, its method, target and X-Test field in fields of
// its own, and a field with two values.
func echo(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Set("X-Method", r.Method)
	w.Header().Set("X-Target", r.RequestURI)
	w.Header().Set("X-Test", r.Header.Get("X-Test"))
	w.Header()["X-Two"] = []string{"a", "b"}
	w.WriteHeader(http.StatusCreated)
	w.Write(body)
}

func TestFloorProxyForwardsWhole(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(echo))
	defer upstream.Close()
	small := []byte(`{"model":"bench","stream":false}`)
	large := bytes.Repeat([]byte("0123456789abcdef"), 10_000) // 160 KB: past the pooled buffer
	for _, kind := range kinds {
		base := startFloor(t, kind, upstream.URL)
		for _, c := range []struct {
			name    string
			method  string
			body    []byte
			chunked bool // sent without a length
		}{
			{"small", http.MethodPost, small, false},
			{"large", http.MethodPost, large, false},
			{"chunked", http.MethodPost, large, true},
			{"no body", http.MethodGet, nil, false},
		} {
			var body io.Reader
			if c.body != nil {
				body = bytes.NewReader(c.body)
				if c.chunked {
					body = io.MultiReader(body) // no length known to the client: chunked
				}
			}
			req, err := http.NewRequest(c.method, base+"/v1/x%20y?q=1", body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Test", "passed")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", kind, c.name, err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("%s %s: read answer: %v", kind, c.name, err)
			}
			if resp.StatusCode != http.StatusCreated || !bytes.Equal(got, c.body) {
				t.Errorf("%s %s: status %d, %d bytes back, want 201 and the %d sent", kind, c.name,
					resp.StatusCode, len(got), len(c.body))
			}
			h := resp.Header
			if h.Get("X-Method") != c.method || h.Get("X-Target") != "/v1/x%20y?q=1" || h.Get("X-Test") != "passed" ||
				strings.Join(h["X-Two"], ",") != "a,b" {
				t.Errorf("%s %s: header fields back %v", kind, c.name, h)
			}
		}
	}
}

func TestFloorProxyStreamsEvents(t *testing.T) {
	next := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			if i > 0 {
				select {
				case <-next: // the client has the event before: only then the next
				case <-r.Context().Done():
					return
				}
			}
			io.WriteString(w, "data: event"+string(rune('0'+i))+"\n\n")
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer upstream.Close()
	for _, kind := range kinds {
		base := startFloor(t, kind, upstream.URL)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions",
			strings.NewReader(`{"stream":true}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("%s: %v", kind, err)
		}
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
			t.Errorf("%s: status %d, Content-Type %q", kind, resp.StatusCode, ct)
		}
		br := bufio.NewReader(resp.Body)
		for i, want := range []string{"data: event0", "data: event1", "data: event2", "data: [DONE]"} {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: event %d: %v (an event held back until the next would time out here)", kind, i, err)
			}
			if got := strings.TrimSpace(line); got != want {
				t.Fatalf("%s: event %d = %q, want %q", kind, i, got, want)
			}
			br.ReadString('\n') // the blank line ending the event
			if i < 2 {
				next <- struct{}{}
			}
		}
		resp.Body.Close()
		cancel()
	}
}

func TestUpstreamURL(t *testing.T) {
	for in, want := range map[string]string{"127.0.0.1:8000": "http://127.0.0.1:8000", "http://h:1": "http://h:1"} {
		if u, err := upstreamURL(in); err != nil || u.String() != want {
			t.Errorf("upstreamURL(%q) = %v, %v; want %s", in, u, err, want)
		}
	}
	for _, in := range []string{"", "https://h:1", "http://"} {
		if _, err := upstreamURL(in); err == nil {
			t.Errorf("upstreamURL(%q) accepted", in)
		}
	}
	if _, err := newServer("h2", nil); err == nil {
		t.Error("newServer accepted an unknown kind")
	}
}
