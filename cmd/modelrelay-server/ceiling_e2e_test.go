package main

// Priority ceilings through the real binary: a request may ask for a lower class than its
// default, never for a higher one than its ceiling (a key's max_priority, else its priority,
// else normal; without a key, max_client_priority). Every test queues requests one by one on
// a backend of capacity 1 held busy, then releases it, and reads the order in which the
// backend served them: the order of service is the class each request waited in.

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// queuedClient is one request of an order-of-service test: a tag the backend records, and
// the headers (a key, a priority) and body members it is sent with.
type queuedClient struct {
	tag    string
	header http.Header
	extra  []string
}

// serviceOrder holds solo's first call, queues clients one after another (each waits in the
// queue before the next is sent), releases solo and returns the tags in the order solo served
// them, the held request first. send posts one request.
func serviceOrder(t *testing.T, addr string, solo *flaky, send func(c queuedClient) relayAnswer, held queuedClient,
	clients []queuedClient) []string {
	t.Helper()
	entered, release := solo.holdCalls()
	defer release()
	before := len(solo.calls())
	answers := make(chan relayAnswer, len(clients)+1)
	go func() { answers <- send(held) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first request never reached the backend")
	}
	for i, c := range clients {
		go func() { answers <- send(c) }()
		waitQueued(t, addr, i+1)
	}
	release()
	for range len(clients) + 1 {
		if a := <-answers; a.err != nil || a.status != 200 {
			t.Fatalf("a queued request was not served: %s", a)
		}
	}
	// One at a time, each after the last was answered: the order of arrival is the order of
	// service (the order of the record is only nearly so, as it is written after the answer).
	calls := solo.calls()[before:]
	slices.SortFunc(calls, func(a, b flakyCall) int { return a.Arrived.Compare(b.Arrived) })
	var order []string
	for _, c := range calls {
		order = append(order, tagOf(c))
	}
	return order
}

// waitCapped waits until the log holds n debug lines of a capped priority (the log reaches
// the test a little after the requests it tells of), and fails if it ever holds more.
func waitCapped(t *testing.T, logs *lockedBuffer, n int) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprint(n, " lines of a capped priority"), func() (bool, string) {
		got := strings.Count(logs.String(), "priority capped at the client's ceiling")
		if got > n {
			t.Fatalf("%d debug lines say a priority was capped, want %d", got, n)
		}
		return got == n, fmt.Sprint(got, " lines")
	})
}

// soloConfig is a backend of capacity 1 serving sm, with aging slow enough that no waiter
// changes class while a test runs, and more top-level YAML.
func soloConfig(solo *flaky, extra string) string {
	return extra + "priority_aging: 10m\nqueue_timeout: 60s\nbackends:\n" + backendYAML("solo", solo.url, "sm") +
		"    max_concurrent: 1\n"
}

// Ten anonymous clients asking for high cannot pass a normal one that waits before them once
// max_client_priority is normal: they are served as normal, in arrival order. Asking for low
// still counts. With the default (high) they pass it, as before the setting.
func TestE2EMaxClientPriorityCapsAnonymousClients(t *testing.T) {
	t.Parallel()
	clients := []queuedClient{
		{tag: "low", extra: []string{`"x_pool_options":{"priority":"low"}`}},
		{tag: "normal"},
	}
	var highs []string
	for i := range 10 {
		c := queuedClient{tag: fmt.Sprint("high-", i)}
		if i%2 == 0 {
			c.header = http.Header{"X-Modelrelay-Priority": {"high"}}
		} else {
			c.extra = []string{`"x_pool_options":{"priority":"high"}`}
		}
		clients = append(clients, c)
		highs = append(highs, c.tag)
	}
	for _, tc := range []struct {
		name, setting string
		want          []string
	}{
		{"normal", "max_client_priority: normal\n", slices.Concat([]string{"held", "normal"}, highs, []string{"low"})},
		{"default", "", slices.Concat([]string{"held"}, highs, []string{"normal", "low"})}, // high, as before
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			solo := newFlaky(t, "solo")
			r := startRelay(t, soloConfig(solo, tc.setting), nil)
			send := func(c queuedClient) relayAnswer {
				return r.send("/v1/chat/completions", c.header, schedBody(c.tag, c.extra...))
			}
			got := serviceOrder(t, r.addr, solo, send, queuedClient{tag: "held"}, clients)
			if !slices.Equal(got, tc.want) {
				t.Errorf("order of service %q, want %q", got, tc.want)
			}
			wantCapped := map[bool]int{true: 10, false: 0}[tc.setting != ""]
			waitCapped(t, r.logs, wantCapped)
		})
	}
}

