package main

// The chaos test of several nodes (docs/several-nodes.md): three relay nodes (the real binary) share
// one AppProxy authority, one Redis, one PostgreSQL database and the Go test coordinator; four
// real worker daemons are each attached to all three relays; one circuit (its replica an
// in-process fake model server) and one relay-worker model (the daemons' backend is the same
// fake, reached under a per-daemon path so the fake knows which daemon called). A client that
// plays the load balancer spreads 2,000 requests (streaming and not, circuit and relay-worker)
// round robin over the nodes at concurrency 60 while the test SIGKILLs node 1, restarts it on
// its address, SIGKILLs daemons 0 and 1 and restarts them. A key with a rate limit is sent a
// burst spread over the three nodes meanwhile.
//
// What must hold:
//   - every request succeeds (200, the complete answer to its own prompt, exactly once: a
//     stream ends with one [DONE]), or ends with the relay's clean SSE error (worker_lost) if it
//     was a relay-worker stream running on a daemon that was killed, or sees a torn connection
//     if the node holding its connection was the one killed at that moment; a connection
//     refused (nothing sent) is retried on another node, as a load balancer does, and counted;
//   - nothing hangs past the client's timeout (20 s);
//   - nothing is answered twice: the model server sees a prompt a second time only when the
//     first call went through a daemon that was killed while it ran (the relay's requeue, which
//     happens only before the first byte reached the client); a broken stream is never re-run;
//   - the key's rate limit holds across the three nodes within 10%;
//   - the coordinator's `nodes` count is what the coordinator can know at every step (see
//     chaosNodesNote).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"modelrelay/appproxy/appproxytest"
	"modelrelay/relay/keys/pgtest"
)

// chaosNodesNote is why the expected `nodes` count does not drop when a node is SIGKILLed.
//
// The coordinator keeps one worker row per authority; its `nodes` is the number of
// registrations (PUT /api/worker) minus deregistrations (DELETE), in Backend.AI's coordinator
// as in appproxytest.Coordinator. Heartbeats are per row (every node
// of the authority PATCHes the same id), so the row never goes LOST while one node lives, and
// nothing tells the coordinator that one node of several vanished. A SIGKILLed node cannot
// deregister: the count stays 3, and the restarted node registers again, making it 4. What the
// test asserts at every step is therefore the coordinator's own arithmetic, exactly: 3 with
// three nodes up, still 3 after the SIGKILL (no DELETE arrived), 4 after the restart (a fourth
// PUT, carrying the same node_id "node-1", which a coordinator that tracks node ids can
// de-duplicate), unchanged by daemons coming and going, then one less for each node stopped
// with SIGTERM (each DELETEs once), leaving 1: the registration of the killed process.
const chaosNodesNote = "nodes = registrations - deregistrations; a SIGKILLed node never deregisters"

const (
	chaosTotal        = 2000
	chaosConcurrency  = 60
	chaosTimeout      = 20 * time.Second // per request, on the client
	chaosModel        = "chaos-rw"       // the relay-worker model
	chaosCircuitSub   = "chaos"
	chaosAuthority    = "modelrelay-chaos"
	chaosWorkerSecret = "chaos-worker-secret"
	chaosSlots        = 4 // each daemon's --max-concurrency: the relays race for them
	chaosDaemons      = 4
	chaosRPM          = 60 // the limited key's rate_limit_rpm
	chaosBurst        = 2 * chaosRPM
	chaosWords        = 6 // words after the prompt in an answer (a stream sends one per chunk)
)

// Where the chaos happens, as positions in the request sequence: a worker about to send
// request i waits for every gate at or below i.
const (
	chaosKillNodeAt       = 400  // gate: node 1 has been SIGKILLed
	chaosRestartNodeAt    = 800  // node 1 restarts once this request is taken (no gate)
	chaosNodeBackAt       = 1200 // gate: node 1 is back in the load balancer's rotation
	chaosKillDaemonsAt    = 1300 // gate: daemons 0 and 1 have been SIGKILLed
	chaosRestartDaemonsAt = 1700 // daemons 0 and 1 restart once this request is taken (no gate)
)

var chaosPhaseNames = []string{"steady", "node1-down", "node1-restart", "daemons-down", "daemons-back"}

func chaosPhase(i int) int {
	switch {
	case i < chaosKillNodeAt:
		return 0
	case i < chaosRestartNodeAt:
		return 1
	case i < chaosKillDaemonsAt:
		return 2
	case i < chaosRestartDaemonsAt:
		return 3
	}
	return 4
}

