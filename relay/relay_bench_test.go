package relay_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"modelrelay/relay"
	"modelrelay/relay/api"
	"modelrelay/relay/keys"
)

const benchReply = `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}]}`

func fakeModelServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(benchReply))
	}))
}

// BenchmarkUpstreamOverhead calls the same in-process model server directly and through the
// relay (static upstream), in one run, and reports the p50 of each: the difference is what the
// relay adds to a non-streaming request.
func BenchmarkUpstreamOverhead(b *testing.B) {
	backend := fakeModelServer()
	defer backend.Close()
	srv, err := relay.New(relay.Options{Backends: []relay.Backend{{Name: "b", URL: backend.URL, Models: []string{"m"}}}})
	if err != nil {
		b.Fatal(err)
	}
	front := httptest.NewServer(api.Handler(srv))
	defer front.Close()
	defer srv.Close()
	// The same relay asking for client keys (in memory, the key cached after its first use).
	store := keys.NewMemory()
	secret, prefix := keys.NewSecret()
	store.Insert(context.Background(), keys.Key{ID: keys.NewID(), Prefix: prefix}, keys.HashOf(secret))
	keyed, err := relay.New(relay.Options{RequireAPIKeys: true, Keys: relay.KeyOptions{Store: store},
		Backends: []relay.Backend{{Name: "b", URL: backend.URL, Models: []string{"m"}}}})
	if err != nil {
		b.Fatal(err)
	}
	keyedFront := httptest.NewServer(api.Handler(keyed))
	defer keyedFront.Close()
	defer keyed.Close()
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, c := range []struct{ name, url, key string }{
		{"direct", backend.URL + "/v1/chat/completions", ""},
		{"relay", front.URL + "/v1/chat/completions", ""},
		{"relay-with-key", keyedFront.URL + "/v1/chat/completions", secret},
	} {
		b.Run(c.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				benchPostKey(b, client, c.url, c.key, body)
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		})
	}
}

// BenchmarkQueuedToNewWorker measures how long a queued request waits once a worker
// registers: from the register frame leaving the worker to the request frame arriving.
func BenchmarkQueuedToNewWorker(b *testing.B) {
	srv, err := relay.New(relay.Options{WorkerSecret: secret, Timings: relay.Timings{KeepKnown: time.Hour, HeartbeatInterval: time.Hour}})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(api.Handler(srv))
	defer ts.Close()
	defer srv.Close()
	t := &testing.T{}
	// Make the model known so requests queue instead of failing with 404.
	first := connectWorker(t, ts, registerFrame("seed", []string{"m"}, 1))
	first.conn.Close()
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		done := make(chan struct{})
		go func() {
			resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader([]byte(`{"model":"m"}`)))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			close(done)
		}()
		waitQueued(b, ts)
		conn := dialRaw(t, ts, "?provider=local", secretHeader())
		w := &fakeWorker{t: t, conn: conn}
		b.StartTimer()
		start := time.Now()
		w.conn.WriteMessage(1, []byte(registerFrame("w", []string{"m"}, 1)))
		w.next() // register_ack
		req := w.nextRequest()
		total += time.Since(start)
		b.StopTimer()
		w.complete(req.RequestID, 200, "{}")
		<-done
		conn.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/dispatch")
}

func waitQueued(b *testing.B, ts *httptest.Server) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(ts.URL + "/health")
		if err == nil {
			var buf bytes.Buffer
			io.Copy(&buf, resp.Body)
			resp.Body.Close()
			if bytes.Contains(buf.Bytes(), []byte(`"queue_depth":1`)) {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	b.Fatal("request never queued")
}

// BenchmarkStreamTranslation streams the same 200-chunk OpenAI answer (flushed chunk by chunk,
// as a model server sends tokens) through the relay to an OpenAI client (pass-through) and to
// an Anthropic client (translated as the chunks flow), in one run. cpu-µs/stream is the whole process's CPU (client, relay and model server alike), so
// the ratio of the two rows is what translation adds to a stream's cost.
func BenchmarkStreamTranslation(b *testing.B) {
	var chunks []string
	chunks = append(chunks, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n")
	for i := 0; i < 200; i++ {
		chunks = append(chunks, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" token\"},\"finish_reason\":null}]}\n\n")
	}
	chunks = append(chunks, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":200}}\n\ndata: [DONE]\n\n")
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			io.WriteString(w, c)
			w.(http.Flusher).Flush()
		}
	}))
	defer backend.Close()
	srv, err := relay.New(relay.Options{Backends: []relay.Backend{{Name: "b", URL: backend.URL, Models: []string{"m"},
		Dialects: []relay.Dialect{relay.OpenAI}}}})
	if err != nil {
		b.Fatal(err)
	}
	front := httptest.NewServer(api.Handler(srv))
	defer front.Close()
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, c := range []struct{ name, path, body string }{
		{"pass-through", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"translated", "/v1/messages", `{"model":"m","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				benchPost(b, client, front.URL+c.path, c.body)
			}
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/stream")
		})
	}
}

// benchPost posts body to url, reads the whole answer and insists on a 200.
func benchPost(b *testing.B, client *http.Client, url, body string) {
	benchPostKey(b, client, url, "", body)
}

// benchPostKey posts body with a client API key (none when key is "").
func benchPostKey(b *testing.B, client *http.Client, url, key, body string) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
