package main

// AppProxy mode, circuit hosts through the real server: the fixture token, the error table,
// allow-lists, public circuits, pass-through, SSE, queueing, 503 and 502.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"modelrelay/protocol"
)

const (
	fixtureCircuitID = "3f1c0c8e-6b2a-4b8e-9a51-0d2f5e7c9a10"
	fixtureHost      = "llama-abc123" + e2eDomain
)

// fixtureCircuit is testdata/appproxy/circuits.json's circuit with its route pointed at port.
func fixtureCircuit(t testing.TB, port int) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("../../testdata/appproxy/circuits.json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Circuits []map[string]any `json:"circuits"`
	}
	if err := json.Unmarshal(b, &list); err != nil || len(list.Circuits) != 1 {
		t.Fatalf("fixture circuits.json: %v", err)
	}
	c := list.Circuits[0]
	r := c["route_info"].([]any)[0].(map[string]any)
	r["kernel_host"], r["kernel_port"] = "127.0.0.1", port
	out, _ := json.Marshal(c)
	return out
}

func fixtureToken(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("../../testdata/appproxy/token-valid.txt")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestE2EFixtureTokenReachesReplica(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "llama", "llama-3-8b")
	e := startE2E(t, e2eOptions{circuits: []json.RawMessage{fixtureCircuit(t, rep.port())}})
	token := fixtureToken(t)
	e.waitServing(fixtureHost, bearer(token))

	for _, auth := range []string{"Bearer " + token, "BackendAI " + token} {
		h := http.Header{"Authorization": {auth}, "X-Forwarded-For": {"6.6.6.6"}} // a client's claim, not trusted
		st, rh, body := e.chat(fixtureHost, "llama-3-8b", h)
		if st != 200 || rh.Get("X-Replica") != "llama" {
			t.Fatalf("%s: %s", auth[:9], st2s(st, rh.Get("X-Replica"), body))
		}
		seen, ok := rep.lastRequest("POST", "/v1/chat/completions")
		if !ok {
			t.Fatal("replica saw no chat")
		}
		want := map[string]string{"Authorization": auth, "X-Forwarded-For": "127.0.0.1",
			"X-Forwarded-Proto": "http", "X-Forwarded-Host": fixtureHost}
		for k, v := range want {
			if got := strings.Join(seen.Header.Values(k), ", "); got != v {
				t.Errorf("%s: replica saw %s %q, want %q", auth[:9], k, got, v)
			}
		}
		if seen.Host != fixtureHost {
			t.Errorf("replica saw Host %q, want the client's %q", seen.Host, fixtureHost)
		}
		if string(seen.Body) != string(chatBody("llama-3-8b", false)) {
			t.Errorf("body changed on the way: %s", seen.Body)
		}
	}
}

