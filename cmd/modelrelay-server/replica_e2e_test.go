package main

// Fake model replicas (OpenAI-compatible servers on loopback), circuit JSON in the
// coordinator's shape, and circuit tokens.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"modelrelay/protocol"
)

// seenRequest is what a replica received.
type seenRequest struct {
	Method, URI, Host string
	Header            http.Header
	Body              []byte
}

// replica is one fake model server. Its behavior can be changed while it runs.
type replica struct {
	t      testing.TB
	name   string
	models []string
	addr   string

	mu   sync.Mutex
	srv  *http.Server
	seen []seenRequest
	// hold, when set, keeps chat requests waiting (after signalling entered) until it is closed.
	hold    chan struct{}
	entered chan struct{}
	// sseGate, when set, is waited on between the first and the second SSE chunk.
	sseGate chan struct{}

	chats atomic.Int64
	// streamGone is signalled when a client's stream ended before the replica finished it.
	streamGone chan struct{}
}

func newReplica(t testing.TB, name string, models ...string) *replica {
	t.Helper()
	r := &replica{t: t, name: name, models: models, streamGone: make(chan struct{}, 16)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serveOn(ln)
	t.Cleanup(r.close)
	return r
}

func (r *replica) port() int {
	_, p, _ := net.SplitHostPort(r.addr)
	n, _ := strconv.Atoi(p)
	return n
}

func (r *replica) serveOn(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.serveHTTP), ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go srv.Serve(ln)
}

// close kills the listener and every connection: the replica is dead.
func (r *replica) close() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// restart serves again on the same port.
func (r *replica) restart() {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ln, err := net.Listen("tcp", r.addr)
		if err == nil {
			r.serveOn(ln)
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("replica %s: relisten on %s: %v", r.name, r.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *replica) requests() []seenRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]seenRequest(nil), r.seen...)
}

// lastRequest returns the last request whose URI is uri.
func (r *replica) lastRequest(method, uri string) (seenRequest, bool) {
	reqs := r.requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Method == method && reqs[i].URI == uri {
			return reqs[i], true
		}
	}
	return seenRequest{}, false
}

// holdChats makes chat requests wait; release lets them (and later ones) through.
func (r *replica) holdChats() (entered <-chan struct{}, release func()) {
	hold, in := make(chan struct{}), make(chan struct{}, 64)
	r.mu.Lock()
	r.hold, r.entered = hold, in
	r.mu.Unlock()
	var once sync.Once
	return in, func() { once.Do(func() { close(hold) }) }
}

// gateSSE makes streamed answers wait after their first chunk until gate is closed.
func (r *replica) gateSSE() (gate chan struct{}) {
	gate = make(chan struct{})
	r.mu.Lock()
	r.sseGate = gate
	r.mu.Unlock()
	return gate
}

func (r *replica) serveHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.seen = append(r.seen, seenRequest{Method: req.Method, URI: req.RequestURI, Host: req.Host, Header: req.Header.Clone(), Body: body})
	hold, entered, gate := r.hold, r.entered, r.sseGate
	r.mu.Unlock()
	w.Header().Set("X-Replica", r.name)
	switch {
	case req.Method == "GET" && req.URL.Path == "/v1/models":
		data := []map[string]string{}
		for _, m := range r.models {
			data = append(data, map[string]string{"id": m, "object": "model"})
		}
		writeReplicaJSON(w, 200, map[string]any{"object": "list", "data": data})
	case req.Method == "POST" && req.URL.Path == "/v1/chat/completions":
		r.chats.Add(1)
		if hold != nil {
			entered <- struct{}{}
			select {
			case <-hold:
			case <-req.Context().Done():
				return
			}
		}
		var in struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		_ = json.Unmarshal(body, &in)
		if in.Stream {
			r.stream(w, req, gate)
			return
		}
		writeReplicaJSON(w, 200, map[string]any{"id": "chatcmpl-" + r.name, "object": "chat.completion",
			"model": in.Model, "replica": r.name,
			"choices": []map[string]any{{"index": 0, "message": map[string]string{"role": "assistant", "content": "hello"}, "finish_reason": "stop"}}})
	case req.Method == "POST" && req.URL.Path == "/generate_stream":
		// A streaming path the relay does not know (TGI's): passed through, answered as SSE.
		r.stream(w, req, gate)
	case req.URL.Path == "/health":
		writeReplicaJSON(w, 200, map[string]any{"status": "healthy", "replica": r.name})
	case req.URL.Path == "/hop":
		w.Header().Set("Connection", "X-Replica-Hop")
		w.Header().Set("X-Replica-Hop", "1")
		w.Header().Set("X-Replica-End", "kept")
		writeReplicaJSON(w, 200, map[string]any{"replica": r.name})
	case req.URL.Path == "/docs":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(200)
		fmt.Fprintf(w, "<html>docs of %s query=%s</html>", r.name, req.URL.RawQuery)
	default:
		w.Header().Set("X-Echo-Method", req.Method)
		writeReplicaJSON(w, 201, map[string]any{"method": req.Method, "uri": req.RequestURI, "body": string(body), "replica": r.name})
	}
}

