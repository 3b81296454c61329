package appproxy_test

import (
	"bytes"
	"fmt"
	"time"

	"encoding/json"
	"errors"
	"modelrelay/appproxy/appproxytest"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"modelrelay/appproxy"
	"modelrelay/protocol"
)

var uuid4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestRegistrationBodyAndHeaders(t *testing.T) {
	h := newHarness(t).start()
	h.ready()
	h.eventually("a heartbeat", func() bool { return len(h.requests(http.MethodPatch)) > 0 })

	puts := h.requests(http.MethodPut)
	if len(puts) != 1 {
		t.Fatalf("%d registrations, want 1", len(puts))
	}
	put := puts[0]
	const wantBody = `{"authority":"worker-1","frontend_mode":"wildcard","protocol":"http",` +
		`"hostname":"router.example.com","tls_listen":false,"tls_advertised":true,"api_port":10201,` +
		`"port_range":null,"wildcard_domain":".models.example.com","wildcard_traffic_port":443,` +
		`"filtered_apps_only":false,"traefik_last_used_marker_path":null,` +
		`"accepted_traffics":["inference"],"app_filters":[]}`
	if string(put.Body) != wantBody || put.Path != "/api/worker" || put.Status != http.StatusOK {
		t.Fatalf("PUT %s (%d) body:\n%s", put.Path, put.Status, put.Body)
	}
	if put.Subscribers < 1 {
		t.Fatal("registered before subscribing to events")
	}
	if put.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("Content-Type %q", put.Header.Get("Content-Type"))
	}
	seen := map[string]bool{}
	for _, r := range h.coord.Requests() {
		if r.Header.Get("X-BackendAI-Token") != testSecret || r.Header.Get("Accept") != "application/json" {
			t.Fatalf("%s %s: headers %v", r.Method, r.Path, r.Header)
		}
		id := r.Header.Get("X-BackendAI-RequestID")
		if !uuid4.MatchString(id) || seen[id] {
			t.Fatalf("request id %q not a fresh uuid4", id)
		}
		seen[id] = true
		if r.Method != http.MethodPut && (len(r.Body) != 0 || r.Header.Get("Content-Type") != "") {
			t.Fatalf("%s carries a body or Content-Type", r.Method)
		}
	}
	st := h.worker.Status()
	if st.Authority != testAuthority || !uuid4.MatchString(st.WorkerID) || !st.LastHeartbeatOK {
		t.Fatalf("status %+v", st)
	}
	gets := h.requests(http.MethodGet)
	if len(gets) == 0 || gets[0].Path != "/api/worker/"+st.WorkerID+"/circuits" {
		t.Fatalf("no pull after registration: %+v", gets)
	}
	patch := h.requests(http.MethodPatch)[0]
	if patch.Path != "/api/worker/"+st.WorkerID || patch.Status != http.StatusOK {
		t.Fatalf("heartbeat %s -> %d", patch.Path, patch.Status)
	}
}

func TestEventPublishedDuringRegistrationIsNotLost(t *testing.T) {
	h := newHarness(t)
	acked := make(chan error, 1)
	h.coord.OnRegister(func(authority string) {
		// Published before the registration is even answered.
		go func() {
			_, err := h.coord.CreateCircuit(ctx(t), authority, circuitJSON("c-early", "early", "inference"), protocol.FormatArgs)
			acked <- err
		}()
	})
	h.start()
	if err := <-acked; err != nil {
		t.Fatal(err)
	}
	if !has(h.apply.Last(), "c-early") {
		t.Fatalf("last apply lacks the circuit: %+v", h.apply.Last())
	}
}

