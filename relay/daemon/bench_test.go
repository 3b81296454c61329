package daemon_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"modelrelay/relay"
	"modelrelay/relay/daemon"
)

// benchClients is the fixed number of concurrent clients in BenchmarkRelay.
const benchClients = 16

const benchBody = `{"model":"m1","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}`

// BenchmarkRelay sends the same non-streaming chat request through the relay server to the
// same in-process backend two ways: via a relay worker daemon (the WebSocket hop), and via a
// static upstream (direct HTTP). The ratio of their req/s is the cost of the daemon hop.
// "interleaved" alternates the two in small rounds so that load from elsewhere on the machine
// hits both alike, and reports the ratio itself.
func BenchmarkRelay(b *testing.B) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"m1",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today?"},`+
			`"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":9,"total_tokens":18}}`)
	}))
	defer backend.Close()
	viaDaemon := func(b *testing.B) string {
		rs := startRelay(b, relay.Options{}, nil)
		startDaemon(b, rs.url(), backend.URL, func(c *daemon.Config) { c.MaxConcurrency = benchClients })
		rs.waitWorkers(b, 1)
		return rs.url()
	}
	viaUpstream := func(b *testing.B) string {
		rs := startRelay(b, relay.Options{Backends: []relay.Backend{
			{Name: "direct", URL: backend.URL, Models: []string{"m1"}, Weight: 1}}}, nil)
		return rs.url()
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchClients * 2}}
	defer client.CloseIdleConnections()

	b.Run("daemon", func(b *testing.B) {
		url := viaDaemon(b)
		b.ResetTimer()
		d := fire(b, client, url, b.N)
		b.ReportMetric(float64(b.N)/d.Seconds(), "req/s")
	})
	b.Run("static-upstream", func(b *testing.B) {
		url := viaUpstream(b)
		b.ResetTimer()
		d := fire(b, client, url, b.N)
		b.ReportMetric(float64(b.N)/d.Seconds(), "req/s")
	})
	b.Run("interleaved", func(b *testing.B) {
		daemonURL, upstreamURL := viaDaemon(b), viaUpstream(b)
		const round = 256
		var inDaemon, inUpstream time.Duration
		b.ResetTimer()
		for done := 0; done < b.N; done += round {
			n := min(round, b.N-done)
			inDaemon += fire(b, client, daemonURL, n)
			inUpstream += fire(b, client, upstreamURL, n)
		}
		daemonRate := float64(b.N) / inDaemon.Seconds()
		upstreamRate := float64(b.N) / inUpstream.Seconds()
		b.ReportMetric(daemonRate, "daemon-req/s")
		b.ReportMetric(upstreamRate, "static-req/s")
		b.ReportMetric(daemonRate/upstreamRate, "daemon/static")
	})
}

// fire sends n requests from benchClients concurrent clients and returns how long they took.
func fire(b *testing.B, client *http.Client, base string, n int) time.Duration {
	return fireBody(b, client, base, benchBody, n)
}

// fireBody is fire with another request body; each answer is read to its end.
func fireBody(b *testing.B, client *http.Client, base, body string, n int) time.Duration {
	var next, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range benchClients {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				resp, err := client.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d requests failed, first: %v", f, n, firstErr.Load())
	}
	return took
}

// BenchmarkWorkerPath is the cost of the worker path, everything in this process (the client,
// the relay server, the daemon and the backend): CPU time and allocations per request, for a
// ~1 KB JSON answer and for a 50-chunk stream, from benchClients concurrent clients. What the
// path itself changes shows as the difference between two builds run on the same machine.
func BenchmarkWorkerPath(b *testing.B) {
	answer := `{"id":"chatcmpl-1","object":"chat.completion","model":"m1","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"` + strings.Repeat("lorem ipsum ", 70) + `"},` +
		`"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":140,"total_tokens":149}}`
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, answer)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		flusher := w.(http.Flusher)
		for i := range benchChunks {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token%d \"}}]}\n\n", i)
			flusher.Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer backend.Close()
	rs := startRelay(b, relay.Options{}, nil)
	startDaemon(b, rs.url(), backend.URL, func(c *daemon.Config) { c.MaxConcurrency = benchClients })
	rs.waitWorkers(b, 1)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchClients * 2}}
	defer client.CloseIdleConnections()

	run := func(b *testing.B, body string) {
		b.ReportAllocs()
		cpu0 := processCPU()
		b.ResetTimer()
		fireBody(b, client, rs.url(), body, b.N)
		b.StopTimer()
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	}
	b.Run("json", func(b *testing.B) { run(b, benchBody) })
	b.Run("stream", func(b *testing.B) {
		run(b, strings.Replace(benchBody, `"max_tokens":16`, `"max_tokens":16,"stream":true`, 1))
	})
}

// benchChunks is how many events the stream of BenchmarkWorkerPath carries.
const benchChunks = 50

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