func TestE2EPassThroughPaths(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "llama", "llama-3-8b")
	e := startE2E(t, e2eOptions{circuits: []json.RawMessage{fixtureCircuit(t, rep.port())}})
	auth := bearer(fixtureToken(t))
	e.waitServing(fixtureHost, auth)

	direct := func(method, uri string, body []byte) (int, []byte) {
		req, _ := http.NewRequest(method, "http://"+rep.addr+uri, strings.NewReader(string(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	cases := []struct {
		method, uri string
		body        []byte
	}{
		{"GET", "/v1/models", nil},
		{"GET", "/health", nil},
		{"GET", "/docs?lang=en&q=two%20words&empty=", nil},
		{"PUT", "/v1/files/abc?overwrite=true", []byte(`{"bytes":"\u00e9t\u00e9","n":1}`)},
		{"DELETE", "/v1/files/abc", nil},
		// A stored response the relay does not hold for this circuit is the replica's own.
		{"GET", "/v1/responses/resp_held_by_the_replica", nil},
		{"DELETE", "/v1/responses/resp_held_by_the_replica", nil},
		{"POST", "/v1/messages", []byte(`{"model": "claude-like", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}`)},
		{"POST", "/v1/embeddings?trace=1", []byte(`{"model":"emb","input":"x"}`)},
	}
	for _, tc := range cases {
		wantStatus, wantBody := direct(tc.method, tc.uri, tc.body)
		hdr := auth.Clone()
		if tc.body != nil {
			hdr.Set("Content-Type", "application/json")
		}
		st, h, body := e.do(tc.method, fixtureHost, tc.uri, hdr, tc.body)
		if st != wantStatus || string(body) != string(wantBody) {
			t.Errorf("%s %s: relay answered %d %s, the replica itself %d %s", tc.method, tc.uri, st, body, wantStatus, wantBody)
		}
		if h.Get("X-Replica") != "llama" {
			t.Errorf("%s %s: replica headers not passed back (%v)", tc.method, tc.uri, h)
		}
		seen, ok := rep.lastRequest(tc.method, tc.uri)
		if !ok {
			t.Errorf("%s %s: the replica never saw this exact method and URI; it saw %v", tc.method, tc.uri, uris(rep.requests()))
			continue
		}
		if string(seen.Body) != string(tc.body) {
			t.Errorf("%s %s: replica got body %q, want %q", tc.method, tc.uri, seen.Body, tc.body)
		}
	}
}

func uris(reqs []seenRequest) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Method+" "+r.URI)
	}
	return out
}

