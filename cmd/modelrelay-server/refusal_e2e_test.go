package main

// Answers the relay gives before it reads the request body, through the real binary, to a
// client that sends its whole request before it reads the answer (Python's http.client and
// the SDKs built on such clients do) and asks for the connection to close after it: every one
// reaches the client whole. Before, the relay closed the connection with the body unread and
// the kernel reset it under the client still sending, which then reported a connection error
// (and retried) instead of "Invalid API key".

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// earlyRefusal is a request the relay refuses on its head alone.
type earlyRefusal struct {
	name         string
	method, path string
	host         string // "" = the relay's own
	header       string // more header lines, each ending in \r\n
	status       int
	json         bool          // the answer is a JSON error (else text, as Go's 404)
	pause        time.Duration // between head and body: the relay has answered by then (50 ms if 0)
}

func TestE2EEarlyRefusalsReachTheClientWhole(t *testing.T) {
	t.Parallel()
	backend := newFlaky(t, "held")
	r := startKeyRelay(t, "backends:\n"+backendYAML("held", backend.url, "m"),
		map[string]string{"MODELRELAY_REQUIRE_API_KEYS": "true", "DRAIN_TIMEOUT_SECS": "30"})
	// A wrong key or admin token waits its turn in the guess throttle (250 ms) before the
	// answer: the body comes after it.
	const afterTheThrottle = 400 * time.Millisecond
	refusals := []earlyRefusal{
		{name: "no key", method: "POST", path: "/v1/chat/completions", status: 401, json: true},
		{name: "a foreign token", method: "POST", path: "/v1/messages", header: "X-Api-Key: sk-ant-foreign\r\n", status: 401, json: true},
		{name: "a wrong key of ours", method: "POST", path: "/v1/chat/completions", pause: afterTheThrottle,
			header: "Authorization: Bearer mr_live_" + strings.Repeat("w", 32) + "\r\n", status: 401, json: true},
		{name: "a wrong admin token", method: "POST", path: "/admin/keys", pause: afterTheThrottle,
			header: "Authorization: Bearer wrong-token\r\n", status: 403, json: true},
		{name: "a browser on another site", method: "POST", path: "/v1/chat/completions",
			header: "Sec-Fetch-Site: cross-site\r\nOrigin: https://elsewhere.example\r\n", status: 403, json: true},
		{name: "a method the path does not take", method: "PUT", path: "/v1/chat/completions", status: 405, json: true},
		{name: "a path the relay does not serve", method: "POST", path: "/v1/nothing-here", status: 404},
	}
	for _, size := range []int{2 << 10, 100 << 10} {
		for _, ref := range refusals {
			checkWholeAnswers(t, r.addr, ref, size)
		}
	}

	// While draining, new requests get 503 before their body is read.
	key := createKey(t, r.addr, `{"name":"in-flight"}`)
	entered, release := backend.holdCalls()
	defer release()
	inFlight := make(chan relayAnswer, 1)
	go func() { inFlight <- r.openai(key.Secret, "m") }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the in-flight request never reached the backend")
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the relay draining", func() (bool, string) {
		a := r.send("/v1/chat/completions", nil, chatJSON("m"))
		return a.status == http.StatusServiceUnavailable, a.String()
	})
	for _, size := range []int{2 << 10, 100 << 10} {
		checkWholeAnswers(t, r.addr, earlyRefusal{name: "draining", method: "POST", path: "/v1/chat/completions",
			status: 503, json: true}, size)
	}
	release()
	if a := <-inFlight; a.status != 200 {
		t.Errorf("the request in flight across SIGTERM: %s", a)
	}
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the relay did not exit after its drain")
	}
}

