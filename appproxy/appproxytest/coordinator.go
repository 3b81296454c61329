package appproxytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"modelrelay/protocol"
)

// Coordinator is a double of Backend.AI's AppProxy coordinator: it validates requests
// the way the real one does, answers problem JSON, keeps workers by authority, and publishes real
// events on Redis. Serve it with httptest.NewServer(c).
type Coordinator struct {
	secret string
	rdb    *redis.Client // nil: REST only

	mu       sync.Mutex
	workers  map[string]*workerRow // by id
	circuits map[string][]storedCircuit
	requests []Request
	fail     int
	delays   map[string]time.Duration // by method: answers held back this long
	// OnRegister, when set, runs inside a successful PUT before the answer is written.
	onRegister func(authority string)
}

// Request is one call the coordinator received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// Subscribers is the number of subscribers on the events channel when the request arrived.
	Subscribers int64
	Status      int
}

type workerRow struct {
	id         string
	reg        map[string]any
	nodes      int
	heartbeats int
	created    string
}

type storedCircuit struct {
	id  string
	raw json.RawMessage
}

// NewCoordinator answers requests carrying secret; redisAddr ("" for none) is where its events go.
func NewCoordinator(secret, redisAddr string) *Coordinator {
	c := &Coordinator{secret: secret, workers: map[string]*workerRow{}, circuits: map[string][]storedCircuit{}}
	if redisAddr != "" {
		c.rdb = redis.NewClient(&redis.Options{Addr: redisAddr})
	}
	return c
}

// Close releases the Redis client.
func (c *Coordinator) Close() error {
	if c.rdb == nil {
		return nil
	}
	return c.rdb.Close()
}

// FailWith makes every request answer status (e.g. 500) until called with 0.
func (c *Coordinator) FailWith(status int) {
	c.mu.Lock()
	c.fail = status
	c.mu.Unlock()
}

// Delay holds back every answer to method (PATCH = heartbeat, GET = circuit pull) by d: the
// answer is computed when the request arrives and delivered d later, as from a coordinator whose
// database is slow to commit. d = 0 ends the delay.
func (c *Coordinator) Delay(method string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.delays == nil {
		c.delays = map[string]time.Duration{}
	}
	c.delays[method] = d
}

// Forget drops the workers registered under authorities (every worker when none is named), as a
// coordinator that lost its database would: their next heartbeat, pull or deregister gets 404.
func (c *Coordinator) Forget(authorities ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, w := range c.workers {
		if len(authorities) == 0 || slices.Contains(authorities, w.reg["authority"].(string)) {
			delete(c.workers, id)
		}
	}
}

// OnRegister sets a hook run inside each successful registration, before it is answered.
func (c *Coordinator) OnRegister(f func(authority string)) {
	c.mu.Lock()
	c.onRegister = f
	c.mu.Unlock()
}

// Requests is a copy of every request received so far.
func (c *Coordinator) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Request(nil), c.requests...)
}

// Nodes is the HA node count of the worker registered under authority (0 if none).
func (c *Coordinator) Nodes(authority string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.byAuthority(authority); w != nil {
		return w.nodes
	}
	return 0
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func (c *Coordinator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	if c.rdb != nil {
		if n, err := c.rdb.PubSubNumSub(r.Context(), protocol.EventsChannel).Result(); err == nil {
			rec.Subscribers = n[protocol.EventsChannel]
		}
	}
	c.mu.Lock()
	delay := c.delays[r.Method]
	c.mu.Unlock()
	buf := &heldResponse{header: http.Header{}}
	status := c.serve(buf, r, body)
	rec.Status = status
	c.mu.Lock()
	c.requests = append(c.requests, rec)
	c.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range buf.header {
		w.Header()[k] = v
	}
	w.WriteHeader(buf.status)
	w.Write(buf.body.Bytes())
}

// heldResponse is an answer computed now and written later.
type heldResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (h *heldResponse) Header() http.Header { return h.header }
func (h *heldResponse) WriteHeader(status int) {
	if h.status == 0 {
		h.status = status
	}
}
func (h *heldResponse) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return h.body.Write(b)
}

