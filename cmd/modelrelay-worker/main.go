// Command modelrelay-worker connects a local model backend (llama-server, vLLM, Ollama, …) to a
// ModelRelay server. It dials out over WebSocket, so the GPU box needs no inbound port.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"modelrelay/relay/daemon"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, stop, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program. signals is done on SIGTERM or Ctrl-C; stopSignals restores the
// default handling, so a second signal during the drain kills the process at once.
func run(signals context.Context, stopSignals func(), args []string,
	lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	s, err := load(args, lookupEnv)
	var uerr usageError
	switch {
	case errors.Is(err, errHelp):
		usage(stdout)
		return 0
	case errors.Is(err, errVersion):
		fmt.Fprintln(stdout, "modelrelay-worker", version)
		return 0
	case errors.As(err, &uerr):
		fmt.Fprintf(stderr, "modelrelay-worker: %v (see --help)\n", err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "modelrelay-worker: %v\n", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: s.LogLevel}))
	for _, key := range s.UnknownKeys {
		log.Warn("ignoring unknown config key", "key", key)
	}
	d, err := daemon.New(daemon.Config{
		ProxyURL: s.ProxyURL, Provider: s.Provider, WorkerSecret: s.WorkerSecret,
		WorkerName: s.WorkerName, Models: s.Models, MaxConcurrency: s.MaxConcurrency, MaxFrameBytes: s.MaxFrameBytes,
		BackendURL: s.BackendURL, Logger: log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "modelrelay-worker: %v\n", err)
		return 1
	}
	log.Info("modelrelay-worker starting", "version", version, "proxy", redactedList(s.ProxyURL),
		"provider", s.Provider, "name", s.WorkerName, "models", strings.Join(s.Models, ","),
		"max_concurrency", s.MaxConcurrency, "backend", redacted(s.BackendURL))

	// Run gets its own context: a signal means drain, not abort.
	runCtx, abort := context.WithCancel(context.Background())
	defer abort()
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	select {
	case err := <-done:
		log.Error("worker stopped unexpectedly", "error", err)
		return 1
	case <-signals.Done():
	}
	stopSignals()
	log.Info("shutting down: draining in-flight requests", "timeout", s.DrainTimeout)
	drainCtx, cancel := context.WithTimeout(context.Background(), s.DrainTimeout)
	defer cancel()
	if err := d.Shutdown(drainCtx); err != nil {
		log.Warn("drain timed out; in-flight requests were aborted", "error", err)
	}
	abort()
	<-done
	log.Info("modelrelay-worker stopped")
	return 0
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: modelrelay-worker [flags]

Connects to a ModelRelay server over WebSocket and forwards the inference requests it
hands out to a local model backend (llama-server, vLLM, Ollama, ...).

Every setting can also come from the environment or from a TOML file given with --config
(keys are the flag names in snake_case, models an array). Precedence: flag, environment,
config file, default.

Flags:
`)
	for _, o := range options {
		head := fmt.Sprintf("--%s %s", o.flag, o.meta)
		src := "$" + o.env
		if o.def != "" {
			src += fmt.Sprintf(", default %q", o.def)
		}
		fmt.Fprintf(w, "  %-24s %s\n  %-24s %s\n", head, o.usage, "", src)
	}
	fmt.Fprintf(w, "  %-24s %s\n", "--config FILE", "TOML file with any of the settings above")
	fmt.Fprintf(w, "  %-24s %s\n", "--version", "print the version and exit")
	fmt.Fprint(w, `
Example:
  modelrelay-worker --proxy-url https://relay.example.com --worker-secret "$SECRET" \
    --backend-url http://127.0.0.1:8000 --models llama3-8b,qwen2.5-7b

With several relays (a comma list) the worker keeps a session to each; they share its
--max-concurrency slots, each relay is told the worker's whole load, and a request that
finds every slot just taken by another relay waits up to 2 s for one.

On SIGTERM the worker stops taking requests, lets in-flight ones finish for up to
--drain-timeout, then exits 0. A second signal exits at once.
`)
}

// redactedList is redacted for each URL of a comma list.
func redactedList(raw string) string {
	urls := strings.Split(raw, ",")
	for i, u := range urls {
		urls[i] = redacted(strings.TrimSpace(u))
	}
	return strings.Join(urls, ",")
}

// redacted hides a password in a URL (https://user:pass@host) before it is logged.
func redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<invalid url>"
	}
	return u.Redacted()
}
