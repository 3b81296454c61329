package h1

import (
	"context"
	"fmt"
	"io"
	"log"
	"sync"
	"testing"
	"time"
)

// connID answers with the number of the connection that carried the request; the body is one
// byte, left unread so that the test decides when each connection goes back to the pool.
func connID(sc *serverConn) {
	for {
		if req, _ := sc.next(); req == nil {
			return
		}
		fmt.Fprintf(sc, "HTTP/1.1 200 OK\r\nX-Conn: %d\r\nContent-Length: 1\r\n\r\nx", sc.id)
	}
}

func TestPoolLIFOAndBound(t *testing.T) {
	s := startServer(t, connID)
	c := Client{MaxIdlePerHost: 2}
	defer c.CloseIdle()
	open := func() *Response {
		t.Helper()
		resp, err := c.Do(context.Background(), get(s))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	finish := func(resp *Response) {
		t.Helper()
		if _, err := io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
	}
	held := []*Response{open(), open(), open()} // connections 1, 2, 3
	for _, r := range held {
		finish(r) // back in the pool in this order; 1 is pushed out by 3
	}
	if n := idleConns(&c); n != 2 {
		t.Fatalf("%d idle, want the bound of 2", n)
	}
	var got []string
	for range 3 {
		r := open() // held, so each takes another connection
		got = append(got, r.Header.Get("X-Conn"))
		defer finish(r)
	}
	if fmt.Sprint(got) != "[3 2 4]" {
		t.Fatalf("connections %v, want [3 2 4]: newest first, the evicted one gone", got)
	}
}

// fakeClock is the pool's clock in tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) get() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func TestIdleTimeout(t *testing.T) {
	s := startServer(t, connID)
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	c := Client{IdleTimeout: time.Minute, now: clock.get}
	defer c.CloseIdle()
	call(t, &c, get(s))
	clock.advance(time.Minute)
	if resp, _ := call(t, &c, get(s)); resp.Header.Get("X-Conn") != "2" {
		t.Fatalf("an expired connection was reused")
	}

	// The sweep closes what nobody takes, and a pool left empty leaves the map.
	clock.advance(time.Minute)
	c.mu.Lock()
	hp, key := (*hostPool)(nil), poolKey{}
	for k, p := range c.pools {
		hp, key = p, k
	}
	c.mu.Unlock()
	c.sweep(key, hp)
	c.mu.Lock()
	left := len(c.pools)
	c.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d pools left after the sweep, want 0", left)
	}
}

func TestSweepKeepsFresh(t *testing.T) {
	s := startServer(t, connID)
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	c := Client{IdleTimeout: time.Minute, now: clock.get}
	defer c.CloseIdle()
	a, err := c.Do(context.Background(), get(s))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Do(context.Background(), get(s))
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(a.Body) // idle since t0
	clock.advance(30 * time.Second)
	io.ReadAll(b.Body) // idle since t0+30s
	clock.advance(45 * time.Second)
	c.mu.Lock()
	key := poolKey{host: s.url.Host}
	hp := c.pools[key]
	c.mu.Unlock()
	c.sweep(key, hp)
	if n := idleConns(&c); n != 1 {
		t.Fatalf("%d idle after the sweep, want the fresher one", n)
	}
	if resp, _ := call(t, &c, get(s)); resp.Header.Get("X-Conn") != "2" {
		t.Fatalf("took connection %s, want 2", resp.Header.Get("X-Conn"))
	}
}

func TestCloseIdle(t *testing.T) {
	s := startServer(t, connID)
	var c Client
	call(t, &c, get(s))
	c.CloseIdle()
	if n := idleConns(&c); n != 0 {
		t.Fatalf("%d idle after CloseIdle", n)
	}
	if resp, _ := call(t, &c, get(s)); resp.Header.Get("X-Conn") != "2" {
		t.Fatal("a closed idle connection was reused")
	}
	c.CloseIdle()
}

func TestNoPooling(t *testing.T) {
	s := startServer(t, connID)
	c := Client{MaxIdlePerHost: -1}
	call(t, &c, get(s))
	call(t, &c, get(s))
	if s.accepted.Load() != 2 || idleConns(&c) != 0 {
		t.Fatalf("%d connections, %d idle: want 2 and none", s.accepted.Load(), idleConns(&c))
	}
}

func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }
