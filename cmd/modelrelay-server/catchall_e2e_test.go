package main

// How a model finds its targets, from outside: a target that names the model serves it before
// a catch-all (models ["*"]) in either API family; the catch-all serves the models nobody
// names, and a named model whose last target left.

import (
	"fmt"
	"testing"
)

func TestE2EExactModelNameBeforeWildcard(t *testing.T) {
	t.Parallel()
	wild := newFlaky(t, "wild")
	behind := newFlaky(t, "behind-worker")
	// The catch-all is registered first: round robin over every target able to serve "demo"
	// would hand it every other request.
	r := startRelay(t, "worker_secret: wild-secret\nworker_grace: 1s\nbackends:\n"+backendYAML("wild", wild.url, `"*"`), nil)
	stop := relayWorker(t, r.addr, "wild-secret", behind.url, "demo")
	waitModel(t, r.addr, "demo")

	// served checks a 200 from target: the worker is named "worker" (a stream relayed from a
	// worker carries no header of its model server's, so the relay's own header says it).
	served := func(label string, a relayAnswer, target, model string) {
		t.Helper()
		checkServed(t, label, a, nil, model, "")
		if got := a.header.Get("X-Modelrelay-Target"); a.status == 200 && got != target {
			t.Errorf("%s: served by %q, want %q", label, got, target)
		}
	}
	anthropic := func(model, extra string) relayAnswer {
		return r.send("/v1/messages", nil, fmt.Sprintf(`{"model":%q,"max_tokens":16,"messages":[{"role":"user","content":"hi there"}]%s}`, model, extra))
	}
	for i := range 3 {
		for _, stream := range []bool{false, true} {
			label := fmt.Sprintf("request %d, stream %v", i, stream)
			var extra []string
			if stream {
				extra = []string{`"stream":true`}
			}
			served("openai "+label, r.chat("demo", extra...), "worker", "demo")
			a := anthropic("demo", fmt.Sprintf(`,"stream":%v`, stream))
			served("anthropic "+label, a, "worker", "demo")
			if a.header.Get("X-Modelrelay-Translated") != "anthropic->openai" {
				t.Errorf("anthropic %s: not translated for the OpenAI-only server: %s", label, a)
			}
		}
	}
	if n := behind.count(); n != 12 {
		t.Errorf("the worker's model server got %d of the 12 requests for demo", n)
	}
	if n := wild.count(); n != 0 {
		t.Errorf("the catch-all got %d requests for a model the worker names", n)
	}

	// A model nobody names goes to the catch-all, in both families.
	served("openai, a model nobody names", r.chat("other-m"), "wild", "other-m")
	served("anthropic, a model nobody names", anthropic("other-m", ""), "wild", "other-m")

	// Once its last named target left, the catch-all serves the model rather than refusing it.
	stop()
	waitNoWorkers(t, r.addr)
	served("openai, the worker gone", r.quick("demo"), "wild", "demo")
	served("anthropic, the worker gone", anthropic("demo", ""), "wild", "demo")
}