// The front of AppProxy mode refuses on its own: a circuit's token, an unknown subdomain, a
// path an aggregation host does not serve, a browser on another site.
func TestE2EEarlyRefusalsOnCircuitHostsReachTheClientWhole(t *testing.T) {
	t.Parallel()
	rep := newReplica(t, "r", "m")
	c := newCircuit("early", route{port: rep.port()})
	e, _ := startBinaryEnv(t, nil, c)
	good := tokenFor(t, c.id)
	e.waitServing(circuitHost("early"), bearer(good))
	refusals := []earlyRefusal{
		{name: "circuit without a token", method: "POST", path: "/v1/chat/completions", host: circuitHost("early"), status: 401, json: true},
		{name: "circuit with a wrong token", method: "POST", path: "/v1/chat/completions", host: circuitHost("early"),
			header: "Authorization: Bearer not-a-token\r\n", status: 401, json: true, pause: 400 * time.Millisecond},
		{name: "unknown subdomain", method: "POST", path: "/v1/chat/completions", host: circuitHost("nobody"), status: 400, json: true},
		{name: "circuit from a browser on another site", method: "POST", path: "/v1/messages", host: circuitHost("early"),
			header: "Authorization: Bearer " + good + "\r\nSec-Fetch-Site: cross-site\r\nOrigin: https://elsewhere.example\r\n",
			status: 403, json: true},
		{name: "aggregation host, other path", method: "POST", path: "/v1/other", host: e2eAggHost, status: 404},
	}
	for _, size := range []int{2 << 10, 100 << 10} {
		for _, ref := range refusals {
			checkWholeAnswers(t, e.addr, ref, size)
		}
	}
}

// checkWholeAnswers sends ref 40 times at once, each with a body of size bytes and from an
// address of its own (so that the guess throttle gives each its own turn), and checks that
// every client sent its whole body and then read the whole answer.
func checkWholeAnswers(t *testing.T, addr string, ref earlyRefusal, size int) {
	t.Helper()
	label := fmt.Sprintf("%s, %d KB body", ref.name, size>>10)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", size-52) + `"}]}`)
	host := ref.host
	if host == "" {
		host = addr
	}
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n%s\r\n",
		ref.method, ref.path, host, len(body), ref.header)
	pause := ref.pause
	if pause == 0 {
		pause = 50 * time.Millisecond
	}
	const clients = 40
	problems := make([]string, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			from := fmt.Sprintf("127.7.%d.%d", size>>10%256, i+1)
			a, sendErr := sendThenRead(addr, from, head, body, pause)
			problems[i] = wholeAnswerProblem(ref, a, sendErr)
		})
	}
	wg.Wait()
	failed := 0
	for _, p := range problems {
		if p != "" {
			if failed == 0 {
				t.Errorf("%s: %s", label, p)
			}
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%s: %d of %d clients did not get the whole answer", label, failed, clients)
	}
}

// wholeAnswerProblem says what is wrong with a, or "".
func wholeAnswerProblem(ref earlyRefusal, a rawAnswer, sendErr error) string {
	switch {
	case sendErr != nil:
		return fmt.Sprintf("sending the body failed (%v): a client that reads after sending sees no answer", sendErr)
	case a.err != nil:
		return fmt.Sprintf("no whole answer: %v (status %d, %d bytes)", a.err, a.status, len(a.body))
	case a.status != ref.status:
		return fmt.Sprintf("status %d, want %d: %.200s", a.status, ref.status, a.body)
	case a.header.Get("Content-Length") != fmt.Sprint(len(a.body)) || len(a.body) == 0:
		return fmt.Sprintf("Content-Length %q, %d bytes read", a.header.Get("Content-Length"), len(a.body))
	case ref.json && !json.Valid(a.body):
		return fmt.Sprintf("not a JSON error: %.200s", a.body)
	}
	return ""
}

// sendThenRead is a client that sends its whole request before it reads: from the loopback
// address from, the head, a pause in which the relay answers, the body in pieces, and only
// then the answer. sendErr is a failed write, which such a client reports instead of the
// answer.
func sendThenRead(addr, from, head string, body []byte, pause time.Duration) (a rawAnswer, sendErr error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return rawAnswer{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		return rawAnswer{}, err
	}
	time.Sleep(pause)
	piece := max(len(body)/8, 256)
	for off := 0; off < len(body); off += piece {
		if _, err := conn.Write(body[off:min(off+piece, len(body))]); err != nil {
			return rawAnswer{}, err
		}
		time.Sleep(time.Millisecond) // a reset, if any, arrives before the next piece
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return rawAnswer{err: err}, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return rawAnswer{status: resp.StatusCode, header: resp.Header, body: b, err: err}, nil
}