func TestE2EChaosSeveralNodes(t *testing.T) {
	began := time.Now()
	c := &chaosCluster{t: t, bin: serverBinary(t)}
	workerBinary(t)
	c.redisAddr, _ = appproxytest.StartRedis(t)
	c.db = pgtest.Shared(t).NewDatabase(t)
	c.coord = appproxytest.NewCoordinator(e2eSecret, c.redisAddr)
	t.Cleanup(func() { c.coord.Close() })
	cs := httptest.NewServer(c.coord)
	t.Cleanup(cs.Close)
	c.coordURL = cs.URL
	c.backend = newChaosBackend(t)
	circuit := newCircuit(chaosCircuitSub, route{port: c.backend.port})
	if _, err := c.coord.AddCircuit(chaosAuthority, circuit.json()); err != nil {
		t.Fatal(err)
	}
	c.circuitToken = tokenFor(t, circuit.id)
	c.probe = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	// The load balancer: a new connection per request, so that a request to a dead node fails
	// at connect (nothing sent: retried on another node) and any later failure means the
	// request reached a node. Its dialer also refuses nodes out of rotation (see dial).
	lbTransport := &http.Transport{Proxy: nil, DisableKeepAlives: true, DialContext: c.dial}
	c.client = &http.Client{Transport: lbTransport}
	t.Cleanup(lbTransport.CloseIdleConnections)

	// Three nodes, one authority.
	c.byAddr = map[string]*chaosNode{}
	for i := range c.nodes {
		c.nodes[i] = c.startNode(i)
		c.byAddr[c.nodes[i].addr] = c.nodes[i]
	}
	var relays []string
	for _, n := range c.nodes {
		relays = append(relays, "http://"+n.addr)
	}
	// Four daemons, each attached to all three relays.
	for i := range c.daemons {
		d := &chaosDaemon{idx: i, name: fmt.Sprintf("chaos-d%d", i), logs: &lockedBuffer{}}
		d.args = []string{"--proxy-url", strings.Join(relays, ","), "--worker-secret", chaosWorkerSecret,
			"--backend-url", fmt.Sprintf("%s/d%d", c.backend.url, i), "--models", chaosModel,
			"--max-concurrency", strconv.Itoa(chaosSlots), "--worker-name", d.name, "--log-level", "info"}
		c.daemons[i] = d
		c.startDaemon(d)
		t.Cleanup(func() {
			if d.running {
				d.cmd.Process.Kill()
				<-d.exited
				d.running = false
			}
			if t.Failed() {
				t.Logf("daemon %s output (tail):\n%s", d.name, d.logs.tail(4000))
			}
		})
	}

	c.loadKey = createKey(t, c.nodes[0].addr, `{"name":"chaos-load"}`).Secret
	c.limitedKey = createKey(t, c.nodes[0].addr, fmt.Sprintf(`{"name":"chaos-limited","rate_limit_rpm":%d}`, chaosRPM)).Secret
	for _, n := range c.nodes {
		n.env.waitReady()
		eventually(t, 20*time.Second, fmt.Sprintf("node %d serving with every daemon attached", n.idx), func() (bool, string) {
			return c.serving(n, chaosDaemons)
		})
		n.inRotation.Store(true)
	}
	c.step("three nodes up", 3)
	ids := map[string]bool{}
	for _, n := range c.nodes {
		ids[n.env.workerID()] = true
	}
	if len(ids) != 1 {
		t.Errorf("the three nodes report worker ids %v, want one (one row per authority)", ids)
	}
	setup := time.Since(began)

	results, limit, loadTime := c.runChaos()

	// After the load: every daemon back on every node, then each node stopped with SIGTERM.
	for _, n := range c.nodes {
		eventually(t, 30*time.Second, fmt.Sprintf("node %d sees the four daemons again", n.idx), func() (bool, string) {
			w, why := c.workersOn(n)
			return w == chaosDaemons, why
		})
	}
	c.step("after the load", 4)
	if n := c.deletes(); n != 0 {
		t.Errorf("the coordinator saw %d DELETE before any node was stopped with SIGTERM", n)
	}
	c.checkNodeIDs()
	for i, n := range c.nodes {
		c.sigterm(n)
		c.step(fmt.Sprintf("node %d stopped with SIGTERM", i), 3-i)
	}

	problems := c.validate(results, limit)
	c.summary(results, limit, setup, loadTime, time.Since(began))
	for _, p := range problems {
		t.Error(p)
	}
}

// chaosCluster is the whole system and the load balancer in front of it.
type chaosCluster struct {
	t            *testing.T
	bin          string
	redisAddr    string
	db           string
	coord        *appproxytest.Coordinator
	coordURL     string
	backend      *chaosBackend
	circuitToken string
	loadKey      string
	limitedKey   string
	nodes        [3]*chaosNode
	daemons      [chaosDaemons]*chaosDaemon
	byAddr       map[string]*chaosNode // written before the load, then only read
	client       *http.Client          // the load balancer's
	probe        *http.Client          // health checks
	rr           atomic.Uint64         // the round-robin cursor
	loadStart    time.Time             // written before the load's goroutines start

	mu          sync.Mutex
	nodeKills   []chaosWindow // node SIGKILLs
	daemonKills []chaosWindow // daemon SIGKILLs
	steps       []string      // the coordinator's nodes count at each step
}

// chaosWindow is one SIGKILL: from just before the signal to when the process was reaped.
type chaosWindow struct {
	who         int
	start, done time.Time
}

func (w chaosWindow) overlaps(start, end time.Time) bool {
	return start.Before(w.done) && !end.Before(w.start)
}

// chaosNode is one relay process (and its restarts), on one address for the whole test.
type chaosNode struct {
	idx     int
	addr    string
	env     *e2eEnv // for the harness's readiness and /health helpers
	logs    *lockedBuffer
	cmd     *exec.Cmd
	exited  chan error
	running bool // test goroutine only

	// inRotation is whether the load balancer sends new requests to the node. fence is held
	// for reading by a connect to the node and for writing while the node leaves rotation, so
	// that no connect that saw it in rotation lands on the next process before it is ready.
	inRotation atomic.Bool
	fence      sync.RWMutex
}

type chaosDaemon struct {
	idx     int
	name    string
	args    []string
	logs    *lockedBuffer
	cmd     *exec.Cmd
	exited  chan error
	running bool // test goroutine only
}

// nodeEnv is what each node gets besides the e2e base environment (AppProxy mode on the test
// coordinator, short heartbeats, the admin token): its node id, the worker secret for the
// daemons, client keys on the shared database and limits shared through Redis.
func (c *chaosCluster) nodeEnv(i int) map[string]string {
	return map[string]string{
		"APPPROXY_NODE_ID":            "node-" + itoa(i),
		"WORKER_SECRET":               chaosWorkerSecret,
		"DATABASE_URL":                c.db,
		"MODELRELAY_REQUIRE_API_KEYS": "true",
		"REDIS_URL":                   "redis://" + c.redisAddr,
		"LOG_LEVEL":                   "info",
	}
}

// startNode runs node i on a free address.
func (c *chaosCluster) startNode(i int) *chaosNode {
	t := c.t
	n := &chaosNode{idx: i, logs: &lockedBuffer{}}
	for attempt := 0; ; attempt++ {
		addr := freeAddr(t)
		err := c.launch(n, addr)
		if err == nil {
			n.addr = addr
			break
		}
		if attempt >= 5 || !strings.Contains(n.logs.String(), "listen on") {
			t.Fatalf("node %d did not start: %v\n%s", i, err, n.logs.tail(4000))
		}
	}
	n.env = &e2eEnv{t: t, authority: chaosAuthority, redisAddr: c.redisAddr, coord: c.coord, coordURL: c.coordURL,
		addr: n.addr, client: c.probe}
	t.Cleanup(func() {
		if n.running {
			n.cmd.Process.Kill()
			<-n.exited
			n.running = false
		}
		if t.Failed() {
			t.Logf("node %d output (tail):\n%s", i, n.logs.tail(8000))
		}
	})
	return n
}

// launch starts n's process on addr and waits until it listens.
func (c *chaosCluster) launch(n *chaosNode, addr string) error {
	env := &e2eEnv{t: c.t, authority: chaosAuthority, redisAddr: c.redisAddr, coordURL: c.coordURL}
	cmd, exited := runBinary(c.t, c.bin, env, addr, c.nodeEnv(n.idx), n.logs)
	if err := waitListening(addr, exited); err != nil {
		if !errors.Is(err, errServerExited) { // else exited was already read
			cmd.Process.Kill()
			<-exited
		}
		return err
	}
	n.cmd, n.exited, n.running = cmd, exited, true
	return nil
}

func (c *chaosCluster) startDaemon(d *chaosDaemon) {
	cmd := exec.Command(workerBinary(c.t), d.args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	d.cmd, d.exited, d.running = cmd, exited, true
}

// killNode SIGKILLs node n and records when.
func (c *chaosCluster) killNode(n *chaosNode) {
	w := chaosWindow{who: n.idx, start: time.Now()}
	n.cmd.Process.Kill()
	<-n.exited
	n.running = false
	w.done = time.Now()
	c.mu.Lock()
	c.nodeKills = append(c.nodeKills, w)
	c.mu.Unlock()
}

// killDaemons SIGKILLs the daemons at once and records when.
func (c *chaosCluster) killDaemons(ds ...*chaosDaemon) {
	start := time.Now()
	for _, d := range ds {
		d.cmd.Process.Kill()
	}
	for _, d := range ds {
		<-d.exited
		d.running = false
	}
	done := time.Now()
	c.mu.Lock()
	for _, d := range ds {
		c.daemonKills = append(c.daemonKills, chaosWindow{who: d.idx, start: start, done: done})
	}
	c.mu.Unlock()
}

// sigterm stops n gracefully: it must exit 0.
func (c *chaosCluster) sigterm(n *chaosNode) {
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		c.t.Fatal(err)
	}
	select {
	case err := <-n.exited:
		n.running = false
		if err != nil {
			c.t.Errorf("node %d exited with %v after SIGTERM, want 0", n.idx, err)
		}
	case <-time.After(30 * time.Second):
		c.t.Fatalf("node %d did not exit within 30 s of SIGTERM", n.idx)
	}
}

var errOutOfRotation = errors.New("node out of the load balancer's rotation")

// dial is the load balancer's connect: it refuses a node out of rotation as a dead one would.
func (c *chaosCluster) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if n := c.byAddr[addr]; n != nil {
		n.fence.RLock()
		defer n.fence.RUnlock()
		if !n.inRotation.Load() {
			return nil, &net.OpError{Op: "dial", Net: network, Err: errOutOfRotation}
		}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// leaveRotation takes n out of rotation; a connect already past the check has finished.
func (n *chaosNode) leaveRotation() {
	n.fence.Lock()
	n.inRotation.Store(false)
	n.fence.Unlock()
}

// refusedAtConnect reports a request that never reached a node.
func refusedAtConnect(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, errOutOfRotation)
}

// get is a health-check GET on n (its own host).
func (c *chaosCluster) get(n *chaosNode, path string) (int, []byte, error) {
	resp, err := c.probe.Get("http://" + n.addr + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// workersOn is /health's workers_connected of n.
func (c *chaosCluster) workersOn(n *chaosNode) (int, string) {
	st, b, err := c.get(n, "/health")
	var h struct {
		Workers int `json:"workers_connected"`
	}
	if err != nil || st != 200 || json.Unmarshal(b, &h) != nil {
		return -1, fmt.Sprintf("/health: %d %v %.300s", st, err, b)
	}
	return h.Workers, fmt.Sprintf("workers_connected %d", h.Workers)
}

// serving is the load balancer's health check: ready, registered, at least minWorkers daemons
// attached (the relay-worker model is listed), and one circuit request and one relay-worker
// request answered. (A node that just started knows the relay-worker model only once a daemon
// has dialed it: before that it answers 404 for it, so /readyz alone is not enough.)
func (c *chaosCluster) serving(n *chaosNode, minWorkers int) (bool, string) {
	if st, b, err := c.get(n, "/readyz"); err != nil || st != 200 {
		return false, fmt.Sprintf("/readyz %d %v %.200s", st, err, b)
	}
	if n.env.workerID() == "" {
		return false, "not registered"
	}
	if w, why := c.workersOn(n); w < minWorkers {
		return false, why
	}
	st, b, err := c.get(n, "/v1/models")
	if err != nil || st != 200 || !strings.Contains(string(b), `"`+chaosModel+`"`) {
		return false, fmt.Sprintf("/v1/models %d %v %.300s", st, err, b)
	}
	for _, circuit := range []bool{true, false} {
		r := &chaosResult{marker: "probe", circuit: circuit}
		c.send(context.Background(), r, c.requestBody(r), func(int) int { return n.idx }, true)
		if r.outcome != "ok" {
			return false, fmt.Sprintf("probe (circuit %v): %s %s", circuit, r.outcome, r.detail)
		}
	}
	return true, ""
}

// step records the coordinator's nodes count at a step of the test and checks it.
func (c *chaosCluster) step(label string, want int) {
	got := c.coord.Nodes(chaosAuthority)
	c.mu.Lock()
	c.steps = append(c.steps, fmt.Sprintf("%s: nodes=%d", label, got))
	c.mu.Unlock()
	if got != want {
		c.t.Errorf("coordinator nodes = %d at %q, want %d (%s)", got, label, want, chaosNodesNote)
	}
}

func (c *chaosCluster) deletes() int {
	n := 0
	for _, r := range c.coord.Requests() {
		if r.Method == http.MethodDelete {
			n++
		}
	}
	return n
}

// checkNodeIDs: each registration named its node; node 1 registered twice under its id.
func (c *chaosCluster) checkNodeIDs() {
	count := map[string]int{}
	for _, r := range c.coord.Requests() {
		if r.Method != http.MethodPut || r.Status != 200 {
			continue
		}
		var reg struct {
			Authority string `json:"authority"`
			NodeID    string `json:"node_id"`
		}
		json.Unmarshal(r.Body, &reg)
		if reg.Authority == chaosAuthority {
			count[reg.NodeID]++
		}
	}
	want := map[string]int{"node-0": 1, "node-1": 2, "node-2": 1}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		c.t.Errorf("registrations by node_id %v, want %v", count, want)
	}
}

// chaosResult is one client request and what it saw.
type chaosResult struct {
	idx        int
	marker     string // the prompt, unique per request
	circuit    bool   // to the circuit's host (else the relay-worker model on the relay's host)
	stream     bool
	limited    bool // sent with the rate-limited key
	node       int  // the node that took it (the last attempt)
	refused    int  // attempts refused at connect before it
	start, end time.Time
	status     int
	target     string // x-modelrelay-target
	outcome    string // ok | sse_error | torn | limited | timeout | bad
	detail     string
}

func (r *chaosResult) kind() string {
	k := "worker"
	if r.circuit {
		k = "circuit"
	}
	if r.stream {
		return k + "/stream"
	}
	return k + "/json"
}

func (c *chaosCluster) requestBody(r *chaosResult) []byte {
	model := chaosModel
	if r.circuit {
		model = "chaos-circuit"
	}
	b, _ := json.Marshal(map[string]any{"model": model, "stream": r.stream,
		"messages": []map[string]string{{"role": "user", "content": r.marker}}})
	return b
}

// send runs one request: to the node pick(attempt) names, again to the next pick while
// connects are refused, within the client timeout. probe requests skip the load balancer's
// rotation (a node is probed before it rejoins).
func (c *chaosCluster) send(ctx context.Context, r *chaosResult, body []byte, pick func(attempt int) int, probe bool) {
	ctx, cancel := context.WithTimeout(ctx, chaosTimeout)
	defer cancel()
	header := http.Header{"Content-Type": {"application/json"}}
	switch {
	case r.circuit:
		header.Set("Authorization", "Bearer "+c.circuitToken)
	case r.limited:
		header.Set("Authorization", "Bearer "+c.limitedKey)
	default:
		header.Set("Authorization", "Bearer "+c.loadKey)
	}
	client := c.client
	if probe {
		client = c.probe
	}
	r.start = time.Now()
	defer func() { r.end = time.Now() }()
	for attempt := 0; ; attempt++ {
		r.node = pick(attempt)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.nodes[r.node].addr+"/v1/chat/completions", bytes.NewReader(body))
		if err != nil {
			r.outcome, r.detail = "bad", err.Error()
			return
		}
		req.Header = header.Clone()
		if r.circuit {
			req.Host = circuitHost(chaosCircuitSub)
		}
		resp, err := client.Do(req)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				r.outcome, r.detail = "timeout", err.Error()
			case refusedAtConnect(err):
				r.refused++
				if attempt > 20 {
					time.Sleep(10 * time.Millisecond) // every node refusing is a failure the timeout reports
				}
				continue
			default:
				r.outcome, r.detail = "torn", err.Error()
			}
			return
		}
		b, readErr := io.ReadAll(resp.Body)
		resp.Body.Close()
		r.status, r.target = resp.StatusCode, resp.Header.Get("X-Modelrelay-Target")
		r.classify(resp.Header, b, readErr, ctx.Err())
		return
	}
}

