// Command modelrelay-bench measures modelrelay against nginx, HAProxy, Caddy and Portkey's AI
// gateway on one machine in one run: a fake OpenAI upstream, non-streaming load (wrk, or a Go
// generator), 200 concurrent SSE streams, and each proxy's CPU and peak memory. It prints one
// Markdown table with ratios against the direct path and the best plain proxy, and the issue's
// targets. Two floor rows run floorproxy, a featureless Go proxy of the relay's own parts (on
// net/http's server and on the lean one), so that relay static − floor shows what the relay's
// own stages cost. Then more: CPU per streamed chunk, added latency at concurrency 1
// (-latency-requests sequential completions per row), memory per held idle stream (-held
// streams at once through nginx, Portkey and each relay row), and each relay row's lead over
// Portkey.
//
//	go run ./cmd/modelrelay-bench [-duration 10s] [-only nginx,static] [-skip-install] [-pprof]
//	                              [-held 10000] [-latency-requests 2000]
//
// `modelrelay-bench soak [-hold 10s]` measures what slow and oversized request bodies cost the
// relay (its RSS and an ordinary request's latency while they are held).
//
// `modelrelay-bench translation [-size 29000000]` measures the relay's peak RSS while it
// translates large request bodies of many small blocks, one and six at once, both directions.
//
// `modelrelay-bench placement` compares the relay's least_load and cache_aware routing over
// four simulated prefix-cache replicas (`modelrelay-bench simcache -listen ADDR` runs one), on
// two workloads: short chats on 8B-class replicas and agent sessions on 70B-class ones.
//
// `modelrelay-bench upstream -listen ADDR` runs only the fake upstream (the benchmark starts
// itself that way, so the upstream's CPU stays out of the generator's process).
//
// `modelrelay-bench fake-upstream [-listen 127.0.0.1:8000] [-token-delay 20ms]` runs the demo
// model server that `modelrelay-server --demo` has built in (model "demo", both API families,
// paced tokens, usage), to try a worker daemon without a GPU.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Options are the command-line flags.
type Options struct {
	Duration, Warmup time.Duration
	Only             string
	SkipInstall      bool
	Conns, Streams   int
	Rounds, Passes   int
	Pprof            bool
	Held             int // idle streams held at once per row; 0 skips the scenario
	LatencyRequests  int // sequential requests per row at concurrency 1; 0 skips
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "upstream" {
		os.Exit(upstreamMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "soak" {
		os.Exit(soakMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "translation" {
		os.Exit(translationMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "simcache" {
		os.Exit(simcacheMain(os.Args[2:], os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "fake-upstream" {
		os.Exit(fakeUpstreamMain(os.Args[2:], os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "placement" {
		os.Exit(placementMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(benchMain(os.Args[1:], os.Stdout, os.Stderr))
}

func parseOptions(args []string, stderr io.Writer) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("modelrelay-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "measured non-streaming run per row")
	fs.DurationVar(&o.Warmup, "warmup", 2*time.Second, "unmeasured non-streaming run before it")
	fs.StringVar(&o.Only, "only", "", "comma list of rows: nginx,haproxy,caddy,portkey,floor,floor-lean,static,static-lean,circuit,worker (direct always runs)")
	fs.BoolVar(&o.SkipInstall, "skip-install", false, "do not apt-get install missing tools; skip their rows")
	fs.IntVar(&o.Conns, "conns", 64, "non-streaming connections")
	fs.IntVar(&o.Streams, "streams", 200, "concurrent SSE streams")
	fs.IntVar(&o.Rounds, "rounds", 5, "waves of SSE streams per row")
	fs.IntVar(&o.Passes, "passes", 3, "slices the -duration of each row is split into, taken in turns across rows")
	fs.BoolVar(&o.Pprof, "pprof", false, "after the measurements, save CPU profiles of both relay static rows and relay worker (server and daemon) under one more non-streaming run and one more SSE run, and their heap profiles")
	fs.IntVar(&o.Held, "held", 10000, "idle SSE streams held at once through nginx and each relay row, for memory per stream (0 = skip)")
	fs.IntVar(&o.LatencyRequests, "latency-requests", 2000, "sequential requests per row at concurrency 1, for added latency (0 = skip)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.Duration < time.Second || o.Duration > 10*time.Minute || o.Conns < 1 || o.Streams < 1 || o.Rounds < 1 || o.Passes < 1 {
		return o, fmt.Errorf("-duration must be 1s..10m and -conns, -streams, -rounds, -passes at least 1")
	}
	if o.Held < 0 || o.LatencyRequests < 0 {
		return o, fmt.Errorf("-held and -latency-requests must be 0 (skip) or more")
	}
	return o, nil
}

func benchMain(args []string, stdout, stderr io.Writer) int {
	opts, err := parseOptions(args, stderr)
	if err != nil {
		return 2
	}
	rows, err := selectRows(opts.Only)
	if err != nil {
		fmt.Fprintln(stderr, "modelrelay-bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := runBench(ctx, opts, rows, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "modelrelay-bench:", err)
		return 1
	}
	return 0
}
