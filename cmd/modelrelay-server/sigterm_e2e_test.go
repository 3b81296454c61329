package main

// SIGTERM through the real binary: heartbeat stops, DELETE /api/worker/<id>, in-flight requests
// drain, exit 0.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"modelrelay/appproxy/appproxytest"
	"modelrelay/relay/keys/pgtest"
)

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
	binaryDir  string
)

func TestMain(m *testing.M) {
	code := pgtest.Run(m) // also removes the shared PostgreSQL cluster of the key tests
	if binaryDir != "" {
		os.RemoveAll(binaryDir)
	}
	os.Exit(code)
}

// serverBinary builds this package once per test run.
func serverBinary(t testing.TB) string {
	t.Helper()
	binaryOnce.Do(func() {
		binaryDir, binaryErr = os.MkdirTemp("", "modelrelay-e2e-")
		if binaryErr != nil {
			return
		}
		binaryPath = filepath.Join(binaryDir, "modelrelay-server")
		out, err := exec.Command("go", "build", "-o", binaryPath, ".").CombinedOutput()
		if err != nil {
			binaryErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// startBinary runs the built server for e (whose addr it sets) and waits until it listens.
func startBinary(t testing.TB, e *e2eEnv, extra map[string]string) (*exec.Cmd, *lockedBuffer, chan error) {
	t.Helper()
	bin := serverBinary(t)
	stderr := &lockedBuffer{}
	addr, cmd, exited := launchBinary(t, stderr, func(addr string) (*exec.Cmd, chan error) {
		return runBinary(t, bin, e, addr, extra, stderr)
	})
	e.addr = addr
	return cmd, stderr, exited
}

// launchBinary starts the server through run on a free loopback port and waits until it
// listens, trying another port when a process took this one between the probe and the listen.
// At cleanup a server still running is killed, and a failed test logs the tail of out.
func launchBinary(t testing.TB, out *lockedBuffer, run func(addr string) (*exec.Cmd, chan error)) (string, *exec.Cmd, chan error) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		addr := freeAddr(t)
		cmd, exited := run(addr)
		err := waitListening(addr, exited)
		if err == nil {
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					cmd.Process.Kill()
					<-exited
				}
				if t.Failed() {
					t.Logf("server %s output (tail):\n%s", addr, out.tail(8000))
				}
			})
			return addr, cmd, exited
		}
		if !errors.Is(err, errServerExited) { // else exited was already read
			cmd.Process.Kill()
			<-exited
		}
		if attempt >= 5 || !strings.Contains(out.String(), "listen on") {
			t.Fatalf("binary did not start: %v\n%s", err, out.tail(4000))
		}
	}
}

