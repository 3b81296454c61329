package main

// AppProxy mode's less travelled rules: route updates for unknown circuits, unhealthy and
// kebab-case routes, kernel swaps, mixed created events, last-used markers.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"modelrelay/protocol"
)

func TestE2ERouteUpdateForUnknownCircuitUpserts(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	rep := newReplica(t, "r", "m")
	c := newCircuit("upserted") // embedded route_info is stale (empty)
	c.public = true
	w, err := e.coord.WatchAcks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	routes := routesJSON(c.id, []route{{port: rep.port()}})
	msg, err := protocol.EncodeRouteUpdate(e.authority, string(c.json()), string(routes), protocol.FormatArgs)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.coord.Publish(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	if _, err := e.coord.AddCircuit(e.authority, c.json()); err != nil { // so the resync agrees
		t.Fatal(err)
	}
	e.waitServing(circuitHost("upserted"), nil)
	marker := newCircuit("marker-upsert", route{port: rep.port()})
	e.createAndAck(marker)
	for _, a := range w.Close() {
		if a.Has(c.id) {
			t.Errorf("a route update was acked: %s", a.Raw)
		}
	}
}

func TestE2EUnhealthyAndKebabCaseRoutes(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	sick, well := newReplica(t, "sick", "m"), newReplica(t, "well", "m")
	c := newCircuit("mixed-health")
	c.public = true
	e.createAndAck(c)
	// Coordinator-marked unhealthy routes get no traffic, alive or not.
	routes := routesJSON(c.id, []route{{port: sick.port(), health: "unhealthy"}, {port: well.port(), health: "healthy"}})
	if err := e.coord.UpdateRoutes(context.Background(), e.authority, c.id, routes, protocol.FormatArgs); err != nil {
		t.Fatal(err)
	}
	e.waitServing(circuitHost("mixed-health"), nil)
	for i := range 30 {
		st, h, body := e.chat(circuitHost("mixed-health"), "m", nil)
		if st != 200 || h.Get("X-Replica") != "well" {
			t.Fatalf("request %d: %s", i, st2s(st, h.Get("X-Replica"), body))
		}
	}
	if n := sick.chats.Load(); n != 0 {
		t.Errorf("a route marked unhealthy by the coordinator got %d requests", n)
	}

	// Kebab-case route keys are accepted on input.
	kebab := `[{"route-id": "` + newUUID() + `", "session-id": "` + newUUID() + `", "session-name": "k", ` +
		`"kernel-host": "127.0.0.1", "kernel-port": ` + strconv.Itoa(sick.port()) + `, "protocol": "http", "traffic_ratio": 1.0}]`
	if err := e.coord.UpdateRoutes(context.Background(), e.authority, c.id, json.RawMessage(kebab), protocol.FormatPayload); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "traffic on the kebab-case route", func() (bool, string) {
		st, h, body := e.chat(circuitHost("mixed-health"), "m", nil)
		return st == 200 && h.Get("X-Replica") == "sick", st2s(st, h.Get("X-Replica"), body)
	})
}

func TestE2EKernelSwapResetsHealth(t *testing.T) {
	t.Parallel()
	// No probes: only passive failures and the swap can change the replica's health.
	e := startE2E(t, e2eOptions{env: map[string]string{"APPPROXY_HEALTH_CHECK_INTERVAL": "1h"}})
	rep := newReplica(t, "r", "m")
	c := newCircuit("swap", route{port: rep.port()})
	c.public = true
	e.createAndAck(c)
	e.waitServing(circuitHost("swap"), nil)
	rep.close()
	eventually(t, 10*time.Second, "passive failures mark the dead replica unhealthy", func() (bool, string) {
		st, _, body := e.chat(circuitHost("swap"), "m", nil)
		return st == 503, st2s(st, "", body)
	})
	rep.restart()
	if st, _, body := e.chat(circuitHost("swap"), "m", nil); st != 503 {
		t.Fatalf("an unhealthy replica served before any probe or swap: %s", st2s(st, "", body))
	}
	// Same host and port, new route_id: a new kernel, so fresh health.
	routes := routesJSON(c.id, []route{{port: rep.port(), routeID: newUUID()}})
	if err := e.coord.UpdateRoutes(context.Background(), e.authority, c.id, routes, protocol.FormatArgs); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the swapped kernel serves", func() (bool, string) {
		st, h, body := e.chat(circuitHost("swap"), "m", nil)
		return st == 200, st2s(st, h.Get("X-Replica"), body)
	})
}

