package main

// What translation costs, from outside: the real binary translates large bodies of many
// content blocks for targets that speak only the other API family. Its peak RSS (VmHWM, one
// fresh process per case) stays proportional to the body; a body of more blocks than a
// translation takes is refused with 413 in the route's dialect before any work; translated
// bodies count against body_budget_bytes; and a timeout the relay caused leaves the target's
// breaker closed. `modelrelay-bench translation` runs the memory cases at the full 29 MB.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"modelrelay/relay/translate/translatetest"
)

// translatedRoute is one direction of translation: the client's route, and the model served
// by a target of the other family.
type translatedRoute struct {
	name, path, model, target string
}

// translatedKey is what every request carries: the Anthropic-only fake wants a key, and the relay
// moves a bearer token to x-api-key when it translates.
var translatedKey = http.Header{"Authorization": {"Bearer sk-test"}}

var translatedRoutes = []translatedRoute{
	{"anthropic->openai", "/v1/messages", "to-openai", "openai-only"},
	{"openai->anthropic", "/v1/chat/completions", "to-anthropic", "anthropic-only"},
}

func megabytes(b []byte) float64 { return float64(len(b)) / 1e6 }

// translationConfig serves to-openai from an OpenAI-only target and to-anthropic from an
// Anthropic-only one; openai is the first (its breaker and held calls are what tests watch).
func translationConfig(t *testing.T, top string) (string, *flaky) {
	openai := newFlaky(t, "openai-only")
	anthropic := newFakeModel(t, "anthropic")
	return fmt.Sprintf("%sbackends:\n"+
		"  - name: openai-only\n    url: %s\n    models: [to-openai]\n    dialects: [openai]\n"+
		"  - name: anthropic-only\n    url: %s\n    models: [to-anthropic]\n    dialects: [anthropic]\n",
		top, openai.url, anthropic.url), openai
}

// peakGrowth starts a relay on config, sends n copies of body at once on route, and returns
// the answers and how far the relay's peak RSS rose over its RSS just before.
func peakGrowth(t *testing.T, config string, route translatedRoute, body []byte, n int) ([]relayAnswer, int64, *relayProc) {
	t.Helper()
	r := startRelay(t, config, nil)
	small := string(translatetest.ManyBlocks(route.model, 4000, 100))
	for range 5 { // connections, buffers and first-use allocations exist before the baseline
		if a := r.send(route.path, translatedKey, small); a.status != 200 {
			t.Fatalf("%s warm-up: %v", route.name, a)
		}
	}
	// The high-water mark starts again from here (Linux: "5" resets it to the RSS now).
	if err := os.WriteFile("/proc/"+strconv.Itoa(r.pid)+"/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("reset the peak RSS: %v", err)
	}
	before := rssBytes(t, r.pid)
	answers := make([]relayAnswer, n)
	text := string(body)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i] = r.send(route.path, translatedKey, text) })
	}
	wg.Wait()
	return answers, peakRSSBytes(t, r.pid) - before, r
}

