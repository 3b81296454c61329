package main

// AppProxy mode, control plane: registration, events and acks, resync, Redis and coordinator loss,
// heartbeat 404, /health, /readyz, /admin/circuits.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"modelrelay/appproxy/appproxytest"
	"modelrelay/protocol"
)

var uuid4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestE2ERegistrationBodyAndHeaders(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{authority: "modelrelay-1"})
	eventually(t, 10*time.Second, "a heartbeat after the pull", func() (bool, string) {
		for _, r := range e.coord.Requests() {
			if r.Method == "PATCH" && r.Status == 200 {
				return true, ""
			}
		}
		return false, "no PATCH yet"
	})
	reqs := e.coord.Requests()
	put := reqs[0]
	if put.Method != "PUT" || put.Path != "/api/worker" {
		t.Fatalf("first coordinator call is %s %s, want PUT /api/worker", put.Method, put.Path)
	}
	if put.Subscribers < 1 {
		t.Errorf("registered before subscribing to %s (subscribers %d)", protocol.EventsChannel, put.Subscribers)
	}
	_, port, _ := net.SplitHostPort(e.addr)
	want := map[string]any{
		"authority": "modelrelay-1", "frontend_mode": "wildcard", "protocol": "http",
		"hostname": "router.models.test", "tls_listen": false, "tls_advertised": false,
		"api_port": float64(mustAtoi(t, port)), "port_range": nil, "wildcard_domain": e2eDomain,
		"wildcard_traffic_port": float64(443), "filtered_apps_only": false,
		"traefik_last_used_marker_path": nil, "accepted_traffics": []any{"inference"}, "app_filters": []any{},
	}
	var got map[string]any
	if err := json.Unmarshal(put.Body, &got); err != nil {
		t.Fatalf("registration body is not JSON: %s", put.Body)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("registration body\n got %s\nwant %v", put.Body, want)
	}
	if ct := put.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("PUT Content-Type %q", ct)
	}
	id := e.workerID()
	ids := map[string]bool{}
	sawPull := false
	for i, r := range reqs {
		if r.Header.Get("X-BackendAI-Token") != e2eSecret {
			t.Errorf("request %d %s %s: X-BackendAI-Token %q", i, r.Method, r.Path, r.Header.Get("X-BackendAI-Token"))
		}
		if r.Header.Get("Accept") != "application/json" {
			t.Errorf("request %d %s %s: Accept %q", i, r.Method, r.Path, r.Header.Get("Accept"))
		}
		rid := r.Header.Get("X-BackendAI-RequestID")
		if !uuid4.MatchString(rid) || ids[rid] {
			t.Errorf("request %d %s %s: X-BackendAI-RequestID %q is not a fresh uuid4", i, r.Method, r.Path, rid)
		}
		ids[rid] = true
		switch r.Method {
		case "PATCH":
			if r.Path != "/api/worker/"+id || len(r.Body) != 0 {
				t.Errorf("heartbeat %s with body %q, want /api/worker/%s and no body", r.Path, r.Body, id)
			}
			if !sawPull {
				t.Errorf("heartbeat before the first circuit pull")
			}
		case "GET":
			if r.Path != "/api/worker/"+id+"/circuits" {
				t.Errorf("pull path %s", r.Path)
			}
			sawPull = true
		}
		if r.Status != 200 {
			t.Errorf("request %d %s %s answered %d", i, r.Method, r.Path, r.Status)
		}
	}
}