func TestCreatedEventsAreAckedInBothFormats(t *testing.T) {
	h := newHarness(t).start()
	h.ready()
	for _, f := range []protocol.Format{protocol.FormatArgs, protocol.FormatPayload} {
		id := "c-format-" + string(rune('0'+f))
		circuit := circuitJSON(id, "sub-"+id, "inference")
		ack, err := h.coord.CreateCircuit(ctx(t), testAuthority, circuit, f)
		if err != nil {
			t.Fatal(err)
		}
		env := ack.Envelope
		if env.Source != protocol.SourceWorker || env.Metadata == nil || *env.Metadata != `{"request_id":null,"user":null}` {
			t.Fatalf("ack envelope %+v", env)
		}
		if ack.Args == nil || ack.Payload == nil {
			t.Fatalf("ack lacks args or payload: %s", ack.Raw)
		}
		// Verbatim means: the circuits text as it arrived. In args that is our text with its
		// whitespace; in a payload it is what the JSON encoder of the payload left of it.
		want := "[" + string(circuit) + "]"
		if f == protocol.FormatPayload {
			var b bytes.Buffer
			_ = json.Compact(&b, []byte(want))
			want = b.String()
		}
		if ack.Args.Authority != testAuthority || ack.Args.CircuitsJSON != want {
			t.Fatalf("args do not echo the inbound circuits verbatim: %q", ack.Args.CircuitsJSON)
		}
		var inbound, echoed []any
		_ = json.Unmarshal([]byte("["+string(circuit)+"]"), &inbound)
		_ = json.Unmarshal([]byte(ack.Payload.CircuitsJSON), &echoed)
		if ack.Payload.Authority != testAuthority || !jsonEqual(inbound, echoed) {
			t.Fatalf("payload circuits differ: %s", ack.Payload.CircuitsJSON)
		}
		// The ack is only sent after Apply accepted the circuit.
		if !has(h.apply.Last(), id) {
			t.Fatalf("acked before applying %s", id)
		}
	}
	// A repeated created event is applied and acked again.
	before := len(h.apply.Calls())
	if _, err := h.coord.CreateCircuit(ctx(t), testAuthority, circuitJSON("c-format-1", "sub-c-format-1", "inference"), protocol.FormatArgs); err != nil {
		t.Fatalf("repeat not acked: %v", err)
	}
	if len(h.apply.Calls()) <= before {
		t.Fatal("repeat not applied")
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestForeignAndIgnoredEventsAreNotAcked(t *testing.T) {
	h := newHarness(t).start()
	h.ready()
	w, err := h.coord.WatchAcks(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	publish := func(name, authority string, circuit json.RawMessage) {
		msg, err := protocol.EncodeCircuitEvent(name, authority, "["+string(circuit)+"]", protocol.FormatArgs)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.coord.Publish(ctx(t), msg); err != nil {
			t.Fatal(err)
		}
	}
	publish(protocol.EventCircuitCreated, "worker-2", circuitJSON("c-foreign", "foreign", "inference"))
	publish(protocol.EventCircuitCreated, testAuthority, circuitJSON("c-interactive", "jupyter", "interactive"))
	publish(protocol.EventCircuitCreated, testAuthority, json.RawMessage(`{"id":"c-nosub","app_mode":"inference","frontend_mode":"wildcard","subdomain":null}`))
	publish("appproxy_some_future_event", testAuthority, circuitJSON("c-future", "future", "inference"))
	// Events are handled in order, so once this one is acked the others were seen.
	if _, err := h.coord.CreateCircuit(ctx(t), testAuthority, circuitJSON("c-mine", "mine", "inference"), protocol.FormatPayload); err != nil {
		t.Fatal(err)
	}
	for _, a := range h.closeWatch(w) {
		for _, id := range []string{"c-foreign", "c-interactive", "c-nosub", "c-future"} {
			if a.Has(id) {
				t.Errorf("acked %s", id)
			}
		}
	}
	for _, call := range h.apply.Calls() {
		for _, id := range []string{"c-foreign", "c-interactive", "c-nosub", "c-future"} {
			if has(call, id) {
				t.Errorf("applied %s", id)
			}
		}
	}
	if !has(h.apply.Last(), "c-mine") {
		t.Fatal("own circuit not applied")
	}
}

func TestRouteUpdateAndRemoval(t *testing.T) {
	h := newHarness(t).start()
	h.ready()
	if _, err := h.coord.CreateCircuit(ctx(t), testAuthority, circuitJSON("c-r", "r", "inference"), protocol.FormatArgs); err != nil {
		t.Fatal(err)
	}
	w, err := h.coord.WatchAcks(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	routes := json.RawMessage(`[{"route-id":"r1","session-id":"s1","kernel-host":"10.0.0.1","kernel-port":8000,"protocol":"http"},
		{"route_id":"r2","session_id":"s2","kernel_host":null,"kernel_port":8001,"protocol":"http","traffic_ratio":3.0}]`)
	if err := h.coord.UpdateRoutes(ctx(t), testAuthority, "c-r", routes, protocol.FormatPayload); err != nil {
		t.Fatal(err)
	}
	h.eventually("routes applied", func() bool {
		c, ok := find(h.apply.Last(), "c-r")
		return ok && len(c.RouteInfo) == 2
	})
	c, _ := find(h.apply.Last(), "c-r")
	if c.RouteInfo[0].Addr() != "10.0.0.1:8000" || c.RouteInfo[1].Addr() != "localhost:8001" || c.RouteInfo[1].TrafficRatio != 3 {
		t.Fatalf("routes %+v", c.RouteInfo)
	}
	if err := h.coord.RemoveCircuit(ctx(t), testAuthority, "c-r", protocol.FormatArgs); err != nil {
		t.Fatal(err)
	}
	h.eventually("removal applied", func() bool { return !has(h.apply.Last(), "c-r") })
	for _, a := range h.closeWatch(w) {
		if !a.Has("marker") {
			t.Errorf("route update or removal acked: %s", a.Raw)
		}
	}
}

func TestRouteUpdateForUnknownCircuitUpserts(t *testing.T) {
	h := newHarness(t).start()
	h.ready()
	// Assigned with no created event (lost), then a route update arrives.
	if _, err := h.coord.AddCircuit(testAuthority, circuitJSON("c-lost", "lost", "inference")); err != nil {
		t.Fatal(err)
	}
	routes := json.RawMessage(`[{"route_id":"r1","session_id":"s1","kernel_host":"10.0.0.9","kernel_port":9000,"protocol":"http"}]`)
	if err := h.coord.UpdateRoutes(ctx(t), testAuthority, "c-lost", routes, protocol.FormatArgs); err != nil {
		t.Fatal(err)
	}
	h.eventually("upsert applied", func() bool {
		c, ok := find(h.apply.Last(), "c-lost")
		return ok && len(c.RouteInfo) == 1 && c.RouteInfo[0].Addr() == "10.0.0.9:9000"
	})
}

func TestResyncHealsDroppedEvents(t *testing.T) {
	h := newHarness(t, withResync(200*time.Millisecond)).start()
	h.ready()
	if _, err := h.coord.AddCircuit(testAuthority, circuitJSON("c-dropped", "dropped", "inference")); err != nil {
		t.Fatal(err)
	}
	h.eventually("resync adds the circuit", func() bool { return has(h.apply.Last(), "c-dropped") })
	h.coord.DropCircuit(testAuthority, "c-dropped")
	h.eventually("resync removes the circuit", func() bool { return !has(h.apply.Last(), "c-dropped") })
	if h.worker.Status().Circuits != 0 {
		t.Fatalf("status %+v", h.worker.Status())
	}
}

func TestRedisLossAndReturn(t *testing.T) {
	h := newHarness(t).start()
	h.ready()
	h.stopRedis()
	h.eventually("events disconnected", func() bool { return !h.worker.Status().EventsConnected })
	// Published while Redis is down: only the pull after resubscribing can find it.
	if _, err := h.coord.AddCircuit(testAuthority, circuitJSON("c-while-down", "down", "inference")); err != nil {
		t.Fatal(err)
	}
	appproxytest.StartRedisAt(t, h.redisAddr)
	h.eventually("events reconnected", func() bool { return h.worker.Status().EventsConnected })
	h.eventually("pull after resubscribe", func() bool { return has(h.apply.Last(), "c-while-down") })
	if _, err := h.coord.CreateCircuit(ctx(t), testAuthority, circuitJSON("c-after", "after", "inference"), protocol.FormatArgs); err != nil {
		t.Fatal(err)
	}
}

func TestCoordinatorErrorsDoNotStopTheWorker(t *testing.T) {
	h := newHarness(t)
	h.coord.FailWith(http.StatusInternalServerError)
	h.start()
	h.eventually("registration retried", func() bool { return len(h.requests(http.MethodPut)) >= 3 })
	if h.worker.Status().Registered {
		t.Fatal("registered although the coordinator fails")
	}
	h.coord.FailWith(0)
	h.ready()
	h.coord.FailWith(http.StatusBadGateway)
	h.eventually("heartbeat failure noticed", func() bool { return !h.worker.Status().LastHeartbeatOK })
	// Events still work while the REST side fails.
	if _, err := h.coord.CreateCircuit(ctx(t), testAuthority, circuitJSON("c-during-500", "d", "inference"), protocol.FormatArgs); err != nil {
		t.Fatal(err)
	}
	h.coord.FailWith(0)
	h.eventually("heartbeats resume", func() bool { return h.worker.Status().LastHeartbeatOK })
}

func TestForgottenWorkerReregisters(t *testing.T) {
	h := newHarness(t).start()
	h.ready()
	first := h.worker.Status().WorkerID
	if _, err := h.coord.AddCircuit(testAuthority, circuitJSON("c-kept", "kept", "inference")); err != nil {
		t.Fatal(err)
	}
	h.coord.Forget()
	h.eventually("re-registration", func() bool {
		s := h.worker.Status()
		return s.Registered && s.WorkerID != first
	})
	h.eventually("pull after re-registration", func() bool { return has(h.apply.Last(), "c-kept") })
	h.eventually("heartbeats on the new id", func() bool {
		id := h.worker.Status().WorkerID
		for _, r := range h.requests(http.MethodPatch) {
			if r.Path == "/api/worker/"+id && r.Status == http.StatusOK {
				return true
			}
		}
		return false
	})
}

func TestGarbageOnTheChannel(t *testing.T) {
	h := newHarness(t).start()
	h.ready()
	huge := strings.Repeat("x", 1<<20)
	for _, msg := range []string{
		"not json at all",
		`{"name":"appproxy_circuit_created_event","args":"%%%"}`,
		`{"name":"appproxy_circuit_created_event","args":"` + huge + `"}`,
		`{"name":"appproxy_circuit_route_updated_event","payload":"{}"}`,
		`[]`,
	} {
		if err := h.coord.Publish(ctx(t), []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.coord.CreateCircuit(ctx(t), testAuthority, circuitJSON("c-after-garbage", "g", "inference"), protocol.FormatArgs); err != nil {
		t.Fatal(err)
	}
	logs := h.logs.String()
	if n := strings.Count(logs, "skipping malformed message"); n != 5 {
		t.Fatalf("%d malformed messages logged, want 5", n)
	}
	if len(logs) > 64<<10 {
		t.Fatalf("log grew to %d bytes: a payload was dumped", len(logs))
	}
}

func TestBadSecretIsAConfigError(t *testing.T) {
	h := newHarness(t, withSecret("wrong-secret-value"))
	h.start()
	var err error
	select {
	case err = <-h.done:
		h.done <- err
	case <-time.After(20 * time.Second):
		t.Fatal("worker kept running with a bad secret")
	}
	if !errors.Is(err, appproxy.ErrConfig) {
		t.Fatalf("error %v is not ErrConfig", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "wrong-secret-value") || strings.Contains(msg, "\n") || !strings.Contains(msg, "401") ||
		!strings.Contains(msg, "Unauthorized access") {
		t.Fatalf("error line %q", msg)
	}
}

func TestShutdownDeregisters(t *testing.T) {
	h := newHarness(t).start()
	h.ready()
	if n := h.coord.Nodes(testAuthority); n != 1 {
		t.Fatalf("nodes = %d", n)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	dels := h.requests(http.MethodDelete)
	if len(dels) != 1 || dels[0].Status != http.StatusOK {
		t.Fatalf("deregistration: %+v", dels)
	}
	if n := h.coord.Nodes(testAuthority); n != 0 {
		t.Fatalf("nodes = %d after shutdown", n)
	}
	if h.worker.Status().Registered {
		t.Fatal("still registered")
	}
}

func TestPullOnlyWorker(t *testing.T) {
	h := newHarness(t, withResync(100*time.Millisecond), func(c *appproxy.Config, _ *harness) { c.Events = nil })
	h.start()
	h.eventually("registered", func() bool { return h.worker.Status().Registered })
	if _, err := h.coord.AddCircuit(testAuthority, circuitJSON("c-pulled", "p", "inference")); err != nil {
		t.Fatal(err)
	}
	h.eventually("pulled", func() bool { return has(h.apply.Last(), "c-pulled") })
	if h.worker.Status().EventsConnected {
		t.Fatal("events reported connected without Redis")
	}
}

func TestPull404Reregisters(t *testing.T) {
	h := newHarness(t, withHeartbeat(time.Hour), withResync(100*time.Millisecond)).start()
	h.ready()
	// The one heartbeat that follows the first pull must be answered before the coordinator
	// forgets us, or it is that heartbeat, not a pull, that hears the 404.
	h.eventually("the heartbeat after the first pull", func() bool {
		return len(h.requests(http.MethodPatch)) > 0 && h.worker.Status().LastHeartbeatOK
	})
	beats := len(h.requests(http.MethodPatch))
	first := h.worker.Status().WorkerID
	h.coord.Forget(testAuthority)
	h.eventually("re-registration after a 404 pull", func() bool {
		s := h.worker.Status()
		return s.Registered && s.WorkerID != first
	})
	for _, p := range h.requests(http.MethodPatch)[beats:] {
		if p.Status != http.StatusOK {
			t.Fatalf("a heartbeat answered %d; the pull alone should have noticed", p.Status)
		}
	}
}

func TestNoAckUntilApplySucceeds(t *testing.T) {
	h := newHarness(t, withResync(100*time.Millisecond)).start()
	h.ready()
	h.apply.setFail(errors.New("pool not ready"))
	w, err := h.coord.WatchAcks(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := protocol.EncodeCircuitEvent(protocol.EventCircuitCreated, testAuthority,
		"["+string(circuitJSON("c-unready", "u", "inference"))+"]", protocol.FormatArgs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.coord.AddCircuit(testAuthority, circuitJSON("c-unready", "u", "inference")); err != nil {
		t.Fatal(err)
	}
	if err := h.coord.Publish(ctx(t), msg); err != nil {
		t.Fatal(err)
	}
	h.eventually("the failed apply", func() bool { return has(h.apply.Last(), "c-unready") })
	calls := len(h.apply.Calls())
	// Resyncs keep retrying the apply while it fails.
	h.eventually("apply retried", func() bool { return len(h.apply.Calls()) > calls })
	for _, a := range h.closeWatch(w) {
		if a.Has("c-unready") {
			t.Fatal("acked although apply failed")
		}
	}
	h.apply.setFail(nil)
	// The resync that succeeds does not ack (pulls never do); a repeat of the event does.
	if _, err := h.coord.PublishAndWaitAck(ctx(t), msg, "c-unready"); err != nil {
		t.Fatal(err)
	}
}

// A coordinator slow on REST (heartbeat and pull answered 8 s late, under the client's 10 s
// timeout) must not delay acks: the coordinator gives up on an ack after 15 s.
func TestSlowCoordinatorRESTDoesNotDelayAcks(t *testing.T) {
	h := newHarness(t, withHeartbeat(200*time.Millisecond), withResync(300*time.Millisecond)).start()
	h.ready()
	h.coord.Delay(http.MethodPatch, 8*time.Second)
	h.coord.Delay(http.MethodGet, 8*time.Second)
	defer h.coord.Delay(http.MethodPatch, 0)
	defer h.coord.Delay(http.MethodGet, 0)
	time.Sleep(500 * time.Millisecond) // a heartbeat and a pull are now waiting on the coordinator
	for i := range 6 {
		id := fmt.Sprintf("c-slow-%d", i)
		start := time.Now()
		if _, err := h.coord.CreateCircuit(ctx(t), testAuthority, circuitJSON(id, fmt.Sprintf("slow%d", i), "inference"), protocol.FormatArgs); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Errorf("%s acked after %s, want within 100 ms", id, took)
		}
	}
	// A removal is applied at once too, not after the pull.
	start := time.Now()
	if err := h.coord.RemoveCircuit(ctx(t), testAuthority, "c-slow-0", protocol.FormatArgs); err != nil {
		t.Fatal(err)
	}
	h.eventually("removal applied", func() bool { return !has(h.apply.Last(), "c-slow-0") })
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("removal applied after %s, want within 100 ms", took)
	}
}

// A pull that started before an event must not undo it when its (older) list arrives.
func TestPullStartedBeforeAnEventDoesNotUndoIt(t *testing.T) {
	h := newHarness(t, withResync(100*time.Millisecond)).start()
	h.ready()
	if _, err := h.coord.CreateCircuit(ctx(t), testAuthority, circuitJSON("c-old", "old", "inference"), protocol.FormatArgs); err != nil {
		t.Fatal(err)
	}
	h.coord.Delay(http.MethodGet, time.Second) // every pull's list is a second old when it lands
	defer h.coord.Delay(http.MethodGet, 0)
	time.Sleep(300 * time.Millisecond)
	if _, err := h.coord.CreateCircuit(ctx(t), testAuthority, circuitJSON("c-new", "new", "inference"), protocol.FormatArgs); err != nil {
		t.Fatal(err)
	}
	if err := h.coord.RemoveCircuit(ctx(t), testAuthority, "c-old", protocol.FormatArgs); err != nil {
		t.Fatal(err)
	}
	h.coord.DropCircuit(testAuthority, "c-old")
	applied := len(h.apply.Calls())
	time.Sleep(2500 * time.Millisecond) // pulls that started before the events land meanwhile
	calls := h.apply.Calls()
	if len(h.requests(http.MethodGet)) < 3 {
		t.Fatalf("only %d pulls; the test needs pulls that straddle the events", len(h.requests(http.MethodGet)))
	}
	for i, cs := range calls[applied:] {
		if !has(cs, "c-new") || has(cs, "c-old") {
			t.Fatalf("apply %d after the events undid them: %v", i, ids(cs))
		}
	}
	if !has(h.apply.Last(), "c-new") || has(h.apply.Last(), "c-old") {
		t.Fatalf("final set %v", ids(h.apply.Last()))
	}
}

// The first heartbeat follows registration and the first pull at once, not a period later.
func TestFirstHeartbeatRightAfterRegisterAndPull(t *testing.T) {
	h := newHarness(t, withHeartbeat(time.Hour)).start()
	h.ready()
	h.eventually("the first heartbeat", func() bool { return len(h.requests(http.MethodPatch)) == 1 })
	var order []string
	for _, r := range h.coord.Requests() {
		order = append(order, r.Method)
	}
	if len(order) < 3 || order[0] != http.MethodPut || order[1] != http.MethodGet || order[2] != http.MethodPatch {
		t.Fatalf("coordinator calls %v, want PUT, GET, PATCH first", order)
	}
}
