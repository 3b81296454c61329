package appproxy_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelrelay/appproxy"
	"modelrelay/appproxy/appproxytest"
	"modelrelay/protocol"
)

// blackhole is a loopback TCP proxy whose existing connections can be made to silently drop
// everything, like a peer lost behind a dead network path (no FIN, no RST).
type blackhole struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	pipes  []*pipe
	wg     sync.WaitGroup
}

type pipe struct {
	a, b   net.Conn
	frozen atomic.Bool
}

func newBlackhole(t *testing.T, target string) *blackhole {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &blackhole{l: l, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *blackhole) accept() {
	for {
		a, err := p.l.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			a.Close()
			continue
		}
		pp := &pipe{a: a, b: b}
		p.mu.Lock()
		p.pipes = append(p.pipes, pp)
		p.mu.Unlock()
		p.wg.Go(func() { pp.copy(a, b) })
		p.wg.Go(func() { pp.copy(b, a) })
	}
}

// copy forwards until either side closes; when frozen, bytes are read and dropped.
func (pp *pipe) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			dst.Close()
			return
		}
		if pp.frozen.Load() {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			src.Close()
			return
		}
	}
}

func (p *blackhole) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pp := range p.pipes {
		pp.frozen.Store(true)
	}
}

func (p *blackhole) close() {
	p.l.Close()
	p.mu.Lock()
	for _, pp := range p.pipes {
		pp.a.Close()
		pp.b.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func TestSubscriberDetectsASilentPeer(t *testing.T) {
	addr, _ := appproxytest.StartRedis(t)
	proxy := newBlackhole(t, addr)
	client := redis.NewClient(&redis.Options{Addr: proxy.l.Addr().String(), MaxRetries: -1})
	defer client.Close()
	subscribed := make(chan struct{}, 10)
	events := make(chan protocol.Event, 10)
	sub := &appproxy.Subscriber{
		Client:       client,
		OnSubscribed: func(context.Context) { subscribed <- struct{}{} },
		OnEvent:      func(_ context.Context, ev protocol.Event) { events <- ev },
		MinBackoff:   10 * time.Millisecond,
		MaxBackoff:   50 * time.Millisecond,
		IdleProbe:    200 * time.Millisecond,
		Logger:       discardLogger(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sub.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	wait := func(what string) {
		t.Helper()
		select {
		case <-subscribed:
		case <-time.After(20 * time.Second):
			t.Fatalf("no %s", what)
		}
	}
	wait("subscription")
	if !sub.Connected() {
		t.Fatal("not connected after subscribing")
	}
	proxy.freeze()
	wait("resubscription after the peer went silent")

	direct := redis.NewClient(&redis.Options{Addr: addr})
	defer direct.Close()
	msg, _ := protocol.EncodeCircuitEvent(protocol.EventCircuitRemoved, "w", "[]", protocol.FormatArgs)
	if err := direct.Publish(context.Background(), protocol.EventsChannel, msg).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if _, ok := ev.(*protocol.CircuitRemoved); !ok {
			t.Fatalf("event %#v", ev)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("event not delivered after resubscription")
	}
}

func TestSubscriberStopsWithContext(t *testing.T) {
	// Nothing listens on this address: the subscriber must still return promptly on cancel.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer client.Close()
	sub := &appproxy.Subscriber{Client: client, Logger: discardLogger()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sub.Run(ctx); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal(errors.New("subscriber ignored cancellation"))
	}
}
