package h1

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Client sends requests to HTTP/1.1 upstreams over pooled keep-alive connections. Its zero
// value is ready to use; set the fields before the first request and do not change them
// after. It is safe for concurrent use.
type Client struct {
	// DialTimeout bounds the TCP connect and the TLS handshake. 0 means 30 s.
	DialTimeout time.Duration
	// IdleTimeout is how long a connection may sit idle in the pool. 0 means 90 s.
	IdleTimeout time.Duration
	// MaxIdlePerHost bounds the idle connections kept per upstream. 0 means 256;
	// negative keeps none.
	MaxIdlePerHost int
	// TLSConfig is used for https upstreams (cloned per dial; ServerName defaults to the
	// URL's host, NextProtos is always http/1.1). nil means the defaults.
	TLSConfig *tls.Config

	mu    sync.Mutex
	pools map[poolKey]*hostPool
	now   func() time.Time // the pool's clock; tests replace it
}

// Request is one call to an upstream.
type Request struct {
	Method string   // "" means POST
	URL    *url.URL // http or https; the escaped path and raw query are the request target
	// Target, when set, is the request target as sent instead of URL's path and query: an
	// origin-form target already escaped ("/v1/x%20y?a=b"), or "*", as a server received it.
	Target string
	Host   string // the Host field; "" means URL.Host
	// Header holds the end-to-end fields, written as given: the caller removes hop-by-hop
	// ones. Host, Content-Length, Transfer-Encoding and Trailer are the client's own and are
	// skipped; a name with no values is skipped too.
	Header http.Header
	// Body is the request body, or nil. Do may go on reading it on a goroutine of its own
	// after Do returns (the answer can begin before the body is sent), until it returns an
	// error or EOF, or the request is over; Do never closes it.
	Body io.Reader
	// ContentLength > 0 is the body's length, sent as Content-Length. 0 with a
	// *bytes.Reader, *strings.Reader or *bytes.Buffer body takes the length from it; 0 with
	// no body is an empty body. -1, or 0 with any other body, means unknown: sent chunked.
	ContentLength int64
	// Replayable allows one retry on a fresh connection when a pooled connection turns out
	// dead before any byte of the answer (the upstream closed it while idle). The Body must
	// then be an io.Seeker; it is rewound to offset 0. An upstream that read the request and
	// closed without answering can see it twice, as with net/http's retry.
	Replayable bool
}

// Response is an upstream's answer. The caller must read Body to EOF or Close it: the
// connection goes back to the pool only at EOF of a response that allows keep-alive; Close
// before EOF closes the connection.
type Response struct {
	StatusCode int
	// Header has canonical names. Transfer-Encoding is removed (Body is decoded), and so is
	// Trailer with chunked framing (trailers are dropped); the rest is as sent, hop-by-hop
	// fields included. A repeated identical Content-Length is kept once.
	Header http.Header
	// ContentLength is the body's length, or -1 when unknown (chunked, or until close). For
	// an answer to HEAD it is the Content-Length field's value (or -1); for 1xx, 204 and 304
	// it is 0.
	ContentLength int64
	Body          io.ReadCloser
}

// Do sends r and returns the answer once its head has arrived; the body streams as it comes.
// ctx bounds the whole exchange: the dial, the writes, and every read of the body. The
// errors callers act on:
//
//   - a failed dial or TLS handshake is a *net.OpError with Op "dial": the upstream never saw
//     the request;
//   - ctx ending is reported as an error wrapping ctx.Err(), and ErrUnanswered when the
//     whole request had gone out;
//   - a response that breaks HTTP/1.1's rules wraps ErrMalformed;
//   - a body that ends before its framing says wraps io.ErrUnexpectedEOF.
func (c *Client) Do(ctx context.Context, r *Request) (*Response, error) {
	t, err := resolve(r)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("h1: %w", err)
	}
	cn := c.get(t.key, r.Replayable)
	for attempt := 0; ; attempt++ {
		if cn == nil {
			if cn, err = c.dial(ctx, &t); err != nil {
				return nil, fmt.Errorf("h1: %w", err)
			}
		}
		resp, retry, err := c.roundTrip(ctx, cn, r, &t)
		if err == nil {
			return resp, nil
		}
		if !retry || !r.Replayable || attempt > 0 || ctx.Err() != nil {
			return nil, err
		}
		if s, ok := r.Body.(io.Seeker); ok {
			if _, serr := s.Seek(0, io.SeekStart); serr != nil {
				return nil, err
			}
		}
		cn = nil // a fresh connection: the pool's others may be as dead as this one
	}
}

func (c *Client) dialTimeout() time.Duration {
	if c.DialTimeout > 0 {
		return c.DialTimeout
	}
	return 30 * time.Second
}

func (c *Client) idleTimeout() time.Duration {
	if c.IdleTimeout > 0 {
		return c.IdleTimeout
	}
	return 90 * time.Second
}

func (c *Client) maxIdle() int {
	if c.MaxIdlePerHost == 0 {
		return 256
	}
	return c.MaxIdlePerHost
}

func (c *Client) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// Watcher is a context that runs a connection's abort itself when it ends, where
// context.AfterFunc would make a registration of its own for every call: a caller whose
// context already keeps what a call needs (its own reasons to end, one watch on the context
// it derives from) saves the call that registration. The client uses it in place of
// context.AfterFunc:
//
//   - Watch registers abort, to run when the context ends, or at once if it has ended
//     already, and returns the registration's id. abort is idempotent and does not block: it
//     may run more than once, on whichever goroutine ends the context.
//   - Unwatch takes the registration back before the call's connection is reused, and
//     reports whether its abort had not run (and now will not); false means the connection's
//     deadline is spent.
//
// Calls under one context may overlap (a large body still going up on its goroutine while
// the caller has moved on to another call): each has its own registration.
type Watcher interface {
	context.Context
	Watch(abort func()) (id uint64)
	Unwatch(id uint64) bool
}
