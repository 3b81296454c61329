package h1

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves HTTP/1.1 on plain connections with an http.Handler: the relay's inference
// listener, in place of net/http's server. One goroutine per connection and nothing else per
// connection or request: no background reader, and buffers taken from pools only while a
// head or a body is being read or written, so that a stream held open for minutes holds
// neither a read nor a write buffer while it waits.
//
// A client that leaves while its handler waits (for an upstream's answer, between two
// events of a stream) is found without a goroutine reading its socket: every
// GoneCheckInterval one goroutine of the server peeks, without blocking and without reading,
// at the socket of each connection whose handler runs and whose request body has been read
// to its end; end of file or an error there cancels the request's context, and so does a
// failed write. net/http parks a goroutine in a read on every such connection instead.
//
// Requests are read by the same parser as the client's answers, with the same strictness
// (see doc.go): a request whose framing two readers could take two ways is refused with 400
// and the connection closed. Pipelined requests are served one after the other.
type Server struct {
	Handler http.Handler
	// ReadHeaderTimeout bounds the reading of a request's head, from its first byte (from
	// the accept for a connection's first request). Zero means 10 s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive connection. Zero
	// means 2 min.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's head: the request line and the field lines. Zero
	// means 64 KiB. Larger heads get 431.
	MaxHeaderBytes int
	// GoneCheckInterval is how often a waiting handler's client is looked for. Zero means
	// 500 ms.
	GoneCheckInterval time.Duration
	// ErrorLog receives handler panics other than http.ErrAbortHandler and accept errors.
	// Nil means the log package's standard logger.
	ErrorLog *log.Logger

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*inbound]struct{}
	closing   atomic.Bool
	done      chan struct{} // closed by Shutdown and Close: the sweeper's exit
	startOnce sync.Once
}

// ErrServerClosed is what Serve returns after Shutdown or Close.
var ErrServerClosed = http.ErrServerClosed

const (
	defaultReadHeaderTimeout = 10 * time.Second
	defaultIdleTimeout       = 2 * time.Minute
	defaultMaxHeaderBytes    = 64 << 10
	defaultGoneCheck         = 500 * time.Millisecond
)

func (s *Server) init() {
	s.startOnce.Do(func() {
		s.listeners = map[net.Listener]struct{}{}
		s.conns = map[*inbound]struct{}{}
		s.done = make(chan struct{})
		go s.sweep()
	})
}

// Serve accepts connections on ln and serves each on its own goroutine until Shutdown or
// Close; it then returns ErrServerClosed. It closes ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	s.init()
	defer ln.Close()
	if !join(s, s.listeners, ln) {
		return ErrServerClosed
	}
	defer leave(s, s.listeners, ln)
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				// Out of descriptors and the like: wait a little, as net/http does, rather
				// than spin or give up.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logf("h1: accept: %v; retrying in %v", err, backoff)
				select {
				case <-time.After(backoff):
				case <-s.done:
				}
				continue
			}
			return err
		}
		backoff = 0
		c := newInbound(s, nc)
		if !join(s, s.conns, c) {
			nc.Close()
			return ErrServerClosed
		}
		go c.serve()
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// join puts k in set, one of the server's sets under s.mu, unless the server is closing.
func join[K comparable](s *Server, set map[K]struct{}, k K) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	set[k] = struct{}{}
	return true
}

// leave takes k out of set, one of the server's sets under s.mu.
func leave[K comparable](s *Server, set map[K]struct{}, k K) {
	s.mu.Lock()
	delete(set, k)
	s.mu.Unlock()
}

// Shutdown stops accepting, closes the connections that wait for a request, and waits until
// the others have finished their current request (each then closes) or ctx ends, whose error
// it returns. Hijacked connections are not waited for.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.stop()
	wait := time.Millisecond
	for {
		if s.closeIdle() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// Close stops accepting and closes every connection at once.
func (s *Server) Close() error {
	s.init()
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.state.Store(connClosed)
		c.nc.Close()
	}
	return nil
}

func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Swap(true) {
		return
	}
	close(s.done)
	for ln := range s.listeners {
		ln.Close()
	}
}

// closeIdle closes the connections waiting for a request and counts those still serving one.
func (s *Server) closeIdle() (busy int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.CompareAndSwap(connIdle, connClosed) {
			c.nc.Close()
			continue
		}
		busy++
	}
	return busy
}

// sweep looks for the clients of waiting handlers until the server stops.
func (s *Server) sweep() {
	interval := s.GoneCheckInterval
	if interval <= 0 {
		interval = defaultGoneCheck
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var batch []*inbound
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		batch = batch[:0]
		for c := range s.conns {
			if c.state.Load() == connActive {
				batch = append(batch, c)
			}
		}
		s.mu.Unlock()
		for _, c := range batch {
			c.checkGone()
		}
		clear(batch) // hold no connection until the next tick
	}
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

func (s *Server) readHeaderTimeout() time.Duration {
	if s.ReadHeaderTimeout > 0 {
		return s.ReadHeaderTimeout
	}
	return defaultReadHeaderTimeout
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout > 0 {
		return s.IdleTimeout
	}
	return defaultIdleTimeout
}

func (s *Server) maxHeaderBytes() int {
	if s.MaxHeaderBytes > 0 {
		return s.MaxHeaderBytes
	}
	return defaultMaxHeaderBytes
}