func mustAtoi(t testing.TB, s string) int {
	var n int
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

// checkAck asserts the wire shape of an ack for the inbound circuits text.
func checkAck(t testing.TB, label string, ack *appproxytest.Ack, authority, circuitsText string) {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(ack.Raw, &raw); err != nil {
		t.Fatalf("%s: ack is not a JSON object: %s", label, ack.Raw)
	}
	keys := []string{}
	for k := range raw {
		keys = append(keys, k)
	}
	for _, k := range []string{"name", "source", "args", "payload", "metadata"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("%s: ack lacks %q (keys %v)", label, k, keys)
		}
	}
	if ack.Envelope.Name != protocol.EventWorkerCircuitAdded || ack.Envelope.Source != "appproxy-worker" {
		t.Errorf("%s: ack name %q source %q", label, ack.Envelope.Name, ack.Envelope.Source)
	}
	if md := ack.Envelope.Metadata; md == nil || *md != `{"request_id":null,"user":null}` {
		t.Errorf("%s: metadata %s, want the JSON text {\"request_id\":null,\"user\":null}", label, raw["metadata"])
	}
	if ack.Envelope.Args == nil {
		t.Errorf("%s: no args", label)
	} else {
		b, err := base64.StdEncoding.DecodeString(*ack.Envelope.Args)
		var fields []string
		if err == nil {
			err = msgpack.Unmarshal(b, &fields)
		}
		if err != nil {
			t.Errorf("%s: args are not base64 msgpack strings: %v", label, err)
		} else if len(fields) != 2 || fields[0] != authority || fields[1] != circuitsText {
			t.Errorf("%s: args %q, want [%q, the inbound circuits text verbatim %q]", label, fields, authority, circuitsText)
		}
	}
	if ack.Envelope.Payload == nil {
		t.Errorf("%s: no payload", label)
		return
	}
	var payload struct {
		Authority *string         `json:"target_worker_authority"`
		Circuits  json.RawMessage `json:"circuits"`
	}
	if err := json.Unmarshal([]byte(*ack.Envelope.Payload), &payload); err != nil {
		t.Errorf("%s: payload is not a JSON object text: %v", label, err)
		return
	}
	if payload.Authority == nil || *payload.Authority != authority {
		t.Errorf("%s: payload target_worker_authority %v", label, deref(payload.Authority))
	}
	var gotC, wantC any
	_ = json.Unmarshal(payload.Circuits, &gotC)
	_ = json.Unmarshal([]byte(circuitsText), &wantC)
	if !reflect.DeepEqual(gotC, wantC) {
		t.Errorf("%s: payload circuits differ from the inbound ones\n got %s\nwant %s", label, payload.Circuits, circuitsText)
	}
}

func TestE2EEventRightAfterRegistrationIsNotLost(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "early", "m")
	c := newCircuit("early", route{port: rep.port()})
	watches := make(chan *appproxytest.AckWatch, 1)
	var once sync.Once
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := startE2E(t, e2eOptions{noWait: true, onRegister: func(coord *appproxytest.Coordinator, authority string) {
		once.Do(func() {
			w, err := coord.WatchAcks(ctx)
			if err != nil {
				t.Errorf("watch acks: %v", err)
				close(watches)
				return
			}
			watches <- w
			// Stored first, as the real coordinator commits the circuit before it publishes.
			if _, err := coord.AddCircuit(authority, c.json()); err != nil {
				t.Errorf("assign circuit: %v", err)
			}
			msg, _ := protocol.EncodeCircuitEvent(protocol.EventCircuitCreated, authority, "["+string(c.json())+"]", protocol.FormatArgs)
			// Published while the registration is still unanswered: only a worker that
			// subscribed first can see it.
			if err := coord.Publish(ctx, msg); err != nil {
				t.Errorf("publish: %v", err)
			}
		})
	}})
	w := <-watches
	if w == nil {
		t.FailNow()
	}
	defer w.Close()
	waitCtx, cancelWait := context.WithTimeout(ctx, appproxytest.AckTimeout)
	defer cancelWait()
	if _, err := w.Wait(waitCtx, c.id); err != nil {
		t.Fatalf("event published during registration was lost: %v", err)
	}
	if st, _, body := e.chat(circuitHost("early"), "m", bearer(tokenFor(t, c.id))); st != 200 {
		t.Errorf("acked circuit not routable: %d %s", st, body)
	}
}

