package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// The fake model server. It runs as its own process (`modelrelay-bench upstream`) so its CPU
// is neither the proxy's nor the load generator's. It is as cheap as net/http allows, so the
// proxies, not the upstream, are what the table compares.

const (
	sseEvents  = 50
	ssePacing  = 20 * time.Millisecond
	benchModel = "bench"
)

// completionBody is a fixed OpenAI chat completion of about 1 KB.
var completionBody = func() []byte {
	content := strings.Repeat("lorem ipsum ", 70)
	return []byte(fmt.Sprintf(`{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,`+
		`"model":"%s","choices":[{"index":0,"message":{"role":"assistant","content":"%s"},`+
		`"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":140,"total_tokens":148}}`,
		benchModel, content))
}()

var modelsBody = []byte(`{"object":"list","data":[{"id":"` + benchModel + `","object":"model","owned_by":"bench"}]}`)

func sseEvent(i int) []byte {
	return []byte(fmt.Sprintf(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","model":"%s",`+
		`"choices":[{"index":0,"delta":{"content":"token%d "}}]}`+"\n\n", benchModel, i))
}

func runUpstream(args []string) error {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to serve on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("fake upstream: %w", err)
	}
	if err := serveUntilSignal(ln, upstreamHandler()); err != nil {
		return fmt.Errorf("fake upstream: %w", err)
	}
	return nil
}

// serveUntilSignal serves h on ln until SIGINT or SIGTERM, then closes every connection: the
// bench's servers are fakes, so answers in flight may be cut.
func serveUntilSignal(ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, func() { srv.Close() })
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// upstreamHandler answers the two routes the proxies are driven through.
func upstreamHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(modelsBody)
	})
	mux.HandleFunc("POST /v1/chat/completions", serveCompletion)
	return mux
}

func serveCompletion(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	if !bytes.Contains(body, []byte(`"stream":true`)) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(completionBody)
		return
	}
	if bytes.Contains(body, holdMarker) {
		serveHeld(w, r)
		return
	}
	serveStream(w, r)
}

// startSSE sends the head of an event stream; false means w cannot stream (answered 500).
func startSSE(w http.ResponseWriter) (http.Flusher, bool) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "no flusher", http.StatusInternalServerError)
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return flusher, true
}

// serveStream writes sseEvents events on an absolute schedule (start + i*pacing), so timer
// drift does not accumulate and every proxy sees the same cadence.
func serveStream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := startSSE(w)
	if !ok {
		return
	}
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := 0; i < sseEvents; i++ {
		if i > 0 {
			timer.Reset(time.Until(start.Add(time.Duration(i) * ssePacing)))
			select {
			case <-r.Context().Done():
				return
			case <-timer.C:
			}
		}
		if _, err := w.Write(sseEvent(i)); err != nil {
			return
		}
		flusher.Flush()
	}
	w.Write([]byte("data: [DONE]\n\n"))
	flusher.Flush()
}

// holdMarker in a streamed request asks for an idle stream (see holdRequest). It is a body
// member rather than a header because every proxy under test passes the body on, while the
// worker path carries only some headers; and it is OpenAI's own "user" member because a
// gateway that rebuilds the body from the parameters it knows (Portkey) keeps that one.
var holdMarker = []byte(`"user":"bench-hold"`)

// heldCap bounds a held stream whose client vanished without the connection closing.
const heldCap = 10 * time.Minute

// serveHeld sends the head and one event, then nothing until the client goes away: a stream
// that is open but idle (a model thinking, a slow reader), which costs a proxy memory only.
// The one event lets the client see that the stream reaches it through the proxy.
func serveHeld(w http.ResponseWriter, r *http.Request) {
	flusher, ok := startSSE(w)
	if !ok {
		return
	}
	w.Write(sseEvent(0))
	flusher.Flush()
	timer := time.NewTimer(heldCap)
	defer timer.Stop()
	select {
	case <-r.Context().Done():
	case <-timer.C:
	}
}

// upstreamMain is the entry point when the binary is started as the fake upstream.
func upstreamMain(args []string) int {
	if err := runUpstream(args); err != nil {
		fmt.Fprintln(os.Stderr, "modelrelay-bench upstream:", err)
		return 1
	}
	return 0
}