// TestE2ETranslationMemoryStaysProportional scales the case (29 MB bodies against a
// 32 MiB limit) down to 12 MiB: large enough that the process's own few MiB do not blur the
// ratios. A body of 270,000 tiny blocks is refused before it is mapped; one of 9,000 blocks is
// translated with a peak under 3 times its size, six at once under 17 times (500 MB for
// 29 MB bodies), each answered or refused with 503, and the target's breaker stays closed.
func TestE2ETranslationMemoryStaysProportional(t *testing.T) {
	config, _ := translationConfig(t, "")
	const size = 12 << 20
	for _, route := range translatedRoutes {
		tiny := translatetest.ManyBlocks(route.model, size, 20)
		answers, growth, _ := peakGrowth(t, config, route, tiny, 1)
		a := answers[0]
		checkDialectError(t, route.name+" tiny blocks", route.path, rawAnswer{status: a.status, header: a.header, body: a.body, err: a.err}, 413)
		if !strings.Contains(string(a.body), "to translate: at most 10000 in all") {
			t.Errorf("%s: the 413 does not name the bound: %s", route.name, a.body)
		}
		t.Logf("%s, %.1f MB of tiny blocks: %d, peak RSS +%d MiB (%.1f× the body)", route.name, megabytes(tiny), a.status,
			growth>>20, float64(growth)/float64(len(tiny)))
		if growth > 3*int64(len(tiny)) {
			t.Errorf("%s: refusing %.1f MB of tiny blocks took the peak RSS up %d MiB (bound: 3× the body)", route.name, megabytes(tiny), growth>>20)
		}

		body := translatetest.ManyBlocks(route.model, size, 1300) // about 9,300 blocks: under the bound
		answers, growth, _ = peakGrowth(t, config, route, body, 1)
		t.Logf("%s, %.1f MB in %d-byte blocks: %d, peak RSS +%d MiB (%.1f× the body)", route.name, megabytes(body), 1300,
			answers[0].status, growth>>20, float64(growth)/float64(len(body)))
		if answers[0].status != 200 {
			t.Errorf("%s: one large body: %v", route.name, answers[0])
		}
		if growth > 3*int64(len(body)) {
			t.Errorf("%s: translating one body of %.1f MB took the peak RSS up %d MiB (bound: 3× the body)", route.name, megabytes(body), growth>>20)
		}

		answers, growth, r := peakGrowth(t, config, route, body, 6)
		ok := 0
		for i, a := range answers {
			switch {
			case a.status == 200:
				ok++
			case a.status == 503 && a.retryAfter() > 0:
			default:
				t.Errorf("%s: six at once, answer %d: %v (want 200, or 503 with Retry-After)", route.name, i, a)
			}
		}
		limit := int64(len(body)) * 500 / 29
		t.Logf("%s, six bodies of %.1f MB at once: %d answered, peak RSS +%d MiB (%.1f× one body; bound %.1f×)", route.name,
			megabytes(body), ok, growth>>20, float64(growth)/float64(len(body)), 500.0/29)
		if growth > limit {
			t.Errorf("%s: six bodies of %.1f MB at once took the peak RSS up %d MiB (bound: %d MiB, as 500 MB is for 29 MB bodies)",
				route.name, megabytes(body), growth>>20, limit>>20)
		}
		if st := breakerMetric(t, r.addr, route.target); st != 0 {
			t.Errorf("%s: the target's breaker is %v after six large bodies at once (want 0, closed)", route.name, st)
		}
	}
}

// TestE2ETranslationCostBound: a translated request may hold 10,000 messages, content blocks
// and tools in all; one more is 413 in the route's dialect, naming the bound.
func TestE2ETranslationCostBound(t *testing.T) {
	t.Parallel()
	config, _ := translationConfig(t, "")
	r := startRelay(t, config, nil)
	for _, route := range translatedRoutes {
		blocks := func(n int) string { // one message of n text blocks: n+1 items
			return `{"model":"` + route.model + `","max_tokens":8,"messages":[{"role":"user","content":[` +
				strings.Repeat(`{"type":"text","text":"x"},`, n-1) + `{"type":"text","text":"x"}]}]}`
		}
		if a := r.send(route.path, translatedKey, blocks(9999)); a.status != 200 {
			t.Errorf("%s: 10,000 items: %v", route.name, a)
		}
		a := r.send(route.path, translatedKey, blocks(10000))
		checkDialectError(t, route.name+" 10,001 items", route.path, rawAnswer{status: a.status, header: a.header, body: a.body, err: a.err}, 413)
		if !strings.Contains(string(a.body), "too many messages, content blocks and tools to translate: at most 10000 in all") {
			t.Errorf("%s: the 413 does not say the bound: %s", route.name, a.body)
		}
	}
}