func TestE2EMixedCreatedEventAckedVerbatim(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	rep := newReplica(t, "r", "m")
	inter := newCircuit("mixed-inter", route{port: rep.port()})
	inter.appMode, inter.public = "interactive", true
	inf := newCircuit("Mixed-Inf", route{port: rep.port()}) // subdomains compare lowercased
	inf.public = true
	text := "[" + string(inter.json()) + ", " + string(inf.json()) + "]"
	msg := pythonStyleCreated(t, e.authority, text, protocol.FormatArgs)
	ack, err := e.coord.PublishAndWaitAck(context.Background(), msg, inf.id)
	if err != nil {
		t.Fatalf("not acked: %v", err)
	}
	checkAck(t, "mixed", ack, e.authority, text)
	if st, _, body := e.chat(circuitHost("mixed-inf"), "m", nil); st != 200 {
		t.Errorf("inference circuit of a mixed event: %s", st2s(st, "", body))
	}
	st, h, body := e.chat(circuitHost("mixed-inter"), "m", nil)
	checkProblem(t, "interactive circuit", st, h, body, problemWant{400, "generic-bad-request", "E20009: Subdomain mixed-inter not registered"})
}

func TestE2ELastUsedMarkers(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	rep := newReplica(t, "r", "m")
	c := newCircuit("marked", route{port: rep.port()})
	c.public = true
	e.createAndAck(c)
	for range 3 {
		if st, _, body := e.chat(circuitHost("marked"), "m", nil); st != 200 {
			t.Fatal(st2s(st, "", body))
		}
	}
	live := redis.NewClient(&redis.Options{Addr: e.redisAddr, DB: 2})
	defer live.Close()
	ctx := context.Background()
	circuitKey := "circuit." + c.id + ".last_access"
	countKey := "circuit." + c.id + ".requests"
	sessionKey := "session." + sessionOf(c.id, rep.port()) + ".last_access"
	eventually(t, 20*time.Second, "circuit markers in DB 2", func() (bool, string) {
		n, _ := live.Get(ctx, countKey).Int()
		return live.Exists(ctx, circuitKey).Val() == 1 && n >= 3, "requests=" + itoa(n)
	})
	at, err := live.Get(ctx, circuitKey).Float64()
	if err != nil || at < float64(time.Now().Add(-time.Minute).Unix()) || at > float64(time.Now().Add(time.Minute).Unix()) {
		t.Errorf("%s = %v (%v), want unix seconds as float text", circuitKey, live.Get(ctx, circuitKey).Val(), err)
	}
	if ttl := live.TTL(ctx, circuitKey).Val(); ttl <= 0 || ttl > 172800*time.Second {
		t.Errorf("%s TTL %s, want EX 172800", circuitKey, ttl)
	}
	if ttl := live.TTL(ctx, countKey).Val(); ttl <= 0 || ttl > 3600*time.Second {
		t.Errorf("%s TTL %s, want EXPIRE 3600", countKey, ttl)
	}
	if live.Exists(ctx, sessionKey).Val() != 1 {
		keys, _ := live.Keys(ctx, "*").Result()
		t.Errorf("no %s for the serving replica's session (DB 2 keys: %v)", sessionKey, keys)
	}
}

func TestE2ELastUsedMarkersCountOnlyTheServingCircuit(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	rA, rB := newReplica(t, "a", "shared-model"), newReplica(t, "b", "shared-model")
	a := newCircuit("count-a", route{port: rA.port()})
	a.public = true
	b := newCircuit("count-b", route{port: rB.port()})
	e.createAndAck(a)
	e.createAndAck(b)
	eventually(t, 15*time.Second, "models discovered", func() (bool, string) {
		va, vb := e.adminCircuit(a.id), e.adminCircuit(b.id)
		ma, _ := va["models"].([]any)
		mb, _ := vb["models"].([]any)
		return len(ma) > 0 && len(mb) > 0, "not yet"
	})
	// With b's token both circuits may serve shared-model; each request is served by one.
	const n = 10
	for range n {
		if st, _, body := e.chat(e2eApex, "shared-model", bearer(tokenFor(t, b.id))); st != 200 {
			t.Fatal(st2s(st, "", body))
		}
	}
	live := redis.NewClient(&redis.Options{Addr: e.redisAddr, DB: 2})
	defer live.Close()
	ctx := context.Background()
	count := func(id string) int {
		v, _ := live.Get(ctx, "circuit."+id+".requests").Int()
		return v
	}
	eventually(t, 20*time.Second, "request counters flushed", func() (bool, string) {
		return count(a.id)+count(b.id) >= n, "a=" + itoa(count(a.id)) + " b=" + itoa(count(b.id))
	})
	served := int(rA.chats.Load() + rB.chats.Load())
	if got := count(a.id) + count(b.id); got != served {
		t.Errorf("circuit.<id>.requests sum to %d (a=%d b=%d) for %d requests served (a=%d b=%d)",
			got, count(a.id), count(b.id), served, rA.chats.Load(), rB.chats.Load())
	}
}