// A key's requests are capped by the key: a key with priority low and max_priority normal
// waits as low by default, may ask for normal, and asking for high is served as normal; a key
// without a ceiling or a priority may not ask above normal; a key with priority high keeps it
// (max_client_priority, low here, is for requests without a key). PATCH moves the ceiling.
func TestE2EKeyPriorityCeiling(t *testing.T) {
	t.Parallel()
	solo := newFlaky(t, "solo")
	r := startKeyRelay(t, soloConfig(solo, "max_client_priority: low\n"), map[string]string{"MODELRELAY_REQUIRE_API_KEYS": "true"})
	plain := createKey(t, r.addr, `{"name":"plain"}`)
	capped := createKey(t, r.addr, `{"name":"capped","priority":"low","max_priority":"normal"}`)
	vip := createKey(t, r.addr, `{"name":"vip","priority":"high"}`)
	listed := listKeys(t, r.addr)
	if got := listed[capped.ID]; got["priority"] != "low" || got["max_priority"] != "normal" {
		t.Errorf("GET /admin/keys shows the capped key as %v", got)
	}
	if got := listed[plain.ID]; got["max_priority"] != nil {
		t.Errorf("GET /admin/keys shows a key without a ceiling as %v", got)
	}

	client := func(tag, secret, asked string, extra ...string) queuedClient {
		h := keyHeader(secret, "bearer")
		if asked != "" {
			h.Set("X-Modelrelay-Priority", asked)
		}
		return queuedClient{tag: tag, header: h, extra: extra}
	}
	send := func(c queuedClient) relayAnswer {
		return r.send("/v1/chat/completions", c.header, schedBody(c.tag, c.extra...))
	}
	got := serviceOrder(t, r.addr, solo, send, client("held", plain.Secret, ""), []queuedClient{
		client("capped-default", capped.Secret, ""),
		client("plain-normal", plain.Secret, ""),
		client("capped-asks-high", capped.Secret, "high"),
		client("plain-asks-high", plain.Secret, "", `"x_pool_options":{"priority":"high"}`),
		client("capped-asks-normal", capped.Secret, "normal"),
		client("vip", vip.Secret, ""),
	})
	want := []string{"held", "vip", "plain-normal", "capped-asks-high", "plain-asks-high", "capped-asks-normal", "capped-default"}
	if !slices.Equal(got, want) {
		t.Errorf("order of service %q, want %q", got, want)
	}
	waitCapped(t, r.logs, 2)

	if st, b := adminCall(t, r.addr, "PATCH", "/admin/keys/"+capped.ID, e2eAdmin, `{"max_priority":"high"}`); st != 200 ||
		!strings.Contains(string(b), `"max_priority":"high"`) {
		t.Fatalf("PATCH max_priority: %d %s", st, b)
	}
	got = serviceOrder(t, r.addr, solo, send, client("held-2", plain.Secret, ""), []queuedClient{
		client("plain-normal-2", plain.Secret, ""),
		client("capped-asks-high-2", capped.Secret, "high"),
	})
	if want := []string{"held-2", "capped-asks-high-2", "plain-normal-2"}; !slices.Equal(got, want) {
		t.Errorf("after PATCH max_priority high: order of service %q, want %q", got, want)
	}
}
