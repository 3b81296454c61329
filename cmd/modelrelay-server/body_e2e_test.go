package main

// Request bodies through the real binary, from raw sockets: what a broken, slow, oversized or
// over-budget body gets on the relay's own host, a circuit host and the aggregation host.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// bodyEnv is the real binary in AppProxy mode with one public circuit serving model "m".
func bodyEnv(t *testing.T, extra map[string]string) *e2eEnv {
	e, _ := bodyEnvCmd(t, extra)
	return e
}

func bodyEnvCmd(t *testing.T, extra map[string]string) (*e2eEnv, *exec.Cmd) {
	t.Helper()
	rep := newReplica(t, "r", "m")
	c := newCircuit("body", route{port: rep.port()})
	c.public = true
	e, cmd := startBinaryEnv(t, extra, c)
	e.waitServing(circuitHost("body"), nil)
	return e, cmd
}

// startBinaryEnv runs the real binary in AppProxy mode (private Redis, the test coordinator)
// with circuits assigned, and waits until it is registered and ready.
func startBinaryEnv(t *testing.T, extra map[string]string, circuits ...circuitSpec) (*e2eEnv, *exec.Cmd) {
	t.Helper()
	e := binaryEnv(t, "modelrelay-bin")
	e.client.Timeout = 60 * time.Second
	for _, c := range circuits {
		if _, err := e.coord.AddCircuit(e.authority, c.json()); err != nil {
			t.Fatal(err)
		}
	}
	cmd, _, _ := startBinary(t, e, extra)
	e.waitReady()
	return e, cmd
}

// bodyHosts are the three fronts that read inference bodies.
var bodyHosts = []struct{ label, host string }{
	{"own host", ""},
	{"circuit host", circuitHost("body")},
	{"aggregation host", e2eAggHost},
}

// rawExchange writes head (and then body, from a goroutine, so a server that answers early is
// seen), optionally half-closes, and returns the status line and body of the answer.
type rawAnswer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func rawRequest(t *testing.T, addr string, head string, body func(c *net.TCPConn), wait time.Duration) rawAnswer {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tc := conn.(*net.TCPConn)
	if _, err := io.WriteString(tc, head); err != nil {
		t.Fatal(err)
	}
	if body != nil {
		go body(tc)
	}
	tc.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return rawAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return rawAnswer{status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

func head(host, addr, path string, extra ...string) string {
	if host == "" {
		host = addr
	}
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s\r\n", path, host, strings.Join(extra, ""))
}

// checkDialectError asserts an error body in the route's dialect.
func checkDialectError(t *testing.T, label, path string, a rawAnswer, status int) {
	t.Helper()
	if a.err != nil {
		t.Errorf("%s: no readable answer: %v", label, a.err)
		return
	}
	if a.status != status {
		t.Errorf("%s: status %d, want %d; body %s", label, a.status, status, a.body)
		return
	}
	var v struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &v); err != nil || v.Error.Message == "" {
		t.Errorf("%s: body is not a dialect error: %s", label, a.body)
		return
	}
	if anthropic := strings.HasPrefix(path, "/v1/messages"); anthropic != (v.Type == "error") {
		t.Errorf("%s: body %s is not in the dialect of %s", label, a.body, path)
	}
}

func TestE2EBrokenBodiesAnswer400InDialect(t *testing.T) {
	e := bodyEnv(t, nil)
	for _, h := range bodyHosts {
		for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
			label := h.label + " " + path
			// A chunk size that is not hex.
			a := rawRequest(t, e.addr, head(h.host, e.addr, path, "Transfer-Encoding: chunked\r\n"), func(c *net.TCPConn) {
				io.WriteString(c, "zz\r\n{}\r\n0\r\n\r\n")
			}, 10*time.Second)
			checkDialectError(t, label+" malformed chunk", path, a, http.StatusBadRequest)
			// A body cut short by the client's FIN: it still reads the answer.
			a = rawRequest(t, e.addr, head(h.host, e.addr, path, "Content-Length: 100\r\n"), func(c *net.TCPConn) {
				io.WriteString(c, `{"model":"m"`)
				c.CloseWrite()
			}, 10*time.Second)
			checkDialectError(t, label+" truncated", path, a, http.StatusBadRequest)
		}
	}
	metrics := e.metricsText()
	for _, want := range []string{`modelrelay_request_body_errors_total{reason="malformed"} 6`, `modelrelay_request_body_errors_total{reason="truncated"} 6`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestE2ESlowBodyTimesOut(t *testing.T) {
	e := bodyEnv(t, map[string]string{"BODY_READ_TIMEOUT": "1s"})
	for _, h := range bodyHosts {
		start := time.Now()
		a := rawRequest(t, e.addr, head(h.host, e.addr, "/v1/chat/completions", "Content-Length: 100\r\n"), func(c *net.TCPConn) {
			io.WriteString(c, `{"model":"m"`) // and then nothing
		}, 15*time.Second)
		checkDialectError(t, h.label+" slow body", "/v1/chat/completions", a, http.StatusRequestTimeout)
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s: answered after %s; body_read_timeout is 1s", h.label, took)
		}
	}
}

func TestE2EOversizedBodyFromAClientThatKeepsSending(t *testing.T) {
	e := bodyEnv(t, map[string]string{"MAX_BODY_BYTES": "1048576"})
	chunk := strings.Repeat("x", 64<<10)
	for _, h := range bodyHosts {
		for _, framing := range []string{"Content-Length: 41943040\r\n", "Transfer-Encoding: chunked\r\n"} {
			label := h.label + " " + strings.TrimSpace(framing)
			a := rawRequest(t, e.addr, head(h.host, e.addr, "/v1/messages", framing), func(c *net.TCPConn) {
				chunked := strings.HasPrefix(framing, "Transfer")
				for sent := 0; sent < 40<<20; sent += len(chunk) {
					var err error
					if chunked {
						_, err = fmt.Fprintf(c, "%x\r\n%s\r\n", len(chunk), chunk)
					} else {
						_, err = io.WriteString(c, chunk)
					}
					if err != nil {
						return
					}
				}
			}, 30*time.Second)
			checkDialectError(t, label, "/v1/messages", a, http.StatusRequestEntityTooLarge)
		}
	}
	// The Go client sees the 413 too (it stops sending when the answer arrives).
	big := make([]byte, 40<<20)
	st, _, body := e.do("POST", "", "/v1/chat/completions", withJSON(nil), big)
	if st != http.StatusRequestEntityTooLarge {
		t.Errorf("Go client: status %d, body %.200s", st, body)
	}
}

func TestE2EBodyBudgetAnswers503WithRetryAfter(t *testing.T) {
	// Two bodies of 600 KB in flight hold 2 MB of a 2.5 MiB budget (buffers grow by doubling,
	// up to the announced 1,000,000 bytes and one to see the end); once they do, a third
	// cannot grow past 512 KiB.
	e := bodyEnv(t, map[string]string{"MAX_BODY_BYTES": "1048576", "BODY_BUDGET_BYTES": "2621440"})
	part := `{"model":"m","pad":"` + strings.Repeat("p", 600<<10)
	var holders []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, head("", e.addr, "/v1/chat/completions", "Content-Length: 1000000\r\n")+part)
		holders = append(holders, c)
	}
	eventually(t, 10*time.Second, "both bodies held", func() (bool, string) {
		m := regexp.MustCompile(`(?m)^modelrelay_request_body_bytes_held (\S+)$`).FindStringSubmatch(e.metricsText())
		return m != nil && m[1] == "2.000002e+06", fmt.Sprint(m)
	})
	eventually(t, 10*time.Second, "third body refused", func() (bool, string) {
		a := rawRequest(t, e.addr, head("", e.addr, "/v1/chat/completions", "Content-Length: 1000000\r\n"), func(c *net.TCPConn) {
			io.WriteString(c, part)
		}, 10*time.Second)
		return a.status == http.StatusServiceUnavailable && a.header.Get("Retry-After") != "", fmt.Sprintf("%d %v %s", a.status, a.err, a.body)
	})
	for _, c := range holders {
		c.Close()
	}
	// The budget comes back when the holders leave.
	eventually(t, 10*time.Second, "budget returned", func() (bool, string) {
		st, _, body := e.chat("", "m", nil)
		return st == 200, fmt.Sprintf("%d %s", st, body)
	})
}

