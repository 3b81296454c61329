package main

// `modelrelay-bench fake-upstream` serves relay/demo's model server on its own: the model
// that `modelrelay-server --demo` has built in, for trying a worker daemon (or anything else
// that calls a model server) without a GPU:
//
//	modelrelay-bench fake-upstream -listen 127.0.0.1:8000
//
// With -speaks openai it answers chat completions alone (llama-server's or SGLang's
// surface), for trying the relay's translation: Claude Code and Codex CLI through it.
//
//	modelrelay-worker --proxy-url http://127.0.0.1:8080 --worker-secret S \
//	    --backend-url http://127.0.0.1:8000 --models demo

import (
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	"modelrelay/relay/demo"
)

func fakeUpstreamMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("modelrelay-bench fake-upstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8000", "address to serve on")
	model := fs.String("model", demo.DefaultModel, "the one model served")
	first := fs.Duration("first-token-delay", demo.DefaultFirstToken, "wait before the first token (0 = none)")
	per := fs.Duration("token-delay", demo.DefaultPerToken, "wait between tokens (0 = none)")
	speaks := fs.String("speaks", "both", "API families served: both, openai (chat completions only) or anthropic (messages only); the other's paths answer 404")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *first < 0 || *per < 0 || *model == "" {
		fmt.Fprintln(stderr, "modelrelay-bench fake-upstream: takes only flags; delays must not be negative, -model not empty")
		return 2
	}
	switch *speaks {
	case "both":
		*speaks = ""
	case "openai", "anthropic":
	default:
		fmt.Fprintf(stderr, "modelrelay-bench fake-upstream: -speaks %q: want both, openai or anthropic\n", *speaks)
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "modelrelay-bench fake-upstream: listen:", err)
		return 1
	}
	fmt.Fprintf(stderr, "fake model server for model %q on http://%s (first token after %s, then one every %s)\n",
		*model, ln.Addr(), *first, *per)
	opts := demo.Options{Model: *model, FirstToken: noneIfZero(*first), PerToken: noneIfZero(*per), Speaks: *speaks}
	if err := serveUntilSignal(ln, demo.New(opts)); err != nil {
		fmt.Fprintln(stderr, "modelrelay-bench fake-upstream:", err)
		return 1
	}
	return 0
}

// noneIfZero maps the flag's "0 = none" onto demo.Options, where zero takes the default.
func noneIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