func TestE2ECredentialErrors(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "llama", "llama-3-8b")
	fenced := newCircuit("fenced", route{port: rep.port()})
	fenced.allowIPs = ptr("10.0.0.0/8, 192.168.1.1")
	fencedPublic := newCircuit("fenced-public", route{port: rep.port()})
	fencedPublic.allowIPs, fencedPublic.public = ptr("10.0.0.0/8"), true
	admitted := newCircuit("admitted", route{port: rep.port()})
	admitted.allowIPs = ptr("bogus, 127.0.0.0/8")
	public := newCircuit("public", route{port: rep.port()})
	public.public = true
	mapped := newCircuit("mapped", route{port: rep.port()})
	mapped.allowIPs, mapped.public = ptr("::ffff:127.0.0.1"), true
	hostBits := newCircuit("hostbits", route{port: rep.port()})
	hostBits.allowIPs, hostBits.public = ptr(" ,127.0.0.5/8"), true
	e := startE2E(t, e2eOptions{circuits: []json.RawMessage{fixtureCircuit(t, rep.port()), fenced.json(),
		fencedPublic.json(), admitted.json(), public.json(), mapped.json(), hostBits.json()}})
	good := fixtureToken(t)
	e.waitServing(fixtureHost, bearer(good))

	now := time.Now()
	id := fixtureCircuitID
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"id": id}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	hs512, _ := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"id": id}).SignedString([]byte(e2eJWTSecret))
	cases := []struct {
		name, host, auth string
		want             problemWant
	}{
		{"no header", fixtureHost, "", problemWant{401, "invalid-credentials", "E20006: Authorization header not provided"}},
		{"basic scheme", fixtureHost, "Basic dXNlcjpwYXNz", problemWant{401, "invalid-credentials", "E20007: Unsupported authorization method Basic"}},
		{"lowercase bearer", fixtureHost, "bearer " + good, problemWant{401, "invalid-credentials", "E20007: Unsupported authorization method bearer"}},
		{"wrong key", fixtureHost, "Bearer " + mintToken(t, jwt.MapClaims{"id": id}, "not-the-secret"), problemWant{401, "invalid-credentials", "E20008: Invalid authorization token (*"}},
		{"api secret as key", fixtureHost, "Bearer " + mintToken(t, jwt.MapClaims{"id": id}, e2eSecret), problemWant{401, "invalid-credentials", "E20008: Invalid authorization token (*"}},
		{"expired", fixtureHost, "Bearer " + mintToken(t, jwt.MapClaims{"id": id, "exp": now.Add(-time.Hour).Unix()}, e2eJWTSecret), problemWant{401, "invalid-credentials", "E20008: Invalid authorization token (*"}},
		{"not yet valid", fixtureHost, "Bearer " + mintToken(t, jwt.MapClaims{"id": id, "nbf": now.Add(time.Hour).Unix()}, e2eJWTSecret), problemWant{401, "invalid-credentials", "E20008: Invalid authorization token (*"}},
		{"alg none", fixtureHost, "Bearer " + none, problemWant{401, "invalid-credentials", "E20008: Invalid authorization token (*"}},
		{"alg HS512", fixtureHost, "Bearer " + hs512, problemWant{401, "invalid-credentials", "E20008: Invalid authorization token (*"}},
		{"aud present", fixtureHost, "Bearer " + mintToken(t, jwt.MapClaims{"id": id, "aud": "manager"}, e2eJWTSecret), problemWant{401, "invalid-credentials", "E20008: Invalid authorization token (*"}},
		{"garbage token", fixtureHost, "Bearer not.a.jwt", problemWant{401, "invalid-credentials", "E20008: Invalid authorization token (*"}},
		{"other circuit's token", fixtureHost, "Bearer " + tokenFor(t, fenced.id), problemWant{401, "invalid-credentials", "E20009: Authorization token mismatch"}},
		{"unknown subdomain", "nope" + e2eDomain, "Bearer " + good, problemWant{400, "generic-bad-request", "E20009: Subdomain nope not registered"}},
		{"unknown subdomain, mixed case and port", "NoPe" + strings.ToUpper(e2eDomain) + ":443", "", problemWant{400, "generic-bad-request", "E20009: Subdomain nope not registered"}},
		{"ip not allowed, valid token", "fenced" + e2eDomain, "Bearer " + tokenFor(t, fenced.id), problemWant{403, "client-ip-not-allowed", "E20011: Client address not allowed"}},
		{"ip checked before credentials", "fenced" + e2eDomain, "", problemWant{403, "client-ip-not-allowed", "E20011: Client address not allowed"}},
		{"public circuit keeps its allow-list", "fenced-public" + e2eDomain, "", problemWant{403, "client-ip-not-allowed", "E20011: Client address not allowed"}},
	}
	before := len(rep.requests())
	for _, tc := range cases {
		h := http.Header{}
		if tc.auth != "" {
			h.Set("Authorization", tc.auth)
		}
		st, rh, body := e.chat(tc.host, "llama-3-8b", h)
		checkProblem(t, tc.name, st, rh, body, tc.want)
		if !strings.Contains(string(body), `"error":{`) {
			t.Errorf("%s: no OpenAI error member: %s", tc.name, body)
		}
	}
	// Only chats count: model discovery may GET /v1/models meanwhile (wrong tokens are held by
	// the guess throttle, so this loop takes a few seconds).
	var reached []seenRequest
	for _, r := range rep.requests()[before:] {
		if r.Method == http.MethodPost {
			reached = append(reached, r)
		}
	}
	if len(reached) != 0 {
		t.Errorf("%d refused requests reached the replica: %v", len(reached), uris(reached))
	}

	// What must pass.
	passes := []struct {
		name, host, method, auth string
	}{
		{"allow-list admits 127.0.0.1 (invalid entries skipped)", "admitted" + e2eDomain, "POST", "Bearer " + tokenFor(t, admitted.id)},
		{"public circuit, no token", "public" + e2eDomain, "POST", ""},
		{"IPv4-mapped allow-list entry admits 127.0.0.1", "mapped" + e2eDomain, "POST", ""},
		{"allow-list entry with host bits", "hostbits" + e2eDomain, "POST", ""},
		{"public circuit, garbage token", "public" + e2eDomain, "POST", "Bearer garbage"},
		{"OPTIONS needs no token", fixtureHost, "OPTIONS", ""},
		{"host in upper case", strings.ToUpper(fixtureHost), "POST", "Bearer " + good},
	}
	for _, tc := range passes {
		h := http.Header{}
		if tc.auth != "" {
			h.Set("Authorization", tc.auth)
		}
		var st int
		var rh http.Header
		var body []byte
		if tc.method == "OPTIONS" {
			h.Set("Origin", "https://ui.example.com")
			h.Set("Access-Control-Request-Method", "POST")
			st, rh, body = e.do("OPTIONS", tc.host, "/v1/chat/completions", h, nil)
		} else {
			st, rh, body = e.chat(tc.host, "llama-3-8b", h)
		}
		if st >= 400 || rh.Get("X-Replica") != "llama" {
			t.Errorf("%s: %s", tc.name, st2s(st, rh.Get("X-Replica"), body))
			continue
		}
		if tc.auth != "" {
			last := rep.requests()[len(rep.requests())-1]
			if last.Header.Get("Authorization") != tc.auth {
				t.Errorf("%s: Authorization reached the replica as %q", tc.name, last.Header.Get("Authorization"))
			}
		}
	}
	if _, ok := rep.lastRequest("OPTIONS", "/v1/chat/completions"); !ok {
		t.Errorf("the preflight never reached the replica")
	}
}