// chaosAnswer is what the fake model answers to prompt, in the pieces a stream sends.
func chaosAnswer(prompt string) []string {
	parts := []string{"ok ", prompt}
	for i := range chaosWords {
		parts = append(parts, " w"+itoa(i))
	}
	return parts
}

// classify reads the answer: the whole answer to this request's own prompt, once, or one of
// the ends a chaos may cause (checked against the kills later, in validate).
func (r *chaosResult) classify(h http.Header, body []byte, readErr, ctxErr error) {
	want := strings.Join(chaosAnswer(r.marker), "")
	switch {
	case ctxErr != nil:
		r.outcome, r.detail = "timeout", fmt.Sprintf("%d after %s: %v; %.300s", r.status, time.Since(r.start), ctxErr, body)
	case r.status == http.StatusTooManyRequests && r.limited:
		_, _, code, _ := errorOf(body)
		if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 || code != "rate_limit_exceeded" {
			r.outcome, r.detail = "bad", fmt.Sprintf("429 with Retry-After %q, code %q: %.300s", h.Get("Retry-After"), code, body)
			return
		}
		r.outcome = "limited"
	case r.status != http.StatusOK:
		r.outcome, r.detail = "bad", fmt.Sprintf("status %d: %.400s", r.status, body)
	case !r.stream:
		var doc struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		switch {
		case readErr != nil:
			r.outcome, r.detail = "torn", fmt.Sprintf("reading the body: %v", readErr)
		case json.Unmarshal(body, &doc) != nil || len(doc.Choices) != 1 || doc.Choices[0].Message.Content != want:
			r.outcome, r.detail = "bad", fmt.Sprintf("answer is not the one to %q: %.400s", r.marker, body)
		default:
			r.outcome = "ok"
		}
	default:
		s := parseChaosStream(body)
		switch {
		case !strings.HasPrefix(want, s.content):
			r.outcome, r.detail = "bad", fmt.Sprintf("streamed text %q is not a prefix of the answer to %q", s.content, r.marker)
		case s.bad != "" && readErr == nil:
			r.outcome, r.detail = "bad", s.bad
		case readErr != nil && s.errCode == "":
			r.outcome, r.detail = "torn", fmt.Sprintf("stream broke after %q: %v", s.content, readErr)
		case s.errCode != "":
			r.outcome, r.detail = "sse_error", fmt.Sprintf("%s %q after %q (read error %v)", s.errCode, s.errMsg, s.content, readErr)
			if s.done != 0 {
				r.outcome, r.detail = "bad", "an error event and [DONE]: "+r.detail
			}
		case s.done == 1 && s.content == want && !s.partial:
			r.outcome = "ok"
		default:
			r.outcome, r.detail = "bad", fmt.Sprintf("incomplete stream (%d [DONE], text %q): %.400s", s.done, s.content, body)
		}
	}
}

// chaosStream is what an OpenAI SSE stream carried.
type chaosStream struct {
	content string
	done    int
	errCode string
	errMsg  string
	partial bool   // it ended inside an event
	bad     string // an event after the end, or one that does not parse
}

