package main

// How a model finds its targets, from outside: a target that names the model serves it before
// a catch-all (models ["*"]) in either API family and on every front; the catch-all serves
// the models nobody names, and a named model whose last target left.

import (
	"fmt"
	"net/http"
	"testing"
)

// catchAllConfig is a relay with a catch-all static backend at url, registered before any
// worker: round robin over every target able to serve a model would hand it every other
// request.
func catchAllConfig(url string) string {
	return "worker_secret: wild-secret\nworker_grace: 1s\nbackends:\n" + backendYAML("wild", url, `"*"`)
}

func TestE2EExactModelNameBeforeWildcard(t *testing.T) {
	t.Parallel()
	wild := newFlaky(t, "wild")
	behind := newFlaky(t, "behind-worker")
	r := startRelay(t, catchAllConfig(wild.url), nil)
	stop := relayWorker(t, r.addr, "wild-secret", behind.url, "demo")
	waitModel(t, r.addr, "demo")
	checkExactBeforeCatchAll(t, "relay host", func(path, body string) relayAnswer { return r.send(path, nil, body) })
	if n, w := behind.count(), wild.count(); n != 12 || w != 2 {
		t.Errorf("the worker's model server got %d of the 12 requests for demo, the catch-all %d (want the 2 for other-m)", n, w)
	}

	// Once its last named target left, the catch-all serves the model rather than refusing it.
	stop()
	waitNoWorkers(t, r.addr)
	checkServedBy(t, "openai, the worker gone", r.quick("demo"), "wild", "demo")
	checkServedBy(t, "anthropic, the worker gone", r.send("/v1/messages", nil, messagesJSON("demo", false)), "wild", "demo")
}

// On the AppProxy fronts (the apex and an aggregation host route by model across circuits,
// then the relay's own pool) the same rule holds: it is the pool's, whatever the front.
func TestE2EExactModelNameBeforeWildcardOnAggregationHosts(t *testing.T) {
	t.Parallel()
	wild := newFlaky(t, "wild")
	behind := newFlaky(t, "behind-worker")
	e := startE2E(t, e2eOptions{env: map[string]string{"MODELRELAY_CONFIG": writeConfig(t, catchAllConfig(wild.url))}})
	relayWorker(t, e.addr, "wild-secret", behind.url, "demo")
	waitModel(t, e.addr, "demo")
	for _, host := range []string{e2eAggHost, e2eApex} {
		checkExactBeforeCatchAll(t, host, func(path, body string) relayAnswer {
			status, h, b := e.do(http.MethodPost, host, path, http.Header{"Content-Type": {"application/json"}}, []byte(body))
			return relayAnswer{status: status, header: h, body: b}
		})
	}
	if n := wild.count(); n != 2*2 { // each host: one model nobody names, in two families
		t.Errorf("the catch-all got %d requests, want 4", n)
	}
}

// messagesJSON is an Anthropic Messages body for model.
func messagesJSON(model string, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":16,"stream":%v,"messages":[{"role":"user","content":"hi there"}]}`, model, stream)
}

// checkServedBy checks a 200 for model from target (the worker is named "worker"; a stream
// relayed from a worker carries no header of its model server's, so the relay's own says it).
func checkServedBy(t *testing.T, label string, a relayAnswer, target, model string) {
	t.Helper()
	checkServed(t, label, a, nil, model, "")
	if got := a.header.Get("X-Modelrelay-Target"); a.status == 200 && got != target {
		t.Errorf("%s: served by %q, want %q", label, got, target)
	}
}

// checkExactBeforeCatchAll sends demo (named by the worker) three times each way in both
// families, and a model nobody names in both: the first go to the worker, the last to the
// catch-all.
func checkExactBeforeCatchAll(t *testing.T, front string, send func(path, body string) relayAnswer) {
	t.Helper()
	for i := range 3 {
		for _, stream := range []bool{false, true} {
			label := fmt.Sprintf("%s, request %d, stream %v", front, i, stream)
			var extra []string
			if stream {
				extra = []string{`"stream":true`}
			}
			checkServedBy(t, "openai "+label, send("/v1/chat/completions", chatJSON("demo", extra...)), "worker", "demo")
			a := send("/v1/messages", messagesJSON("demo", stream))
			checkServedBy(t, "anthropic "+label, a, "worker", "demo")
			if a.header.Get("X-Modelrelay-Translated") != "anthropic->openai" {
				t.Errorf("anthropic %s: not translated for the OpenAI-only server: %s", label, a)
			}
		}
	}
	checkServedBy(t, front+", openai, a model nobody names", send("/v1/chat/completions", chatJSON("other-m")), "wild", "other-m")
	checkServedBy(t, front+", anthropic, a model nobody names", send("/v1/messages", messagesJSON("other-m", false)), "wild", "other-m")
}