func TestE2ECreatedEventsAckedInBothFormats(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	rep := newReplica(t, "r", "m")
	formats := []struct {
		name string
		f    protocol.Format
	}{{"released-args", protocol.FormatArgs}, {"main-payload", protocol.FormatPayload}, {"both", protocol.FormatBoth}}
	for _, tc := range formats {
		c := newCircuit("fmt-"+tc.name, route{port: rep.port()})
		text := "[" + string(c.json()) + "]"
		if _, err := e.coord.AddCircuit(e.authority, c.json()); err != nil {
			t.Fatal(err)
		}
		msg := pythonStyleCreated(t, e.authority, text, tc.f)
		start := time.Now()
		ack, err := e.coord.PublishAndWaitAck(context.Background(), msg, c.id)
		if err != nil {
			t.Fatalf("%s: not acked within %s: %v", tc.name, appproxytest.AckTimeout, err)
		}
		t.Logf("%s: acked in %s", tc.name, time.Since(start))
		checkAck(t, tc.name, ack, e.authority, text)
		// The ack promises the circuit is routable: no polling here.
		if st, _, body := e.chat(circuitHost(c.subdomain), "m", bearer(tokenFor(t, c.id))); st != 200 {
			t.Errorf("%s: request right after the ack: %d %s", tc.name, st, body)
		}
		// A repeated created event is applied again and acked again.
		again, err := e.coord.PublishAndWaitAck(context.Background(), msg, c.id)
		if err != nil {
			t.Fatalf("%s: repeated created event not acked: %v", tc.name, err)
		}
		checkAck(t, tc.name+" (repeat)", again, e.authority, text)
	}
}