func TestE2EArgsAsMsgpackBinWithUnknownKeys(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	rep := newReplica(t, "r", "m")
	c := newCircuit("binargs", route{port: rep.port()})
	c.public = true
	var m map[string]any
	_ = json.Unmarshal(c.json(), &m)
	m["future_key"] = map[string]any{"nested": []int{1, 2}}
	m["route_info"].([]any)[0].(map[string]any)["future_route_key"] = "x"
	circuit, _ := json.MarshalIndent(m, "", "\t")
	text := "[" + string(circuit) + "]"
	if _, err := e.coord.AddCircuit(e.authority, circuit); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	_ = enc.EncodeArrayLen(2)
	_ = enc.EncodeBytes([]byte(e.authority)) // bin, not str: tolerated on input
	_ = enc.EncodeBytes([]byte(text))
	env, _ := json.Marshal(map[string]any{"name": protocol.EventCircuitCreated, "source": "appproxy-coordinator",
		"args": base64.StdEncoding.EncodeToString(buf.Bytes()), "metadata": `{"request_id": null, "user": null}`, "extra": 1})
	ack, err := e.coord.PublishAndWaitAck(context.Background(), env, c.id)
	if err != nil {
		t.Fatalf("created event with bin args and unknown keys not acked: %v", err)
	}
	checkAck(t, "bin args", ack, e.authority, text)
	if st, _, body := e.chat(circuitHost("binargs"), "m", nil); st != 200 {
		t.Errorf("circuit with unknown keys: %s", st2s(st, "", body))
	}
}

func TestE2ETrustedProxyClientAddress(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "r", "m")
	c := newCircuit("behind", route{port: rep.port()})
	c.allowIPs = ptr("10.1.2.3")
	e := startE2E(t, e2eOptions{env: map[string]string{"TRUSTED_PROXIES": "127.0.0.1/32"}, circuits: []json.RawMessage{c.json()}})
	tok := tokenFor(t, c.id)
	with := func(xff string) http.Header {
		h := bearer(tok)
		h.Set("X-Forwarded-For", xff)
		return h
	}
	e.waitServing(circuitHost("behind"), with("10.1.2.3"))
	for _, xff := range []string{"10.1.2.3", "10.1.2.3, 127.0.0.1", "6.6.6.6, 10.1.2.3"} {
		st, h, body := e.chat(circuitHost("behind"), "m", with(xff))
		if st != 200 {
			t.Errorf("XFF %q via a trusted proxy: %s", xff, st2s(st, h.Get("X-Replica"), body))
			continue
		}
		seen, _ := rep.lastRequest("POST", "/v1/chat/completions")
		if got := seen.Header.Get("X-Forwarded-For"); got != "10.1.2.3" {
			t.Errorf("XFF %q: replica saw X-Forwarded-For %q, want the vouched client 10.1.2.3", xff, got)
		}
	}
	st, h, body := e.chat(circuitHost("behind"), "m", with("10.9.9.9"))
	checkProblem(t, "client outside the allow-list behind a trusted proxy", st, h, body, problemWant{403, "client-ip-not-allowed", "E20011: Client address not allowed"})
	// A trusted proxy may name the host too.
	hdr := with("10.1.2.3")
	hdr.Set("X-Forwarded-Host", circuitHost("behind"))
	st, h, body = e.chat("lb.internal", "m", hdr)
	if st != 200 || h.Get("X-Replica") != "r" {
		t.Errorf("X-Forwarded-Host from a trusted proxy: %s", st2s(st, h.Get("X-Replica"), body))
	}
}
