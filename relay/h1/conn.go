package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// conn is one connection to an upstream, carrying one request at a time.
type conn struct {
	nc   net.Conn // what requests go over: the TCP connection, or TLS on it
	raw  net.Conn // the TCP connection
	br   *reader
	bw   *bufio.Writer // only while a request is written (startWrite to endWrite)
	head headReader
	key  poolKey
	// reused is set when the connection comes out of the pool: only then may a request
	// that met a dead connection be sent again.
	reused    bool
	idleSince time.Time
	// abort is expire bound once, so that registering it with context.AfterFunc for every
	// request allocates no method value.
	abort  func()
	closed atomic.Bool
	num    [20]byte // scratch for formatting numbers
	probe  probe    // the liveness check when leaving the pool
}

// writers are the buffers requests are written through. A connection holds one only while it
// writes a request: an idle connection, or one whose answer streams for minutes, holds none.
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}

// startWrite gives cn a write buffer for one request.
func (cn *conn) startWrite() {
	cn.bw = writers.Get().(*bufio.Writer)
	cn.bw.Reset(cn.nc)
}

// endWrite gives the write buffer back once the request is written, or failed to be.
func (cn *conn) endWrite() {
	cn.bw.Reset(nil)
	writers.Put(cn.bw)
	cn.bw = nil
}

// keepAlive is the TCP keep-alive period, as both callers configured net/http's dialer.
const keepAlive = 30 * time.Second

// aLongTimeAgo is a deadline in the past: setting it makes every blocked and future read
// and write on the connection fail at once.
var aLongTimeAgo = time.Unix(1, 0)

// dial opens a connection to the target: TCP, then TLS when the URL says https. Any failure
// is a *net.OpError with Op "dial": the request was not sent, wherever the failure was.
func (c *Client) dial(ctx context.Context, t *target) (*conn, error) {
	port := t.url.Port()
	if port == "" {
		port = "80"
		if t.key.tls {
			port = "443"
		}
	}
	timeout := c.dialTimeout()
	d := net.Dialer{Timeout: timeout, KeepAlive: keepAlive}
	raw, err := d.DialContext(ctx, "tcp", net.JoinHostPort(t.url.Hostname(), port))
	if err != nil {
		return nil, err
	}
	nc := raw
	if t.key.tls {
		tc := tls.Client(raw, c.tlsConfig(t.url.Hostname()))
		// The handshake counts against the dial timeout; a deadline on the socket bounds it
		// without a timer, and ctx still cancels it.
		raw.SetDeadline(time.Now().Add(timeout))
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: raw.RemoteAddr(), Err: &handshakeError{err}}
		}
		raw.SetDeadline(time.Time{})
		nc = tc
	}
	cn := &conn{nc: nc, raw: raw, key: t.key, br: newReader(nc)}
	cn.head.br = cn.br
	cn.abort = cn.expire
	if sc, ok := raw.(syscall.Conn); ok {
		cn.probe.init(sc)
	}
	return cn, nil
}

// tlsConfig is the client's TLS configuration for one host: SNI and verification from the
// URL's host unless the configuration names a server, and HTTP/1.1 as the only protocol
// offered, so that an upstream that prefers h2 still answers in the protocol we speak.
func (c *Client) tlsConfig(host string) *tls.Config {
	var cfg *tls.Config
	if c.TLSConfig != nil {
		cfg = c.TLSConfig.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	cfg.NextProtos = []string{"http/1.1"}
	return cfg
}

// expire makes every blocked read and write on the connection return at once: how a done
// context aborts a request without a timer of its own.
func (cn *conn) expire() {
	cn.nc.SetDeadline(aLongTimeAgo)
}

// close closes the TCP connection itself, also under TLS: a close_notify alert could wait
// on an upstream that stopped reading, and HTTP/1.1's framing does not need it.
func (cn *conn) close() {
	if cn.closed.CompareAndSwap(false, true) {
		cn.raw.Close()
	}
}

// alive reports whether a connection taken from the pool can carry a request: the upstream
// has not closed it and sent nothing unasked while it sat idle.
func (cn *conn) alive() bool {
	return cn.probe.alive()
}