// pythonStyleCreated encodes a created event as the Python coordinator does, spaces after ':'
// and ',' included, with circuitsText embedded byte for byte in args and/or payload.
func pythonStyleCreated(t testing.TB, authority, circuitsText string, f protocol.Format) []byte {
	t.Helper()
	env := map[string]any{"name": protocol.EventCircuitCreated, "source": "appproxy-coordinator",
		"metadata": `{"request_id": null, "user": null, "triggered_user": null}`}
	if f&protocol.FormatArgs != 0 {
		b, err := msgpack.Marshal([]string{authority, circuitsText})
		if err != nil {
			t.Fatal(err)
		}
		env["args"] = base64.StdEncoding.EncodeToString(b)
	}
	if f&protocol.FormatPayload != 0 {
		a, _ := json.Marshal(authority)
		env["payload"] = `{"target_worker_authority": ` + string(a) + `, "circuits": ` + circuitsText + `}`
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestE2EForeignAndUnknownEventsIgnored(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	rep := newReplica(t, "r", "m")
	kept := newCircuit("kept", route{port: rep.port()})
	kept.public = true
	e.createAndAck(kept)

	ctx := context.Background()
	w, err := e.coord.WatchAcks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	foreign := newCircuit("foreign", route{port: rep.port()})
	foreign.public = true
	interactive := newCircuit("inter", route{port: rep.port()})
	interactive.appMode, interactive.public = "interactive", true
	mustEncode := func(b []byte, err error) []byte {
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	keptList := "[" + string(kept.json()) + "]"
	for _, msg := range [][]byte{
		mustEncode(protocol.EncodeCircuitEvent(protocol.EventCircuitCreated, "other-worker", "["+string(foreign.json())+"]", protocol.FormatArgs)),
		mustEncode(protocol.EncodeCircuitEvent(protocol.EventCircuitCreated, "other-worker", "["+string(foreign.json())+"]", protocol.FormatPayload)),
		mustEncode(protocol.EncodeCircuitEvent(protocol.EventCircuitRemoved, "other-worker", keptList, protocol.FormatArgs)),
		mustEncode(protocol.EncodeRouteUpdate("other-worker", string(kept.json()), "[]", protocol.FormatPayload)),
		mustEncode(protocol.EncodeCircuitEvent(protocol.EventCircuitCreated, e.authority, "["+string(interactive.json())+"]", protocol.FormatArgs)),
		[]byte(`{"name":"kernel_started","source":"manager","args":"kqh3b3JrZXItMaJbXQ=="}`),
		[]byte(`{"name":"appproxy_some_future_event","source":"appproxy-coordinator","payload":"{}"}`),
		[]byte(`not json at all`),
	} {
		if err := e.coord.Publish(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	// Events are handled in order: once this one is acked, every one above has been seen.
	marker := newCircuit("marker", route{port: rep.port()})
	e.createAndAck(marker)
	for _, a := range w.Close() {
		if a.Has(foreign.id) || a.Has(interactive.id) {
			t.Errorf("acked an event that is not ours to serve: %s", a.Raw)
		}
	}
	for _, sub := range []string{"foreign", "inter"} {
		st, h, body := e.chat(circuitHost(sub), "m", nil)
		checkProblem(t, sub, st, h, body, problemWant{400, "generic-bad-request", "E20009: Subdomain " + sub + " not registered"})
	}
	if st, _, body := e.chat(circuitHost("kept"), "m", nil); st != 200 {
		t.Errorf("another worker's removal or route update touched our circuit: %d %s", st, body)
	}
}

func TestE2EDroppedEventsHealedByResync(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	a, b := newReplica(t, "a", "m"), newReplica(t, "b", "m")
	c := newCircuit("silent", route{port: a.port()})
	c.public = true
	if _, err := e.coord.AddCircuit(e.authority, c.json()); err != nil { // assigned, event lost
		t.Fatal(err)
	}
	e.waitServing(circuitHost("silent"), nil)

	c.routes = []route{{port: b.port()}}
	if _, err := e.coord.AddCircuit(e.authority, c.json()); err != nil { // route update lost
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "resync moves traffic to the new replica", func() (bool, string) {
		st, h, body := e.chat(circuitHost("silent"), "m", nil)
		return st == 200 && h.Get("X-Replica") == "b", st2s(st, h.Get("X-Replica"), body)
	})

	e.coord.DropCircuit(e.authority, c.id) // removal lost
	eventually(t, 15*time.Second, "resync removes the circuit", func() (bool, string) {
		st, _, body := e.chat(circuitHost("silent"), "m", nil)
		return st == 400, st2s(st, "", body)
	})
}

func st2s(st int, replica string, body []byte) string {
	return itoa(st) + " replica=" + replica + " " + string(body)
}

// load sends chats to host until stop is closed, counting failures.
type load struct {
	mu       sync.Mutex
	ok, fail int
	lastErr  string
	done     chan struct{}
}

func (e *e2eEnv) startLoad(host string, header http.Header, stop <-chan struct{}) *load {
	l := &load{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := e.send(context.Background(), "POST", host, "/v1/chat/completions", withJSON(header), chatBody("m", false))
			l.mu.Lock()
			if err != nil {
				l.fail++
				l.lastErr = err.Error()
			} else {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					l.ok++
				} else {
					l.fail++
					l.lastErr = st2s(resp.StatusCode, resp.Header.Get("X-Replica"), b)
				}
			}
			l.mu.Unlock()
			time.Sleep(5 * time.Millisecond) // pacing, not synchronization
		}
	}()
	return l
}

func (l *load) counts() (ok, fail int, last string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok, l.fail, l.lastErr
}

func TestE2ERedisRestartKeepsServing(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	rep := newReplica(t, "r", "m")
	c := newCircuit("steady", route{port: rep.port()})
	c.public = true
	e.createAndAck(c)
	eventually(t, 10*time.Second, "events connected", func() (bool, string) {
		return e.health()["events_connected"] == true, "not yet"
	})

	stop := make(chan struct{})
	l := e.startLoad(circuitHost("steady"), nil, stop)
	progress := func(min int) {
		eventually(t, 10*time.Second, "requests flowing", func() (bool, string) {
			ok, _, _ := l.counts()
			return ok >= min, itoa(ok)
		})
	}
	progress(10)
	e.stopRedis()
	eventually(t, 15*time.Second, "the server to notice Redis is gone", func() (bool, string) {
		return e.health()["events_connected"] == false, "still connected"
	})
	okBefore, _, _ := l.counts()
	progress(okBefore + 20) // serving goes on without Redis
	appproxytest.StartRedisAt(t, e.redisAddr)
	eventually(t, 30*time.Second, "resubscribed after Redis came back", func() (bool, string) {
		return e.health()["events_connected"] == true, "not yet"
	})
	okBefore, _, _ = l.counts()
	progress(okBefore + 10)
	close(stop)
	<-l.done
	ok, fail, last := l.counts()
	if fail != 0 {
		t.Errorf("%d of %d requests failed while Redis restarted; last: %s", fail, ok+fail, last)
	}
	next := newCircuit("after-redis", route{port: rep.port()})
	next.public = true
	e.createAndAck(next)
	if st, _, body := e.chat(circuitHost("after-redis"), "m", nil); st != 200 {
		t.Errorf("circuit created after the Redis restart: %d %s", st, body)
	}
}

func TestE2ECoordinatorDownKeepsServing(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	rep := newReplica(t, "r", "m")
	c := newCircuit("cd", route{port: rep.port()})
	c.public = true
	e.createAndAck(c)

	e.coord.FailWith(500)
	mark := len(e.coord.Requests())
	eventually(t, 10*time.Second, "failed heartbeats", func() (bool, string) {
		n := 0
		for _, r := range e.requestsSince(mark) {
			if r.Method == "PATCH" && r.Status == 500 {
				n++
			}
		}
		return n >= 2 && e.health()["last_heartbeat_ok"] == false, itoa(n) + " failed heartbeats"
	})
	// The resync pulls fail too; the circuit set must stay as it was.
	for i := range 20 {
		if st, _, body := e.chat(circuitHost("cd"), "m", nil); st != 200 {
			t.Fatalf("request %d while the coordinator is down: %d %s", i, st, body)
		}
	}
	e.coord.FailWith(0)
	mark = len(e.coord.Requests())
	eventually(t, 10*time.Second, "heartbeats resume", func() (bool, string) {
		for _, r := range e.requestsSince(mark) {
			if r.Method == "PATCH" && r.Status == 200 {
				return e.health()["last_heartbeat_ok"] == true, "heartbeat ok, health not yet"
			}
		}
		return false, "no successful heartbeat"
	})
	if st, _, body := e.chat(circuitHost("cd"), "m", nil); st != 200 {
		t.Errorf("after the coordinator recovered: %d %s", st, body)
	}
}

func TestE2EHeartbeat404ReRegisters(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	rep := newReplica(t, "r", "m")
	c := newCircuit("fg", route{port: rep.port()})
	c.public = true
	e.createAndAck(c)
	oldID := e.workerID()

	mark := len(e.coord.Requests())
	e.coord.Forget(e.authority)
	eventually(t, 10*time.Second, "re-registration after a heartbeat 404", func() (bool, string) {
		saw404, reregistered, pulled := false, false, false
		for _, r := range e.requestsSince(mark) {
			switch {
			case r.Method == "PATCH" && r.Status == 404:
				saw404 = true
			case saw404 && r.Method == "PUT" && r.Path == "/api/worker" && r.Status == 200:
				reregistered = true
			case reregistered && r.Method == "GET" && r.Status == 200:
				pulled = true
			}
		}
		id := e.workerID()
		return pulled && id != "" && id != oldID, "404=" + boolS(saw404) + " put=" + boolS(reregistered) + " pull=" + boolS(pulled) + " id=" + id
	})
	newID := e.workerID()
	mark = len(e.coord.Requests())
	eventually(t, 10*time.Second, "heartbeats on the new id", func() (bool, string) {
		for _, r := range e.requestsSince(mark) {
			if r.Method == "PATCH" && r.Path == "/api/worker/"+newID && r.Status == 200 {
				return true, ""
			}
		}
		return false, "none"
	})
	if n := e.coord.Nodes(e.authority); n != 1 {
		t.Errorf("nodes = %d after re-registration, want 1", n)
	}
	if st, _, body := e.chat(circuitHost("fg"), "m", nil); st != 200 {
		t.Errorf("circuit after re-registration: %d %s", st, body)
	}
}

func boolS(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func TestE2EHealthHasAppProxyObject(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	rep := newReplica(t, "r", "m")
	e.createAndAck(newCircuit("h1", route{port: rep.port()}))
	eventually(t, 10*time.Second, "/health appproxy object", func() (bool, string) {
		ap := e.health()
		ok := ap["authority"] == e.authority && ap["registered"] == true && ap["events_connected"] == true &&
			ap["circuits"] == float64(1) && ap["last_heartbeat_ok"] == true && uuid4.MatchString(asString(ap["worker_id"])) &&
			ap["nodes"] == float64(1) && asString(ap["node"]) != ""
		b, _ := json.Marshal(ap)
		return ok, string(b)
	})
	// /admin/stats carries the same object.
	st, _, body := e.do("GET", "", "/admin/stats", bearer(e2eAdmin), nil)
	var stats struct {
		AppProxy map[string]any `json:"appproxy"`
	}
	if st != 200 || json.Unmarshal(body, &stats) != nil || stats.AppProxy["authority"] != e.authority ||
		stats.AppProxy["nodes"] != float64(1) {
		t.Fatalf("/admin/stats: %d %s", st, body)
	}
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

func TestE2EReadyzWaitsForFirstPull(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{coordFail: 500, noWait: true})
	// Two failed registrations are at least one backoff (1 s) apart: several resync periods
	// (300 ms) have passed without any pull.
	eventually(t, 15*time.Second, "two failed registrations", func() (bool, string) {
		n := 0
		for _, r := range e.coord.Requests() {
			if r.Method == "PUT" && r.Status == 500 {
				n++
			}
		}
		return n >= 2, itoa(n)
	})
	if st, _, body := e.do("GET", "", "/readyz", nil, nil); st != 503 {
		t.Errorf("/readyz before any circuit pull: %d %s, want 503", st, body)
	}
	e.coord.FailWith(0)
	eventually(t, 30*time.Second, "a successful pull, then /readyz 200", func() (bool, string) {
		pulled := false
		for _, r := range e.coord.Requests() {
			pulled = pulled || (r.Method == "GET" && r.Status == 200)
		}
		st, _, body := e.do("GET", "", "/readyz", nil, nil)
		return pulled && st == 200, "pulled=" + boolS(pulled) + " " + st2s(st, "", body)
	})
}

func TestE2EAdminCircuits(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	a, b := newReplica(t, "a", "llama-3-8b"), newReplica(t, "b", "llama-3-8b")
	c := newCircuit("adm", route{port: a.port()}, route{port: b.port()})
	c.public = true
	e.createAndAck(c)
	eventually(t, 15*time.Second, "/admin/circuits with discovered models", func() (bool, string) {
		v := e.adminCircuit(c.id)
		js, _ := json.Marshal(v)
		if v == nil {
			return false, "circuit missing"
		}
		models, _ := v["models"].([]any)
		routes, _ := v["routes"].([]any)
		healthy := 0
		for _, r := range routes {
			if h, ok := fieldCI(r, "healthy"); ok && h == true {
				healthy++
			}
		}
		return v["subdomain"] == "adm" && len(models) == 1 && models[0] == "llama-3-8b" && len(routes) == 2 && healthy == 2, string(js)
	})
	if st, _, _ := e.do("GET", "", "/admin/circuits", nil, nil); st != 403 {
		t.Errorf("/admin/circuits without the admin token: %d, want 403", st)
	}
}

// fieldCI reads a JSON object member case-insensitively (the admin views' key case is not part of their contract).
func fieldCI(v any, key string) (any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	for k, x := range m {
		if strings.EqualFold(k, key) {
			return x, true
		}
	}
	return nil, false
}