// runBinary starts the server with args and with e's environment on addr, extra on top (nil e:
// no environment but PATH and HOME); exited receives cmd.Wait's result.
func runBinary(t testing.TB, bin string, e *e2eEnv, addr string, extra map[string]string, out *lockedBuffer, args ...string) (*exec.Cmd, chan error) {
	t.Helper()
	env := map[string]string{}
	if e != nil {
		env = e.baseEnv(addr)
	}
	for k, v := range extra {
		env[k] = v
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr, cmd.Stdout = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd, exited
}

func TestE2ESIGTERMDeregistersDrainsAndExitsZero(t *testing.T) {
	redisAddr, _ := appproxytest.StartRedis(t)
	coord := appproxytest.NewCoordinator(e2eSecret, redisAddr)
	defer coord.Close()
	cs := httptest.NewServer(coord)
	defer cs.Close()
	rep := newReplica(t, "r", "m")
	c := newCircuit("term", route{port: rep.port()})
	c.public = true
	const authority = "modelrelay-sigterm"
	if _, err := coord.AddCircuit(authority, c.json()); err != nil {
		t.Fatal(err)
	}

	e := &e2eEnv{t: t, authority: authority, redisAddr: redisAddr, coord: coord, coordURL: cs.URL,
		client: &http.Client{Transport: &http.Transport{Proxy: nil}}}
	defer e.client.CloseIdleConnections()
	cmd, stderr, exited := startBinary(t, e, map[string]string{"DRAIN_TIMEOUT_SECS": "20"})
	e.waitReady()
	id := e.workerID()
	e.waitServing(circuitHost("term"), nil)
	entered, release := rep.holdChats()
	defer release()
	inflight := make(chan string, 1)
	go func() {
		resp, err := e.send(context.Background(), "POST", circuitHost("term"), "/v1/chat/completions", withJSON(nil), chatBody("m", false))
		if err != nil {
			inflight <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		inflight <- st2s(resp.StatusCode, resp.Header.Get("X-Replica"), b)
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("in-flight request never reached the replica")
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deleteAt := -1
	eventually(t, 10*time.Second, "DELETE /api/worker/<id>", func() (bool, string) {
		for i, r := range coord.Requests() {
			if r.Method == "DELETE" {
				deleteAt = i
				return r.Path == "/api/worker/"+id && r.Status == 200, fmt.Sprintf("DELETE %s -> %d (id %s)", r.Path, r.Status, id)
			}
		}
		return false, "no DELETE"
	})
	// New requests are refused while the in-flight one drains.
	eventually(t, 10*time.Second, "new requests refused during the drain", func() (bool, string) {
		st, _, body := e.do("GET", circuitHost("term"), "/health", nil, nil)
		return st == 503, st2s(st, "", body)
	})
	select {
	case err := <-exited:
		t.Fatalf("the process exited (%v) before its in-flight request finished", err)
	default:
	}
	release()
	select {
	case r := <-inflight:
		if !strings.HasPrefix(r, "200 replica=r") {
			t.Errorf("in-flight request across SIGTERM: %s", r)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the in-flight request never finished")
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want status 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the process did not exit after SIGTERM")
	}
	for _, r := range coord.Requests()[deleteAt+1:] {
		t.Errorf("coordinator call after DELETE: %s %s", r.Method, r.Path)
	}
	if n := coord.Nodes(authority); n != 0 {
		t.Errorf("nodes = %d after deregistration, want 0", n)
	}
	for _, secret := range []string{e2eSecret, e2eJWTSecret} {
		if strings.Contains(stderr.String(), secret) {
			t.Errorf("the log contains a secret")
		}
	}
}

// binaryEnv is a coordinator and Redis for one binary run.
func binaryEnv(t *testing.T, authority string) *e2eEnv {
	redisAddr, _ := appproxytest.StartRedis(t)
	coord := appproxytest.NewCoordinator(e2eSecret, redisAddr)
	t.Cleanup(func() { coord.Close() })
	cs := httptest.NewServer(coord)
	t.Cleanup(cs.Close)
	e := &e2eEnv{t: t, authority: authority, redisAddr: redisAddr, coord: coord, coordURL: cs.URL,
		client: &http.Client{Transport: &http.Transport{Proxy: nil}}}
	t.Cleanup(e.client.CloseIdleConnections)
	return e
}

func TestE2EWrongAPISecretExitsOne(t *testing.T) {
	t.Parallel()
	e := binaryEnv(t, "modelrelay-badsecret")
	out := &lockedBuffer{}
	_, exited := runBinary(t, serverBinary(t), e, freeAddr(t), map[string]string{"APPPROXY_API_SECRET": "wrong-secret-value"}, out)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("exit %v, want status 1", err)
		}
	case <-time.After(15 * time.Second):
		var calls []string
		for _, r := range e.coord.Requests() {
			calls = append(calls, r.Method+" "+r.Path+" -> "+itoa(r.Status))
		}
		t.Fatalf("a rejected api_secret did not end the process; coordinator saw %v; output:\n%s", calls, out.tail(3000))
	}
	log := out.String()
	var last string
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		last = line
	}
	if !strings.Contains(last, "401") || !(strings.Contains(last, "Unauthorized access") || strings.Contains(last, "Invalid API secret")) {
		t.Errorf("last line %q should carry the coordinator's 401 title/msg", last)
	}
	if strings.Contains(log, "wrong-secret-value") {
		t.Errorf("the api_secret appears in the output")
	}
}

func TestE2ESIGTERMWithCoordinatorDownStillExitsZero(t *testing.T) {
	t.Parallel()
	e := binaryEnv(t, "modelrelay-sigterm-down")
	cmd, _, exited := startBinary(t, e, nil)
	e.waitReady()
	e.coord.FailWith(500)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM with the coordinator down: %v, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the process did not exit")
	}
	sawDelete := false
	for _, r := range e.coord.Requests() {
		sawDelete = sawDelete || r.Method == "DELETE"
	}
	if !sawDelete {
		t.Errorf("no DELETE was attempted")
	}
}