func (e *e2eEnv) metricsText() string {
	e.t.Helper()
	_, _, body := e.do("GET", "", "/metrics", nil, nil)
	return string(body)
}

// TestE2EMemoryUnderSlowAndIdleConnections holds 500 slow-body connections (each announcing
// 1 MiB and trickling) and 1,000 idle ones against the binary, and checks its RSS stays within
// 100 MiB of the idle baseline while ordinary requests keep being answered promptly.
func TestE2EMemoryUnderSlowAndIdleConnections(t *testing.T) {
	e, cmd := bodyEnvCmd(t, nil)
	pid := cmd.Process.Pid
	host := circuitHost("body")
	for range 50 { // warm up: connection pools, first-use allocations
		e.chat(host, "m", nil)
	}
	baseline := rssBytes(t, pid)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var conns []net.Conn
	var connsMu sync.Mutex
	dial := func() net.Conn {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Error(err)
			return nil
		}
		connsMu.Lock()
		conns = append(conns, c)
		connsMu.Unlock()
		return c
	}
	for range 1000 {
		dial() // idle: connected, nothing sent
	}
	for range 500 {
		c := dial()
		if c == nil {
			break
		}
		io.WriteString(c, head(host, e.addr, "/v1/chat/completions", "Content-Length: 1048576\r\n")+`{"model":"m","pad":"`)
		wg.Go(func() {
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := io.WriteString(c, strings.Repeat("s", 512)); err != nil {
						return
					}
				}
			}
		})
	}
	defer func() {
		close(stop)
		connsMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
	}()

	var lat []time.Duration
	peak := baseline
	for i := range 200 {
		start := time.Now()
		st, _, body := e.chat(host, "m", nil)
		lat = append(lat, time.Since(start))
		if st != 200 {
			t.Fatalf("request %d under load: %d %s", i, st, body)
		}
		if i%20 == 0 {
			peak = max(peak, rssBytes(t, pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
	peak = max(peak, rssBytes(t, pid))
	slices.Sort(lat)
	p99 := lat[len(lat)*99/100]
	t.Logf("RSS idle %d MiB, peak under 500 slow + 1000 idle connections %d MiB (+%d MiB); request p50 %s p99 %s",
		baseline>>20, peak>>20, (peak-baseline)>>20, lat[len(lat)/2], p99)
	if peak-baseline > 100<<20 {
		t.Errorf("RSS grew by %d MiB under held connections (bound 100 MiB)", (peak-baseline)>>20)
	}
	if p99 > 100*time.Millisecond {
		t.Errorf("request p99 %s under held connections (bound 100 ms)", p99)
	}
}

// rssBytes reads a process's resident set size from /proc.
func rssBytes(t *testing.T, pid int) int64 { return procStatusBytes(t, pid, "VmRSS") }

// peakRSSBytes reads a process's peak resident set size (its high-water mark) from /proc.
func peakRSSBytes(t *testing.T, pid int) int64 { return procStatusBytes(t, pid, "VmHWM") }

// procStatusBytes reads a size in kB from a field of /proc/<pid>/status.
func procStatusBytes(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no " + field)
	return 0
}