// serve answers one request and returns the status written.
func (c *Coordinator) serve(w http.ResponseWriter, r *http.Request, body []byte) int {
	if !strings.Contains(r.Header.Get("Accept"), "application/json") {
		// The real coordinator's error middleware renders HTML for clients that do not ask for JSON.
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotAcceptable)
		_, _ = io.WriteString(w, "<html><body>406 Not Acceptable</body></html>")
		return http.StatusNotAcceptable
	}
	c.mu.Lock()
	fail := c.fail
	c.mu.Unlock()
	if fail != 0 {
		return problem(w, fail, "internal-server-error", "Internal server error", "", "")
	}
	if r.Header.Get("X-BackendAI-Token") != c.secret {
		return problem(w, http.StatusUnauthorized, "invalid-credentials", "Unauthorized access", "E00003", "Invalid API secret")
	}
	if !uuidPattern.MatchString(r.Header.Get("X-BackendAI-RequestID")) {
		return problem(w, http.StatusBadRequest, "invalid-api-params", "Invalid API parameters", "E00001", "X-BackendAI-RequestID is not a UUID")
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/api/worker"), "/")
	switch {
	case r.URL.Path == "/api/worker" && r.Method == http.MethodPut:
		return c.register(w, r, body)
	case len(parts) == 2 && parts[0] == "" && parts[1] != "" && r.Method == http.MethodPatch:
		return c.heartbeat(w, parts[1])
	case len(parts) == 2 && parts[0] == "" && parts[1] != "" && r.Method == http.MethodDelete:
		return c.deregister(w, parts[1])
	case len(parts) == 3 && parts[0] == "" && parts[2] == "circuits" && r.Method == http.MethodGet:
		return c.listCircuits(w, parts[1])
	}
	return problem(w, http.StatusNotFound, "generic-not-found", "Not found", "", "no route "+r.Method+" "+r.URL.Path)
}

func (c *Coordinator) register(w http.ResponseWriter, r *http.Request, body []byte) int {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return problem(w, http.StatusBadRequest, "invalid-api-params", "Invalid API parameters", "E00001", "body is not application/json")
	}
	reg, err := validateRegistration(body)
	if err != nil {
		return problem(w, http.StatusBadRequest, "invalid-api-params", "Invalid API parameters", "E00001", err.Error())
	}
	authority := reg["authority"].(string)
	c.mu.Lock()
	row := c.byAuthority(authority)
	if row == nil {
		row = &workerRow{id: protocol.NewUUID(), created: timestamp()}
		c.workers[row.id] = row
	}
	row.reg = reg
	row.nodes++
	answer := row.answer()
	hook := c.onRegister
	c.mu.Unlock()
	if hook != nil {
		hook(authority)
	}
	return writeJSON(w, http.StatusOK, answer)
}

func (c *Coordinator) heartbeat(w http.ResponseWriter, id string) int {
	c.mu.Lock()
	row := c.workers[id]
	if row == nil {
		c.mu.Unlock()
		return notFound(w)
	}
	row.heartbeats++
	answer := row.answer()
	c.mu.Unlock()
	return writeJSON(w, http.StatusOK, answer)
}

func (c *Coordinator) deregister(w http.ResponseWriter, id string) int {
	c.mu.Lock()
	row := c.workers[id]
	if row != nil && row.nodes > 0 {
		row.nodes--
	}
	c.mu.Unlock()
	if row == nil {
		return notFound(w)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"success": true})
}

func (c *Coordinator) listCircuits(w http.ResponseWriter, id string) int {
	c.mu.Lock()
	row := c.workers[id]
	var list []json.RawMessage
	if row != nil {
		for _, sc := range c.circuits[row.reg["authority"].(string)] {
			list = append(list, sc.raw)
		}
	}
	c.mu.Unlock()
	if row == nil {
		return notFound(w)
	}
	if list == nil {
		list = []json.RawMessage{}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"circuits": list})
}