// stream sends two SSE chunks; with a gate, the second waits until the test has read the first.
func (r *replica) stream(w http.ResponseWriter, req *http.Request, gate chan struct{}) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	fmt.Fprint(w, "data: {\"chunk\":1,\"replica\":\""+r.name+"\"}\n\n")
	fl.Flush()
	if gate != nil {
		select {
		case <-gate:
		case <-req.Context().Done():
			r.streamGone <- struct{}{}
			return
		}
	}
	fmt.Fprint(w, "data: {\"chunk\":2}\n\n")
	fl.Flush()
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

func writeReplicaJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// route is one replica of a circuit.
type route struct {
	port    int
	ratio   float64
	routeID string // "" = derived from the circuit id and port
	health  string // health_status as releases up to 26.4.3 send it; "" = absent
}

// circuitSpec is a circuit as the coordinator stores it.
type circuitSpec struct {
	id, subdomain, app string
	public             bool
	allowIPs           *string
	appMode            string // default inference
	routes             []route
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// derivedUUID is a stable uuid4-shaped id for seed, so a circuit renders the same text twice.
func derivedUUID(seed string) string {
	b := sha256.Sum256([]byte(seed))
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func routesValue(seed string, routes []route) []map[string]any {
	out := []map[string]any{}
	for i, r := range routes {
		id := r.routeID
		if id == "" {
			id = derivedUUID(seed + "/route/" + itoa(r.port))
		}
		ratio := r.ratio
		if ratio == 0 {
			ratio = 1
		}
		v := map[string]any{"route_id": id, "session_id": sessionOf(seed, r.port),
			"session_name": "replica-" + itoa(i), "kernel_host": "127.0.0.1", "kernel_port": r.port,
			"protocol": "http", "traffic_ratio": ratio}
		if r.health != "" {
			v["health_status"], v["last_health_check"], v["consecutive_failures"] = r.health, 1755650000.5, 0
		}
		out = append(out, v)
	}
	return out
}

// sessionOf is the session id routesValue gives the route on port.
func sessionOf(seed string, port int) string { return derivedUUID(seed + "/session/" + itoa(port)) }

// routesJSON renders routes of the circuit with id seed.
func routesJSON(seed string, routes []route) json.RawMessage {
	b, _ := json.Marshal(routesValue(seed, routes))
	return b
}

// json renders the circuit indented, so that a verbatim echo is distinguishable from a
// re-encoding.
func (c circuitSpec) json() json.RawMessage {
	mode := c.appMode
	if mode == "" {
		mode = "inference"
	}
	var allow any
	if c.allowIPs != nil {
		allow = *c.allowIPs
	}
	m := map[string]any{
		"id": c.id, "app": c.app, "protocol": "http", "worker": derivedUUID(c.id + "/worker"), "app_mode": mode,
		"frontend_mode": "wildcard", "envs": map[string]any{}, "arguments": nil, "open_to_public": c.public,
		"allowed_client_ips": allow, "port": nil, "subdomain": c.subdomain, "user_id": derivedUUID(c.id + "/user"),
		"endpoint_id": derivedUUID(c.id + "/endpoint"), "runtime_variant": "vllm", "route_info": routesValue(c.id, c.routes),
		"session_ids": []string{}, "created_at": "2026-08-20T01:02:03Z", "updated_at": "2026-08-20T01:02:03Z",
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	return b
}

// newCircuit is a private inference circuit with a fresh id.
func newCircuit(sub string, routes ...route) circuitSpec {
	return circuitSpec{id: newUUID(), subdomain: sub, routes: routes}
}

// mintToken signs claims with HS256 and key.
func mintToken(t testing.TB, claims jwt.MapClaims, key string) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tokenFor is a valid circuit token for circuit id.
func tokenFor(t testing.TB, id string) string {
	return mintToken(t, jwt.MapClaims{"id": id, "exp": time.Now().Add(time.Hour).Unix()}, e2eJWTSecret)
}

// waitServing polls a chat on host until it answers 200.
func (e *e2eEnv) waitServing(host string, header http.Header) {
	e.t.Helper()
	eventually(e.t, 15*time.Second, "circuit "+host+" serving", func() (bool, string) {
		st, _, body := e.chat(host, "any", header)
		return st == 200, fmt.Sprintf("%d %s", st, body)
	})
}

// createAndAck creates the circuit by event and fails unless it is acked within 15 s.
func (e *e2eEnv) createAndAck(c circuitSpec) {
	e.t.Helper()
	if _, err := e.coord.CreateCircuit(context.Background(), e.authority, c.json(), protocol.FormatArgs); err != nil {
		e.t.Fatalf("create circuit %s: %v", c.subdomain, err)
	}
}
