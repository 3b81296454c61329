package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"time"
)

// The circuit row: modelrelay-server in AppProxy worker mode, fed by the coordinator double
// (appproxy/appproxytest/devcoordinator) over a private redis-server. Only the relay's own
// process is measured; Redis and the coordinator are control plane and idle under load.

const (
	circuitSubdomain = "bench"
	wildcardDomain   = ".models.bench"
	coordinatorToken = "dev-api-secret" // devcoordinator's default -secret
)

func (b *Bench) startRelayCircuit() (Target, error) {
	redisBin, err := b.tools.Find("redis-server", "redis-server")
	if err != nil {
		return Target{}, err
	}
	var started []*exec.Cmd
	stop := func() {
		for i := len(started) - 1; i >= 0; i-- {
			b.children.Stop(started[i])
		}
	}
	fail := func(err error) (Target, error) { stop(); return Target{}, err }

	redisAddr, err := FreePort()
	if err != nil {
		return fail(err)
	}
	_, redisPort, _ := net.SplitHostPort(redisAddr)
	redis, err := b.children.Start("redis", nil, redisBin, "--bind", "127.0.0.1", "--port", redisPort,
		"--save", "", "--appendonly", "no", "--daemonize", "no")
	if err != nil {
		return fail(err)
	}
	started = append(started, redis)
	if err := waitTCP(b.ctx, redisAddr, 10*time.Second); err != nil {
		return fail(fmt.Errorf("redis-server: %w", err))
	}

	coordAddr, err := FreePort()
	if err != nil {
		return fail(err)
	}
	coord, err := b.children.Start("devcoordinator", nil, b.bins.coordinator,
		"-listen", coordAddr, "-redis", redisAddr, "-authority", "bench")
	if err != nil {
		return fail(err)
	}
	started = append(started, coord)
	if err := waitTCP(b.ctx, coordAddr, 10*time.Second); err != nil {
		return fail(fmt.Errorf("devcoordinator: %w", err))
	}

	listen, err := FreePort()
	if err != nil {
		return fail(err)
	}
	env := append(relayEnv(""),
		"APPPROXY_ENABLED=true",
		"APPPROXY_COORDINATOR_URL=http://"+coordAddr,
		"APPPROXY_API_SECRET="+coordinatorToken,
		"APPPROXY_JWT_SECRET=bench-jwt-secret",
		"APPPROXY_REDIS_URL=redis://"+redisAddr+"/4",
		"APPPROXY_AUTHORITY=bench",
		"APPPROXY_HOSTNAME=127.0.0.1",
		"APPPROXY_WILDCARD_DOMAIN="+wildcardDomain)
	relay, err := b.children.Start("relay-circuit", env, b.bins.server, "--listen", listen, "--max-queue-len", "0")
	if err != nil {
		return fail(err)
	}
	started = append(started, relay)
	if err := WaitHTTP(b.ctx, "http://"+listen+"/readyz", "", 200, 20*time.Second); err != nil {
		return fail(fmt.Errorf("relay (circuit) not ready (see relay-circuit.log in %s): %w", b.tmp, err))
	}
	if err := createCircuit(b.ctx, coordAddr, b.upstream); err != nil {
		return fail(err)
	}
	host := circuitSubdomain + wildcardDomain
	if err := waitCompletion(b, Target{Addr: listen, Host: host}); err != nil {
		return fail(fmt.Errorf("relay (circuit) not serving %s: %w", host, err))
	}
	return Target{Row: "relay circuit", Addr: listen, Host: host, PIDs: []int{relay.Process.Pid}, stop: stop}, nil
}

// createCircuit asks the coordinator double for a public circuit whose one route is the fake
// model server; the call returns once the relay has acked it.
func createCircuit(ctx context.Context, coordAddr, upstream string) error {
	host, port, err := net.SplitHostPort(upstream)
	if err != nil {
		return fmt.Errorf("upstream address %q: %w", upstream, err)
	}
	body := fmt.Sprintf(`{"subdomain":%q,"open_to_public":true,"routes":[{"host":%q,"port":%s}]}`,
		circuitSubdomain, host, port)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+coordAddr+"/dev/circuits",
		bytes.NewBufferString(body))
	if err != nil {
		return fmt.Errorf("create circuit: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("create circuit: %w", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), `"acked":true`) {
		return fmt.Errorf("create circuit: status %d: %s", resp.StatusCode, strings.TrimSpace(string(answer)))
	}
	return nil
}

// waitTCP polls until something accepts connections on addr.
func waitTCP(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s: %w", addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