func (c *Coordinator) byAuthority(authority string) *workerRow {
	for _, w := range c.workers {
		if w.reg["authority"] == authority {
			return w
		}
	}
	return nil
}

func (w *workerRow) answer() map[string]any {
	out := map[string]any{}
	for k, v := range w.reg {
		out[k] = v
	}
	out["id"] = w.id
	out["status"] = "ALIVE"
	out["available_slots"] = -1
	out["occupied_slots"] = 0
	out["nodes"] = w.nodes
	out["slots"] = []any{}
	out["created_at"] = w.created
	out["updated_at"] = timestamp()
	return out
}

func notFound(w http.ResponseWriter) int {
	return problem(w, http.StatusNotFound, "object-not-found", "Object not found", "E00002", "worker not found")
}

func problem(w http.ResponseWriter, status int, slug, title, code, msg string) int {
	p := map[string]any{"type": "https://api.backend.ai/probs/" + slug, "title": title}
	if code != "" {
		p["error_code"] = code
	}
	if msg != "" {
		p["msg"] = msg
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
	return status
}

func writeJSON(w http.ResponseWriter, status int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
	return status
}

func timestamp() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") }

// validateRegistration applies the coordinator's schema for PUT /api/worker: every key present,
// each of its type.
func validateRegistration(body []byte) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, fmt.Errorf("body is not a JSON object")
	}
	checks := map[string]func(any) bool{
		"authority":                     nonEmptyString,
		"frontend_mode":                 oneOf("wildcard", "port"),
		"protocol":                      oneOf("http", "grpc", "h2", "tcp", "preopen"),
		"hostname":                      nonEmptyString,
		"tls_listen":                    isBool,
		"tls_advertised":                isBool,
		"api_port":                      isPort,
		"port_range":                    orNull(isPortRange),
		"wildcard_domain":               orNull(isString),
		"wildcard_traffic_port":         orNull(isPort),
		"filtered_apps_only":            isBool,
		"traefik_last_used_marker_path": orNull(isString),
		"accepted_traffics":             isTrafficList,
		"app_filters":                   isList,
	}
	for key, ok := range checks {
		v, present := m[key]
		if !present {
			return nil, fmt.Errorf("missing key %s", key)
		}
		if !ok(v) {
			return nil, fmt.Errorf("invalid value for %s", key)
		}
	}
	if m["frontend_mode"] == "wildcard" && m["wildcard_domain"] == nil {
		return nil, fmt.Errorf("wildcard_domain is required in wildcard mode")
	}
	return m, nil
}

func isString(v any) bool       { _, ok := v.(string); return ok }
func nonEmptyString(v any) bool { s, ok := v.(string); return ok && s != "" }
func isBool(v any) bool         { _, ok := v.(bool); return ok }
func isList(v any) bool         { _, ok := v.([]any); return ok }
func isPort(v any) bool {
	f, ok := v.(float64)
	return ok && f == float64(int(f)) && f >= 1 && f <= 65535
}
func isPortRange(v any) bool {
	l, ok := v.([]any)
	return ok && len(l) == 2 && isPort(l[0]) && isPort(l[1])
}
func isTrafficList(v any) bool {
	l, ok := v.([]any)
	if !ok {
		return false
	}
	for _, t := range l {
		if !oneOf("interactive", "inference")(t) {
			return false
		}
	}
	return true
}
func oneOf(values ...string) func(any) bool {
	return func(v any) bool {
		s, ok := v.(string)
		for _, want := range values {
			if ok && s == want {
				return true
			}
		}
		return false
	}
}
func orNull(f func(any) bool) func(any) bool {
	return func(v any) bool { return v == nil || f(v) }
}