// TestE2ETranslatedBodiesCountAgainstTheBodyBudget: a translated body is held for the whole
// request (its target may need it again), so it counts against body_budget_bytes like a body
// being read: with two translated requests held at their target, a third finds the budget
// spent and gets 503 with Retry-After; once they are answered the budget is whole again.
func TestE2ETranslatedBodiesCountAgainstTheBodyBudget(t *testing.T) {
	t.Parallel()
	const size = 1 << 20
	config, openai := translationConfig(t, fmt.Sprintf("max_body_bytes: %d\nbody_budget_bytes: %d\n", 2*size, size*5/2))
	r := startRelay(t, config, nil)
	body := string(translatetest.ManyBlocks("to-openai", size, 1000))
	entered, release := openai.holdCalls()
	defer release()
	held := make([]relayAnswer, 2)
	var wg sync.WaitGroup
	for i := range held {
		wg.Go(func() { held[i] = r.send("/v1/messages", translatedKey, body) })
		<-entered // one at a time: each is read, translated and at the target before the next
	}
	third := sendWithin(10*time.Second, r.addr, "", "/v1/messages", translatedKey, body) // not held: refused at once
	checkDialectError(t, "third body", "/v1/messages", rawAnswer{status: third.status, header: third.header, body: third.body, err: third.err}, 503)
	if third.retryAfter() <= 0 {
		t.Errorf("the budget's 503 has no Retry-After: %v", third)
	}
	release()
	wg.Wait()
	for i, a := range held {
		if a.status != 200 {
			t.Errorf("held request %d: %v", i, a)
		}
	}
	eventually(t, 10*time.Second, "the budget given back", func() (bool, string) {
		v := metricSum(t, r.addr, "modelrelay_request_body_bytes_held")
		return v == 0, fmt.Sprint(v)
	})
	if a := r.send("/v1/messages", translatedKey, body); a.status != 200 {
		t.Errorf("after the held ones: %v", a)
	}
}

// pausedBody is a request body sent in two halves with a pause between: a slow client.
type pausedBody struct {
	rest  []byte
	half  int
	pause time.Duration
}

func (p *pausedBody) Read(b []byte) (int, error) {
	if len(p.rest) == 0 {
		return 0, io.EOF
	}
	if p.half == 0 && p.pause > 0 {
		time.Sleep(p.pause)
		p.pause = 0
	}
	n := len(p.rest)
	if p.half > 0 {
		n = p.half
	}
	n = copy(b, p.rest[:n])
	p.rest = p.rest[n:]
	p.half = max(p.half-n, 0)
	return n, nil
}

// TestE2ERelayTimeoutsLeaveTheBreakerClosed: request_timeout runs from the request's arrival,
// so the relay's own time (here a client slow to send its body) is part of it. A target that
// had the whole request for only what was left of it is not failing, and its breaker stays
// closed however many such requests time out; a target that sits on whole requests it has had
// for most of the timeout is failing, and its breaker opens.
func TestE2ERelayTimeoutsLeaveTheBreakerClosed(t *testing.T) {
	t.Parallel()
	target := newFlaky(t, "slow")
	target.setDelay(800 * time.Millisecond)
	r := startRelay(t, fmt.Sprintf("request_timeout: 2s\nbreaker_failures: 2\nbreaker_cooldown: 60s\n"+
		"backends:\n  - name: slow\n    url: %s\n    models: [m]\n", target.url), nil)
	body := []byte(chatJSON("m"))
	answers := make([]relayAnswer, 3)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			// 1.6 s to send the body, 0.8 s for the target to answer: past the 2 s.
			slow := &pausedBody{rest: body, half: len(body) / 2, pause: 1600 * time.Millisecond}
			answers[i] = sendReader(time.Minute, r.addr, "", "/v1/chat/completions", nil, slow)
		})
	}
	wg.Wait()
	for i, a := range answers {
		if a.status != 504 {
			t.Errorf("slow client %d: %v (want 504)", i, a)
		}
	}
	if st := breakerMetric(t, r.addr, "slow"); st != 0 {
		t.Fatalf("breaker %v after timeouts the slow clients caused (want 0, closed)", st)
	}
	if a := r.chat("m"); a.status != 200 {
		t.Fatalf("the target after the slow clients: %v", a)
	}

	target.setDelay(0)
	entered, release := target.holdCalls()
	defer release()
	silent := make([]relayAnswer, 2)
	for i := range silent {
		wg.Go(func() { silent[i] = r.chat("m") })
	}
	<-entered
	<-entered
	wg.Wait()
	for i, a := range silent {
		if a.status != 504 {
			t.Errorf("request %d the target sat on: %v (want 504)", i, a)
		}
	}
	if st := breakerMetric(t, r.addr, "slow"); st != 1 {
		t.Errorf("breaker %v after the target sat on two whole requests past the timeout (want 1, open)", st)
	}
}
