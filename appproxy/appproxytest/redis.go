// Package appproxytest provides test doubles for the AppProxy control plane: a coordinator
// (its worker REST API plus real events on Redis) and private redis-server instances.
package appproxytest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartRedis starts a private redis-server on a free loopback port and stops it at cleanup. stop
// kills it at once (a crash, not a shutdown), which is what Redis-loss tests need; StartRedisAt
// brings it back on the same address. The test is skipped when redis-server is not installed.
func StartRedis(t testing.TB) (addr string, stop func()) {
	t.Helper()
	var lastErr error
	for range 5 {
		addr, err := freeLoopbackAddr()
		if err != nil {
			t.Fatalf("redis: %v", err)
		}
		stop, err := startRedis(t, addr)
		if err == nil {
			return addr, stop
		}
		lastErr = err // another process took the port between probe and start; try another
	}
	t.Fatalf("redis: %v", lastErr)
	return "", nil
}

// StartRedisAt starts redis-server on addr, typically one a stopped StartRedis used.
func StartRedisAt(t testing.TB, addr string) (stop func()) {
	t.Helper()
	var lastErr error
	for range 20 {
		stop, err := startRedis(t, addr)
		if err == nil {
			return stop
		}
		lastErr = err // the old socket may linger briefly
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("redis at %s: %v", addr, lastErr)
	return nil
}

func startRedis(t testing.TB, addr string) (func(), error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", port, "--bind", host, "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
	}
	if err := waitRedis(addr, exited); err != nil {
		stop()
		return nil, err
	}
	t.Cleanup(stop)
	return stop, nil
}

// waitRedis polls PING until the server answers, exits, or 10 s pass.
func waitRedis(addr string, exited <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited at start", addr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s did not answer within 10 s", addr)
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), nil
}
