package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// relayBinaries are the real programs under test, and the floor rows' proxy, built from this
// checkout.
type relayBinaries struct {
	server, worker, coordinator, floor string
}

// buildRelay compiles the server, the worker daemon, the coordinator double and floorproxy
// into dir.
func buildRelay(repoRoot, dir string) (relayBinaries, error) {
	cmd := exec.Command("go", "build", "-o", dir+"/",
		"./cmd/modelrelay-server", "./cmd/modelrelay-worker", "./appproxy/appproxytest/devcoordinator",
		"./cmd/modelrelay-bench/floorproxy")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return relayBinaries{}, fmt.Errorf("go build the relay: %w\n%s", err, out)
	}
	return relayBinaries{
		server:      filepath.Join(dir, "modelrelay-server"),
		worker:      filepath.Join(dir, "modelrelay-worker"),
		coordinator: filepath.Join(dir, "devcoordinator"),
		floor:       filepath.Join(dir, "floorproxy"),
	}, nil
}

// relayEnv is the environment every relay process gets: quiet logs, and a pprof endpoint
// when pprofAddr is set.
func relayEnv(pprofAddr string) []string {
	env := []string{"LOG_LEVEL=warn"}
	if pprofAddr != "" {
		env = append(env, "MODELRELAY_PPROF="+pprofAddr)
	}
	return env
}

// pprofFor gives the named process of t a profiling address when on, and "" (none) when not.
func (t *Target) pprofFor(on bool, name string) (string, error) {
	if !on {
		return "", nil
	}
	addr, err := FreePort()
	if err != nil {
		return "", err
	}
	t.Pprof = append(t.Pprof, pprofEndpoint{name: name, addr: addr})
	return addr, nil
}

// startRelayStatic runs modelrelay-server with the fake model server as its one static
// backend, on the HTTP server setup names; pprof gives it a profiling endpoint.
func (b *Bench) startRelayStatic(setup staticSetup, pprof bool) (Target, error) {
	t := Target{Row: setup.row}
	dir := filepath.Join(b.tmp, setup.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Target{}, fmt.Errorf("temp dir for relay: %w", err)
	}
	listen, err := FreePort()
	if err != nil {
		return Target{}, err
	}
	config, err := renderTemplate(b.repoRoot, dir, "relay-static.yaml",
		templateData{Dir: dir, Listen: listen, Upstream: b.upstream, HTTPServer: setup.server})
	if err != nil {
		return Target{}, err
	}
	pprofAddr, err := t.pprofFor(pprof, setup.name)
	if err != nil {
		return Target{}, err
	}
	cmd, err := b.children.Start(setup.name, relayEnv(pprofAddr), b.bins.server, "--config", config)
	if err != nil {
		return Target{}, err
	}
	t.Addr, t.PIDs, t.stop = listen, []int{cmd.Process.Pid}, func() { b.children.Stop(cmd) }
	if err := waitCompletion(b, t); err != nil {
		t.Stop()
		return Target{}, fmt.Errorf("%s not serving (see %s.log in %s): %w", setup.row, setup.name, b.tmp, err)
	}
	return t, nil
}

// startRelayWorker runs modelrelay-server with no backends and one modelrelay-worker dialing
// in over WebSocket; the worker forwards to the fake model server, up to slots requests at
// once. Both processes count; pprof gives each a profiling endpoint.
func (b *Bench) startRelayWorker(slots int, pprof bool) (Target, error) {
	t := Target{Row: "relay worker", Note: "relay worker: CPU and RSS are modelrelay-server plus modelrelay-worker"}
	listen, err := FreePort()
	if err != nil {
		return Target{}, err
	}
	serverPprof, err := t.pprofFor(pprof, "relay-worker-server")
	if err != nil {
		return Target{}, err
	}
	daemonPprof, err := t.pprofFor(pprof, "relay-worker-daemon")
	if err != nil {
		return Target{}, err
	}
	const secret = "bench-worker-secret"
	server, err := b.children.Start("relay-worker-server", relayEnv(serverPprof), b.bins.server,
		"--listen", listen, "--worker-secret", secret, "--max-queue-len", "0")
	if err != nil {
		return Target{}, err
	}
	worker, err := b.children.Start("relay-worker-daemon", relayEnv(daemonPprof), b.bins.worker,
		"--proxy-url", "http://"+listen, "--worker-secret", secret, "--backend-url", "http://"+b.upstream,
		"--models", benchModel, "--max-concurrency", strconv.Itoa(slots), "--worker-name", "bench")
	if err != nil {
		b.children.Stop(server)
		return Target{}, err
	}
	t.Addr, t.PIDs = listen, []int{server.Process.Pid, worker.Process.Pid}
	t.stop = func() { b.children.Stop(worker); b.children.Stop(server) }
	if err := waitCompletion(b, t); err != nil {
		t.Stop()
		return Target{}, fmt.Errorf("relay (worker) not serving (see relay-worker-*.log in %s): %w", b.tmp, err)
	}
	return t, nil
}

// waitCompletion polls until one non-streaming completion through t succeeds: the relay
// answers /v1/models before its backends are known, so only a real request proves readiness.
func waitCompletion(b *Bench, t Target) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := oneCompletion(b.ctx, t)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || b.ctx.Err() != nil {
			return err
		}
		select {
		case <-b.ctx.Done():
			return b.ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
