package main

// AppProxy mode, data plane driven by events: route updates with weights, removal draining, replica
// health.

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"modelrelay/protocol"
)

func TestE2ERouteUpdateTrafficRatio(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	a, b := newReplica(t, "a", "m"), newReplica(t, "b", "m")
	c := newCircuit("weighted")
	c.public = true
	e.createAndAck(c) // new inference circuits arrive without routes
	st, h, body := e.chat(circuitHost("weighted"), "m", nil)
	checkProblem(t, "no routes yet", st, h, body, problemWant{503, "appproxy/worker-not-available", "Worker not available."})

	routes := routesJSON(c.id, []route{{port: a.port(), ratio: 1}, {port: b.port(), ratio: 3}})
	if err := e.coord.UpdateRoutes(context.Background(), e.authority, c.id, routes, protocol.FormatPayload); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "both replicas in the pool", func() (bool, string) {
		v := e.adminCircuit(c.id)
		rs, _ := v["routes"].([]any)
		js, _ := json.Marshal(v)
		return len(rs) == 2, string(js)
	})
	a0, b0 := a.chats.Load(), b.chats.Load()
	for i := range 400 {
		if st, _, body := e.chat(circuitHost("weighted"), "m", nil); st != 200 {
			t.Fatalf("request %d: %d %s", i, st, body)
		}
	}
	na, nb := a.chats.Load()-a0, b.chats.Load()-b0
	t.Logf("traffic_ratio 1:3 over 400 sequential requests: a=%d b=%d", na, nb)
	if na+nb != 400 || na == 0 {
		t.Fatalf("a=%d b=%d, want 400 in all", na, nb)
	}
	if ratio := float64(nb) / float64(na); ratio < 2.7 || ratio > 3.3 {
		t.Errorf("b/a = %.2f (a=%d b=%d), want 3 within 10%%", ratio, na, nb)
	}
}

func TestE2ERemovalDrainsPool(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	rep := newReplica(t, "r", "m")
	c := newCircuit("leaving", route{port: rep.port()})
	c.public = true
	e.createAndAck(c)
	entered, release := rep.holdChats()
	defer release()

	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := e.send(context.Background(), "POST", circuitHost("leaving"), "/v1/chat/completions", withJSON(nil), chatBody("m", false))
		if err != nil {
			done <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{status: resp.StatusCode, body: string(b), err: err}
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the in-flight request never reached the replica")
	}
	if err := e.coord.RemoveCircuit(context.Background(), e.authority, c.id, protocol.FormatArgs); err != nil {
		t.Fatal(err)
	}
	// Pass-through /health is not held by the replica, so polling never blocks on it.
	eventually(t, 10*time.Second, "the circuit host to be unknown", func() (bool, string) {
		st, _, body := e.do("GET", circuitHost("leaving"), "/health", nil, nil)
		return st == 400, st2s(st, "", body)
	})
	st, h, body := e.chat(circuitHost("leaving"), "m", nil)
	checkProblem(t, "new request after removal", st, h, body, problemWant{400, "generic-bad-request", "E20009: Subdomain leaving not registered"})
	release()
	select {
	case r := <-done:
		if r.err != nil || r.status != 200 || !strings.Contains(r.body, `"replica":"r"`) {
			t.Errorf("in-flight request across the removal: %d %q %v", r.status, r.body, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the in-flight request never finished")
	}
}

// routeHealth finds the admin view of the route whose fields mention addr.
func routeHealth(e *e2eEnv, circuitID, addr string) (healthy, found bool) {
	v := e.adminCircuit(circuitID)
	rs, _ := v["routes"].([]any)
	for _, r := range rs {
		js, _ := json.Marshal(r)
		if strings.Contains(string(js), addr) {
			h, _ := fieldCI(r, "healthy")
			return h == true, true
		}
	}
	return false, false
}

func TestE2EDeadReplicaLeavesAndReturns(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	a, b := newReplica(t, "a", "m"), newReplica(t, "b", "m")
	c := newCircuit("flaky", route{port: a.port()}, route{port: b.port()})
	c.public = true
	e.createAndAck(c)
	eventually(t, 10*time.Second, "both routes healthy", func() (bool, string) {
		ha, _ := routeHealth(e, c.id, a.addr)
		hb, _ := routeHealth(e, c.id, b.addr)
		return ha && hb, "a=" + boolS(ha) + " b=" + boolS(hb)
	})

	// Warm both replicas' keep-alive connections, then kill a between requests: nothing is in
	// flight on it, so no client has a reason to see an error.
	for range 8 {
		e.chat(circuitHost("flaky"), "m", nil)
	}
	a.close()
	aClosed := a.chats.Load()
	failures := 0
	for i := range 20 {
		if st, h, body := e.chat(circuitHost("flaky"), "m", nil); st != 200 {
			failures++
			t.Errorf("request %d right after a died (b is healthy): %s", i, st2s(st, h.Get("X-Replica"), body))
		}
	}
	// One probe interval is 200 ms; the bound below only absorbs scheduling under -race.
	eventually(t, 3*time.Second, "the dead replica marked unhealthy", func() (bool, string) {
		h, found := routeHealth(e, c.id, a.addr)
		return found && !h, "healthy=" + boolS(h) + " found=" + boolS(found)
	})
	aDead := a.chats.Load()
	if aDead != aClosed {
		t.Errorf("a closed listener received %d requests", aDead-aClosed)
	}
	for i := range 50 {
		st, h, body := e.chat(circuitHost("flaky"), "m", nil)
		if st != 200 || h.Get("X-Replica") != "b" {
			t.Fatalf("request %d with a dead: %s", i, st2s(st, h.Get("X-Replica"), body))
		}
	}
	stop := make(chan struct{})
	l := e.startLoad(circuitHost("flaky"), nil, stop)
	a.restart()
	eventually(t, 10*time.Second, "the recovered replica gets traffic again", func() (bool, string) {
		h, _ := routeHealth(e, c.id, a.addr)
		return h && a.chats.Load() > aDead, "healthy=" + boolS(h)
	})
	close(stop)
	<-l.done
	if ok, fail, last := l.counts(); fail != 0 {
		t.Errorf("%d of %d requests failed while the dead replica came back; last: %s", fail, ok+fail, last)
	}
}