func parseChaosStream(b []byte) chaosStream {
	var s chaosStream
	blocks := strings.Split(string(b), "\n\n")
	for i, blk := range blocks {
		if i == len(blocks)-1 { // after the last blank line: nothing, unless the stream was cut
			s.partial = strings.TrimSpace(blk) != ""
			break
		}
		if s.done > 0 || s.errCode != "" {
			s.bad = fmt.Sprintf("an event after the end of the stream: %q", blk)
			return s
		}
		var data string
		for _, line := range strings.Split(blk, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				data += d
			}
		}
		if data == "[DONE]" {
			s.done++
			continue
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error *struct {
				Message string  `json:"message"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			s.bad = fmt.Sprintf("an event that does not parse: %q", blk)
			return s
		}
		if ev.Error != nil {
			s.errCode, s.errMsg = deref(ev.Error.Code), ev.Error.Message
			if s.errCode == "" {
				s.errCode = "(none)"
			}
			continue
		}
		for _, ch := range ev.Choices {
			s.content += ch.Delta.Content
		}
	}
	return s
}

// chaosLimit is the rate-limited key's burst.
type chaosLimit struct {
	results []chaosResult
	elapsed time.Duration
}

// runChaos runs the load and the chaos schedule; it returns once every request has ended.
func (c *chaosCluster) runChaos() ([]chaosResult, *chaosLimit, time.Duration) {
	t := c.t
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// However this function ends (t.Fatal included), every request goroutine ends with it.
	defer func() {
		cancel()
		wg.Wait()
	}()

	type gate struct {
		at   int
		open chan struct{}
	}
	gates := []*gate{{at: chaosKillNodeAt}, {at: chaosNodeBackAt}, {at: chaosKillDaemonsAt}}
	for _, g := range gates {
		g.open = make(chan struct{})
	}
	results := make([]chaosResult, chaosTotal)
	var next atomic.Int64
	pick := func(int) int {
		for {
			if i := int(c.rr.Add(1) % uint64(len(c.nodes))); c.nodes[i].inRotation.Load() {
				return i
			}
		}
	}
	c.loadStart = time.Now()
	for range chaosConcurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= chaosTotal {
					return
				}
				for _, g := range gates {
					if i >= g.at {
						select {
						case <-g.open:
						case <-ctx.Done():
							return
						}
					}
				}
				r := &results[i]
				r.idx, r.marker = i, fmt.Sprintf("chaos-%04d", i)
				r.circuit, r.stream = i%4 < 2, i%2 == 1
				c.send(ctx, r, c.requestBody(r), pick, false)
			}
		})
	}
	waitTaken := func(n int) {
		for next.Load() < int64(n) && ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
		}
	}

	// 1. SIGKILL node 1 while requests run on it.
	waitTaken(chaosKillNodeAt)
	node1 := c.nodes[1]
	c.killNode(node1)
	c.step("node 1 SIGKILLed", 3)
	close(gates[0].open)

	// 2. Restart node 1 on its address once the load has run a while without it; it rejoins
	// the rotation when it serves both models.
	waitTaken(chaosRestartNodeAt)
	c.step("node 1 still dead, before its restart", 3) // heartbeats of the others went on; no DELETE
	node1.leaveRotation()
	for attempt := 0; ; attempt++ { // the address is free again once the old process is reaped
		err := c.launch(node1, node1.addr)
		if err == nil {
			break
		}
		if attempt >= 20 || !strings.Contains(node1.logs.String(), "listen on") {
			t.Fatalf("node 1 did not restart on %s: %v\n%s", node1.addr, err, node1.logs.tail(4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	eventually(t, 30*time.Second, "node 1 serving again", func() (bool, string) { return c.serving(node1, 1) })
	c.step("node 1 restarted", 4)
	node1.inRotation.Store(true)

	// The rate-limited key's burst, spread over the three nodes, alongside the load.
	limit := &chaosLimit{results: make([]chaosResult, chaosBurst)}
	limitStart := time.Now()
	var limitNext atomic.Int64
	for range 20 {
		wg.Go(func() {
			for {
				i := int(limitNext.Add(1) - 1)
				if i >= chaosBurst {
					return
				}
				r := &limit.results[i]
				r.idx, r.marker, r.limited = i, fmt.Sprintf("limit-%03d", i), true
				c.send(ctx, r, c.requestBody(r), func(attempt int) int { return (i + attempt) % len(c.nodes) }, false)
			}
		})
	}
	close(gates[1].open)

	// 3. SIGKILL daemons 0 and 1 while requests run on them.
	waitTaken(chaosKillDaemonsAt)
	c.killDaemons(c.daemons[0], c.daemons[1])
	close(gates[2].open)
	for _, n := range c.nodes {
		eventually(t, 10*time.Second, fmt.Sprintf("node %d without the killed daemons", n.idx), func() (bool, string) {
			w, why := c.workersOn(n)
			return w >= 0 && w <= chaosDaemons-2, why
		})
	}
	c.step("daemons 0 and 1 SIGKILLed", 4)

	// 4. Restart them.
	waitTaken(chaosRestartDaemonsAt)
	c.startDaemon(c.daemons[0])
	c.startDaemon(c.daemons[1])
	c.step("daemons 0 and 1 restarted", 4)

	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(3 * chaosTimeout):
		t.Fatalf("the load did not end within %s; %d of %d requests taken", 3*chaosTimeout, next.Load(), chaosTotal)
	}
	// The burst's admissions all happened between its first send and its last answer.
	for _, r := range limit.results {
		limit.elapsed = max(limit.elapsed, r.end.Sub(limitStart))
	}
	return results, limit, time.Since(c.loadStart)
}

// validate checks every outcome against the kills, the model server's calls against the
// answers, and the key's limit; it returns what failed.
func (c *chaosCluster) validate(results []chaosResult, limit *chaosLimit) []string {
	var problems []string
	fail := func(format string, args ...any) {
		if len(problems) < 40 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	c.mu.Lock()
	nodeKills, daemonKills := c.nodeKills, c.daemonKills
	c.mu.Unlock()
	// killedDaemon: a call through a daemon that died before its answer reached the relay. The
	// model server may have written the whole answer just before the SIGKILL, while the daemon
	// still had it to forward: a call that ended up to a second before the kill counts too
	// (longer would be a daemon sitting on an answer, which the client's wait would show).
	killedDaemon := func(via string, start, end time.Time) bool {
		for _, w := range daemonKills {
			if via == fmt.Sprintf("d%d", w.who) && start.Before(w.done) && end.After(w.start.Add(-time.Second)) {
				return true
			}
		}
		return false
	}
	calls := c.backend.snapshot()
	all := append(slices.Clone(results), limit.results...)
	for i := range all {
		r := &all[i]
		label := fmt.Sprintf("request %s (%s, node %d, %s–%s)", r.marker, r.kind(), r.node,
			r.start.Format("15:04:05.000"), r.end.Format("15:04:05.000"))
		switch r.outcome {
		case "ok":
			if !r.circuit && !strings.HasPrefix(r.target, "chaos-d") {
				fail("%s: served by %q, want a daemon", label, r.target)
			}
		case "limited":
		case "sse_error":
			killed := false
			for _, w := range daemonKills {
				killed = killed || (r.target == c.daemons[w.who].name && w.overlaps(r.start, r.end))
			}
			if r.circuit || !r.stream || !killed || !strings.HasPrefix(r.detail, "worker_lost ") {
				fail("%s ended with an SSE error (%s) but was not a stream running on a killed daemon (target %q)", label, r.detail, r.target)
			}
		case "torn":
			killed := false
			for _, w := range nodeKills {
				killed = killed || (w.who == r.node && w.overlaps(r.start, r.end))
			}
			if !killed {
				fail("%s: torn connection, but node %d was not being killed: %s", label, r.node, r.detail)
			}
		default:
			fail("%s: %s %s", label, r.outcome, r.detail)
		}
		// The model server's calls for this prompt: every call but the last went through a
		// daemon killed while it ran (the requeue of a request that had sent the client
		// nothing); the circuit's replica never failed, so it sees each prompt once.
		cs := calls[r.marker]
		if len(cs) == 0 && (r.outcome == "ok" || r.outcome == "sse_error") {
			fail("%s: answered, but the model server never saw it", label)
		}
		for j, call := range cs {
			if (call.via == "circuit") != r.circuit {
				fail("%s: the model server saw it via %s", label, call.via)
			}
			if j < len(cs)-1 && !killedDaemon(call.via, call.start, call.end) {
				fail("%s: the model server saw it %d times; call %d (via %s, %s–%s, answer written whole: %v) was not cut by a daemon's death: answered twice",
					label, len(cs), j+1, call.via, call.start.Format("15:04:05.000"), call.end.Format("15:04:05.000"), call.finished)
			}
		}
		if r.outcome == "sse_error" && len(cs) > 0 && !killedDaemon(cs[len(cs)-1].via, cs[len(cs)-1].start, cs[len(cs)-1].end) {
			fail("%s: its stream broke, then the model server was asked again (via %s): a broken stream re-run", label, cs[len(cs)-1].via)
		}
	}
	// No process crashed on its own (a SIGKILL leaves no trace in the output).
	for _, n := range c.nodes {
		if out := n.logs.String(); strings.Contains(out, "panic:") || strings.Contains(out, "fatal error:") {
			fail("node %d crashed:\n%s", n.idx, n.logs.tail(4000))
		}
	}
	for _, d := range c.daemons {
		if out := d.logs.String(); strings.Contains(out, "panic:") || strings.Contains(out, "fatal error:") {
			fail("daemon %s crashed:\n%s", d.name, d.logs.tail(4000))
		}
	}
	// The key's rate limit, over three nodes: its bucket (chaosRPM requests) plus what refilled
	// while the burst ran, within 10% of the limit. Each node on its own would admit up to
	// chaosRPM, three times as many.
	admitted := 0
	for _, r := range limit.results {
		if r.outcome == "ok" {
			admitted++
		}
	}
	refill := int(limit.elapsed.Seconds() * chaosRPM / 60)
	slack := chaosRPM / 10
	if admitted < chaosRPM-slack || admitted > chaosRPM+refill+slack {
		fallback := ""
		for _, n := range c.nodes {
			if strings.Contains(n.logs.String(), "Redis unavailable") {
				fallback += fmt.Sprintf(" node %d fell back to its own buckets (Redis unavailable).", n.idx)
			}
		}
		fail("the key limited to %d rpm had %d of %d requests admitted over three nodes in %s; want %d (+%d refilled) within 10%%.%s",
			chaosRPM, admitted, chaosBurst, limit.elapsed.Round(time.Millisecond), chaosRPM, refill, fallback)
	}
	return problems
}

// summary logs the counts by phase, node and kind, the retries, the model server's repeats,
// the key's burst and the coordinator's count at each step.
func (c *chaosCluster) summary(results []chaosResult, limit *chaosLimit, setup, load, total time.Duration) {
	t := c.t
	outcomes := []string{"ok", "sse_error", "torn", "limited", "timeout", "bad"}
	table := func(title string, keys []string, keyOf func(*chaosResult) string, rs []chaosResult) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%-16s", title)
		for _, o := range outcomes {
			fmt.Fprintf(&b, " %9s", o)
		}
		fmt.Fprintf(&b, " %9s %9s %9s\n", "refused", "max-ms", "p50-ms")
		for _, k := range keys {
			count := map[string]int{}
			refused := 0
			var lat []time.Duration
			for i := range rs {
				if keyOf(&rs[i]) != k {
					continue
				}
				count[rs[i].outcome]++
				refused += rs[i].refused
				lat = append(lat, rs[i].end.Sub(rs[i].start))
			}
			slices.Sort(lat)
			var mx, p50 time.Duration
			if len(lat) > 0 {
				mx, p50 = lat[len(lat)-1], lat[len(lat)/2]
			}
			fmt.Fprintf(&b, "%-16s", k)
			for _, o := range outcomes {
				fmt.Fprintf(&b, " %9d", count[o])
			}
			fmt.Fprintf(&b, " %9d %9d %9d\n", refused, mx.Milliseconds(), p50.Milliseconds())
		}
		return b.String()
	}
	var phases []string
	for i, p := range chaosPhaseNames {
		phases = append(phases, fmt.Sprintf("%d-%s", i, p))
	}
	byPhase := table("phase", phases, func(r *chaosResult) string {
		return fmt.Sprintf("%d-%s", chaosPhase(r.idx), chaosPhaseNames[chaosPhase(r.idx)])
	}, results)
	byNode := table("node", []string{"node 0", "node 1", "node 2"}, func(r *chaosResult) string { return fmt.Sprintf("node %d", r.node) }, results)
	byKind := table("kind", []string{"circuit/json", "circuit/stream", "worker/json", "worker/stream"}, (*chaosResult).kind, results)
	limitTable := table("limited key", []string{"node 0", "node 1", "node 2"}, func(r *chaosResult) string { return fmt.Sprintf("node %d", r.node) }, limit.results)

	calls := c.backend.snapshot()
	repeats, viaCount := map[string]int{}, map[string]int{}
	for _, r := range append(slices.Clone(results), limit.results...) {
		cs := calls[r.marker]
		if len(cs) > 1 {
			repeats[r.kind()+" "+r.outcome]++
		}
		for _, call := range cs {
			viaCount[call.via]++
		}
	}
	admitted := 0
	for _, r := range limit.results {
		if r.outcome == "ok" {
			admitted++
		}
	}
	c.mu.Lock()
	steps := slices.Clone(c.steps)
	var kills []string
	for _, w := range c.nodeKills {
		kills = append(kills, fmt.Sprintf("node %d SIGKILL at +%dms", w.who, w.start.Sub(c.loadStart).Milliseconds()))
	}
	for _, w := range c.daemonKills {
		kills = append(kills, fmt.Sprintf("daemon %d SIGKILL at +%dms", w.who, w.start.Sub(c.loadStart).Milliseconds()))
	}
	c.mu.Unlock()
	t.Logf("chaos: %d requests at concurrency %d over 3 nodes in %s (setup %s, whole test %s); %s",
		chaosTotal, chaosConcurrency, load.Round(time.Millisecond), setup.Round(time.Millisecond), total.Round(time.Millisecond), strings.Join(kills, ", "))
	t.Logf("by phase:\n%s", byPhase)
	t.Logf("by node:\n%s", byNode)
	t.Logf("by kind:\n%s", byKind)
	t.Logf("model server: calls by way %v; prompts seen more than once (a requeue after a daemon died), by kind and outcome: %v", viaCount, repeats)
	t.Logf("limited key (%d rpm): %d of %d admitted in %s\n%s", chaosRPM, admitted, chaosBurst, limit.elapsed.Round(time.Millisecond), limitTable)
	t.Logf("coordinator nodes count at each step (%s):\n  %s", chaosNodesNote, strings.Join(steps, "\n  "))
}

// chaosBackend is the fake model server behind the circuit (path /v1/...) and the daemons
// (path /d<i>/v1/...). It answers any prompt with "ok <prompt> w0 … w5", non-streamed after
// 25 ms or streamed a word per chunk 12 ms apart, and records every call by prompt.
type chaosBackend struct {
	url  string
	port int

	mu    sync.Mutex
	calls map[string][]chaosCall
}

type chaosCall struct {
	via        string // "circuit" or "d<i>"
	start, end time.Time
	finished   bool // the whole answer was written
}

func newChaosBackend(t testing.TB) *chaosBackend {
	b := &chaosBackend{calls: map[string][]chaosCall{}}
	srv := httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	b.port, _ = strconv.Atoi(p)
	return b
}

func (b *chaosBackend) snapshot() map[string][]chaosCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string][]chaosCall, len(b.calls))
	for k, v := range b.calls {
		out[k] = slices.Clone(v)
	}
	return out
}

func (b *chaosBackend) serve(w http.ResponseWriter, r *http.Request) {
	via, path := "circuit", r.URL.Path
	if rest, ok := strings.CutPrefix(path, "/d"); ok {
		if i := strings.IndexByte(rest, '/'); i > 0 {
			via, path = "d"+rest[:i], rest[i:]
		}
	}
	switch {
	case r.Method == http.MethodGet && path == "/v1/models":
		writeReplicaJSON(w, 200, map[string]any{"object": "list", "data": []any{map[string]any{"id": "chaos-circuit", "object": "model"}}})
		return
	case r.Method != http.MethodPost || path != "/v1/chat/completions":
		writeReplicaJSON(w, 404, map[string]any{"detail": "not found: " + r.URL.Path})
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var in struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(raw, &in); err != nil || len(in.Messages) == 0 {
		writeReplicaJSON(w, 400, map[string]any{"error": map[string]any{"message": "bad request body", "type": "invalid_request_error"}})
		return
	}
	prompt := in.Messages[len(in.Messages)-1].Content
	call := chaosCall{via: via, start: time.Now()}
	call.finished = b.answer(w, r, in.Model, prompt, in.Stream, in.StreamOptions.IncludeUsage)
	call.end = time.Now()
	b.mu.Lock()
	b.calls[prompt] = append(b.calls[prompt], call)
	b.mu.Unlock()
}

// answer writes the answer to prompt; it reports whether all of it was written.
func (b *chaosBackend) answer(w http.ResponseWriter, r *http.Request, model, prompt string, stream, usage bool) bool {
	pause := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-r.Context().Done():
			return false
		}
	}
	parts := chaosAnswer(prompt)
	tokens := map[string]int{"prompt_tokens": 5, "completion_tokens": len(parts), "total_tokens": 5 + len(parts)}
	if !stream {
		if !pause(25 * time.Millisecond) {
			return false
		}
		writeReplicaJSON(w, 200, map[string]any{"id": "chatcmpl-chaos", "object": "chat.completion", "created": 1700000000, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": strings.Join(parts, "")}, "finish_reason": "stop"}},
			"usage":   tokens})
		return r.Context().Err() == nil
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	write := func(s string) bool {
		if _, err := io.WriteString(w, s); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	event := func(v any) bool {
		bs, _ := json.Marshal(v)
		return write("data: " + string(bs) + "\n\n")
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-chaos", "object": "chat.completion.chunk", "created": 1700000000, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	if !event(chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return false
	}
	for _, p := range parts {
		if !pause(12*time.Millisecond) || !event(chunk(map[string]any{"content": p}, nil)) {
			return false
		}
	}
	if !event(chunk(map[string]any{}, "stop")) {
		return false
	}
	if usage && !event(map[string]any{"id": "chatcmpl-chaos", "object": "chat.completion.chunk", "created": 1700000000,
		"model": model, "choices": []any{}, "usage": tokens}) {
		return false
	}
	return write("data: [DONE]\n\n") && r.Context().Err() == nil
}