func ptr[T any](v T) *T { return &v }

func TestE2ESSEArrivesChunkByChunk(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "llama", "llama-3-8b")
	gate := rep.gateSSE()
	c := newCircuit("stream", route{port: rep.port()})
	c.public = true
	e := startE2E(t, e2eOptions{circuits: []json.RawMessage{c.json()}})
	e.waitServing(circuitHost("stream"), nil) // non-streaming chats pass the gate untouched

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := e.send(ctx, "POST", circuitHost("stream"), "/v1/chat/completions", withJSON(nil), chatBody("llama-3-8b", true))
	if err != nil {
		close(gate)
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		close(gate)
		t.Fatalf("stream answered %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() {
		line, _ := rd.ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if !strings.HasPrefix(line, `data: {"chunk":1`) {
			t.Errorf("first line %q", line)
		}
	case <-time.After(10 * time.Second):
		close(gate)
		t.Fatal("the first chunk did not arrive while the replica held the second: the relay buffers the stream")
	}
	close(gate) // only now may the replica send the rest
	rest, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rest), `data: {"chunk":2}`) || !strings.Contains(string(rest), "data: [DONE]") {
		t.Errorf("rest of the stream %q", rest)
	}
}

// TestE2EPassThroughStreamOutlivesItsBodyDeadline: a circuit call on a path the relay does
// not know streams its body to the replica under the minimum rate's read deadlines (5 s of
// grace, then the rate); an answer that streams on past the last of them is not cut, on either
// server (http_server): the deadline is the body's, over once the body has ended.
func TestE2EPassThroughStreamOutlivesItsBodyDeadline(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "tgi", "m")
	gate := rep.gateSSE()
	c := newCircuit("longstream", route{port: rep.port()})
	c.public = true
	e := startE2E(t, e2eOptions{circuits: []json.RawMessage{c.json()}})
	e.waitServing(circuitHost("longstream"), nil)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := e.send(ctx, "POST", circuitHost("longstream"), "/generate_stream", withJSON(nil), []byte(`{"inputs":"hi"}`))
	if err != nil {
		close(gate)
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); resp.StatusCode != 200 || !strings.HasPrefix(line, `data: {"chunk":1`) {
		close(gate)
		t.Fatalf("answered %d, first line %q (%v)", resp.StatusCode, line, err)
	}
	// Past the body's last deadline (the grace, and the few bytes at the minimum rate), and
	// past a look for a client that left after it: nothing is measured, only waited out.
	time.Sleep(7 * time.Second)
	close(gate)
	rest, err := io.ReadAll(rd)
	if err != nil || !strings.Contains(string(rest), `data: {"chunk":2}`) || !strings.Contains(string(rest), "data: [DONE]") {
		t.Errorf("rest of the stream %q (%v): cut when the body's deadline passed", rest, err)
	}
	select {
	case <-rep.streamGone:
		t.Error("the replica saw its stream's client leave")
	default:
	}
}

