// Command modelrelay-worker connects a local model backend (llama-server, vLLM, Ollama, …) to a
// ModelRelay server. It dials out over WebSocket, so the GPU box needs no inbound port.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"modelrelay/cmd/internal/gcfloor"
	"modelrelay/cmd/internal/pprofserve"
	"modelrelay/relay/daemon"
)

// version and commit are stamped at build time (make build, make dist, deploy/Dockerfile) with
// -ldflags "-X main.version=… -X main.commit=…"; --version prints both, as the server does.
var version, commit = "dev", "unknown"

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
		fmt.Fprintf(stdout, "modelrelay-worker %s (%s)\n", version, commit)
		return 0
	case errors.As(err, &uerr):
		fmt.Fprintf(stderr, "modelrelay-worker: %v (see --help)\n", err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "modelrelay-worker: %v\n", err)
		return 1
	}
	log := newLogger(s, stderr)
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
	if addr, ok := lookupEnv(pprofserve.EnvVar); ok && addr != "" {
		pprofserve.Start(runCtx, addr, log)
	}
	defer gcfloor.Start(gcfloor.Floor)()
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

// newLogger writes the log as text (key=value) or JSON lines, at the configured level.
func newLogger(s settings, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: s.LogLevel, ReplaceAttr: readableDuration}
	if s.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// readableDuration logs a duration as Go duration text ("2s"): slog's JSON handler would
// write nanoseconds, which nobody reads at a glance and which differ from the text format.
func readableDuration(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// usage prints --help in the server's layout: sections of flags, each flag's name in a
// 30-column field, its description beside it and its variable and default below.
func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: modelrelay-worker [flags]

modelrelay-worker connects a local model backend (llama-server, vLLM, Ollama, ...)
to a ModelRelay server. It dials out over a WebSocket, so the GPU box needs no
inbound port, and forwards the inference requests the server hands out to the
backend, streaming the answers back as they are produced.

Every setting comes from a flag, an environment variable or the TOML file given
with --config (keys are the flag names in snake_case, models an array): a flag
beats the environment, which beats the file, which beats the default. Durations
take Go syntax (90s, 5m) or a whole number of seconds. Lists are comma-separated.
`)
	section := ""
	for _, o := range options {
		if o.section != section {
			section = o.section
			fmt.Fprintf(w, "\n%s:\n", section)
		}
		shown := o.shown
		if shown == "" {
			shown = cmp.Or(o.def, "none")
		}
		flagEntry(w, "--"+o.flag+" "+o.meta, append(slices.Clone(o.usage), "env "+o.env+", default "+shown))
	}
	fmt.Fprint(w, "\nConfig file:\n")
	flagEntry(w, "--config FILE", []string{"TOML file with any of the settings above", "default none"})
	fmt.Fprintln(w)
	flagEntry(w, "-h, --help", []string{"print this help and exit"})
	flagEntry(w, "--version", []string{"print the version and exit"})
	fmt.Fprint(w, `
Example:
  modelrelay-worker --proxy-url https://relay.example.com --worker-secret "$SECRET" \
    --backend-url http://127.0.0.1:8000 --models llama3-8b,qwen2.5-7b

With several relays (a comma list) the worker keeps a session to each; they share
its --max-concurrency slots, each relay is told the worker's whole load, and a
request that finds every slot just taken by another relay waits up to 2 s for one.

On SIGTERM the worker stops taking requests, lets in-flight ones finish for up to
--drain-timeout, then exits 0. A second signal exits at once.
`)
}

// flagEntry writes one flag: head in a 30-column field and the lines beside it, or below it
// when head is wider.
func flagEntry(w io.Writer, head string, lines []string) {
	if len(head) > 30 {
		fmt.Fprintf(w, "  %s\n", head)
		head = ""
	}
	for _, line := range lines {
		fmt.Fprintf(w, "  %-30s %s\n", head, line)
		head = ""
	}
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