func TestE2ECircuitAtCapacityQueues(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "llama", "llama-3-8b")
	c := newCircuit("busy", route{port: rep.port()})
	c.public = true
	e := startE2E(t, e2eOptions{env: map[string]string{"APPPROXY_ROUTE_MAX_CONCURRENT": "1"}, circuits: []json.RawMessage{c.json()}})
	e.waitServing(circuitHost("busy"), nil)
	entered, release := rep.holdChats()
	defer release()
	base := rep.chats.Load()

	results := make(chan string, 2)
	for range 2 {
		go func() {
			st, h, body := e.chat(circuitHost("busy"), "llama-3-8b", nil)
			results <- st2s(st, h.Get("X-Replica"), body)
		}()
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the replica")
	}
	eventually(t, 10*time.Second, "the second request queued", func() (bool, string) {
		st, _, body := e.do("GET", "", "/admin/stats", bearer(e2eAdmin), nil)
		var s struct {
			QueueDepth map[string]int `json:"queue_depth"`
		}
		_ = json.Unmarshal(body, &s)
		return st == 200 && s.QueueDepth["circuit:"+c.id] == 1, string(body)
	})
	if n := rep.chats.Load() - base; n != 1 {
		t.Errorf("%d requests reached a replica capped at 1", n)
	}
	release()
	for range 2 {
		select {
		case r := <-results:
			if !strings.HasPrefix(r, "200 replica=llama") {
				t.Errorf("request through a busy circuit: %s", r)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("a queued request never completed")
		}
	}
}

func TestE2ENoRoutesAndRefused(t *testing.T) {
	t.Parallel()
	// Probes are slowed down so that the first request, not a probe, finds the refusing replica.
	e := startE2E(t, e2eOptions{env: map[string]string{"APPPROXY_HEALTH_CHECK_INTERVAL": "1h"}})
	empty := newCircuit("empty")
	empty.public = true
	e.createAndAck(empty)
	st, h, body := e.chat(circuitHost("empty"), "m", nil)
	checkProblem(t, "no routes", st, h, body, problemWant{503, "appproxy/worker-not-available", "Worker not available."})
	st, h, body = e.do("GET", circuitHost("empty"), "/v1/models", nil, nil)
	checkProblem(t, "no routes, pass-through", st, h, body, problemWant{503, "appproxy/worker-not-available", "Worker not available."})

	deadPort := mustAtoi(t, strings.Split(freeAddr(t), ":")[1]) // nothing listens there
	refusing := newCircuit("refusing", route{port: deadPort})
	refusing.public = true
	e.createAndAck(refusing)
	st, h, body = e.chat(circuitHost("refusing"), "m", nil)
	checkProblem(t, "replica refuses connections", st, h, body, problemWant{502, "appproxy/container-connection-refused", "Cannot connect to Backend.AI kernel."})
}

func TestE2EClientDropCancelsUpstreamStream(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "llama", "m")
	gate := rep.gateSSE()
	defer close(gate)
	c := newCircuit("dropped", route{port: rep.port()})
	c.public = true
	e := startE2E(t, e2eOptions{circuits: []json.RawMessage{c.json()}})
	e.waitServing(circuitHost("dropped"), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := e.send(ctx, "POST", circuitHost("dropped"), "/v1/chat/completions", withJSON(nil), chatBody("m", true))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first chunk %q %v", line, err)
	}
	cancel() // the client goes away mid-stream
	select {
	case <-rep.streamGone:
	case <-time.After(10 * time.Second):
		t.Fatal("the replica's request was not cancelled after the client dropped the stream")
	}
}

func TestE2EPullOnlyWithoutEvents(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "r", "m")
	e := startE2E(t, e2eOptions{env: map[string]string{"APPPROXY_EVENTS_ENABLED": "false"}})
	c := newCircuit("pulled", route{port: rep.port()})
	c.public = true
	if _, err := e.coord.AddCircuit(e.authority, c.json()); err != nil {
		t.Fatal(err)
	}
	e.waitServing(circuitHost("pulled"), nil)
	if ap := e.health(); ap["events_connected"] != false || ap["registered"] != true {
		t.Errorf("/health appproxy with events off: %v", ap)
	}
}

func TestE2EHopByHopHeadersStripped(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "r", "m")
	c := newCircuit("hops", route{port: rep.port()})
	c.public = true
	e := startE2E(t, e2eOptions{circuits: []json.RawMessage{c.json()}})
	e.waitServing(circuitHost("hops"), nil)
	h := http.Header{"Connection": {"X-Client-Hop"}, "X-Client-Hop": {"1"}, "Proxy-Authorization": {"Basic eA=="},
		"Te": {"trailers"}, "X-End-To-End": {"kept"}}
	st, rh, body := e.do("GET", circuitHost("hops"), "/hop", h, nil)
	if st != 200 {
		t.Fatalf("/hop: %s", st2s(st, rh.Get("X-Replica"), body))
	}
	seen, ok := rep.lastRequest("GET", "/hop")
	if !ok {
		t.Fatal("the replica never saw /hop")
	}
	for _, k := range []string{"X-Client-Hop", "Proxy-Authorization", "Te"} {
		if v := seen.Header.Get(k); v != "" {
			t.Errorf("hop-by-hop request header %s reached the replica: %q", k, v)
		}
	}
	if seen.Header.Get("X-End-To-End") != "kept" {
		t.Errorf("end-to-end header lost on the way in")
	}
	if resp, err := http.Get("http://" + rep.addr + "/hop"); err == nil {
		resp.Body.Close()
		if resp.Header.Get("X-Replica-Hop") != "1" || resp.Header.Get("Connection") != "X-Replica-Hop" {
			t.Fatalf("test replica does not send its hop-by-hop header (%v); the check below would be vacuous", resp.Header)
		}
	}
	if v := rh.Get("X-Replica-Hop"); v != "" {
		t.Errorf("hop-by-hop response header X-Replica-Hop reached the client: %q", v)
	}
	if rh.Get("X-Replica-End") != "kept" {
		t.Errorf("end-to-end response header lost on the way out")
	}
}

func TestE2ERouteUpdateKeepsInFlightRequest(t *testing.T) {
	t.Parallel()
	a, b := newReplica(t, "a", "m"), newReplica(t, "b", "m")
	c := newCircuit("shift", route{port: a.port()})
	c.public = true
	e := startE2E(t, e2eOptions{circuits: []json.RawMessage{c.json()}})
	e.waitServing(circuitHost("shift"), nil)
	entered, release := a.holdChats()
	defer release()
	done := make(chan string, 1)
	go func() {
		resp, err := e.send(context.Background(), "POST", circuitHost("shift"), "/v1/chat/completions", withJSON(nil), chatBody("m", false))
		if err != nil {
			done <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- st2s(resp.StatusCode, resp.Header.Get("X-Replica"), body)
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached a")
	}
	routes := routesJSON(c.id, []route{{port: b.port()}})
	if err := e.coord.UpdateRoutes(context.Background(), e.authority, c.id, routes, protocol.FormatArgs); err != nil {
		t.Fatal(err)
	}
	// Polled with pass-through /health: a chat could still land on a, which holds chats.
	eventually(t, 10*time.Second, "new traffic on b", func() (bool, string) {
		st, h, body := e.do("GET", circuitHost("shift"), "/health", nil, nil)
		return st == 200 && h.Get("X-Replica") == "b", st2s(st, h.Get("X-Replica"), body)
	})
	if st, h, body := e.chat(circuitHost("shift"), "m", nil); st != 200 || h.Get("X-Replica") != "b" {
		t.Errorf("chat after the update: %s", st2s(st, h.Get("X-Replica"), body))
	}
	release()
	select {
	case r := <-done:
		if !strings.HasPrefix(r, "200 replica=a") {
			t.Errorf("request in flight on a replica the update removed: %s", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the in-flight request never finished")
	}
}
