package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"modelrelay/protocol"
	"modelrelay/relay/endpoint"
	"modelrelay/relay/h1"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

const (
	connectTimeout   = 10 * time.Second
	discoveryTimeout = 2 * time.Second
	probeTimeout     = time.Second
)

// upstreamClient holds the clients every upstream shares, so connections are pooled per host
// and reused across requests: relay/h1 on the request path (a client made for this job,
// measured against net/http's in docs/measurements.md), net/http for model discovery.
type upstreamClient struct {
	h1        *h1.Client
	transport *http.Transport
	client    *http.Client
}

func newUpstreamClient() *upstreamClient {
	t := &http.Transport{
		Proxy:              nil, // a relay must not detour through the environment's proxy
		DialContext:        (&net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:       16,
		IdleConnTimeout:    90 * time.Second,
		DisableCompression: true,
	}
	return &upstreamClient{
		h1:        &h1.Client{DialTimeout: connectTimeout, IdleTimeout: 90 * time.Second, MaxIdlePerHost: 256},
		transport: t,
		client: &http.Client{
			Transport: t,
			// Redirects are the client's business, not ours.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

func (c *upstreamClient) close() {
	c.h1.CloseIdle()
	c.transport.CloseIdleConnections()
}

// Copy buffers are pooled, taken for one read and its write, and a stream's is small: events
// are small, while a whole answer moves in large reads.
var (
	copyBuffers   = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}
	streamBuffers = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}
)

// upstream is an HTTP model server the relay calls directly: a static backend or a circuit
// replica.
type upstream struct {
	srv        *Server
	m          *member
	pool       *Pool
	base       *url.URL
	basePath   string   // base's path, escaped: what the client's path is appended to
	configured []string // models from the config; empty = discover
	clientHost bool     // send the client's Host (circuit replicas), not the upstream's own
	apiKey     string   // the backend's own credential (never logged)
	onServed   func()   // optional: the control plane counts use (last-used markers)
}

func newUpstream(s *Server, b Backend, static bool) (*upstream, error) {
	base, err := url.Parse(strings.TrimRight(b.URL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("backend %q: url %q is not an http(s) URL", b.Name, b.URL)
	}
	weight := b.Weight
	if weight <= 0 {
		weight = 1
	}
	id := b.Name
	if id == "" {
		id = base.Host
	}
	u := &upstream{srv: s, base: base, basePath: base.EscapedPath(), configured: b.Models, clientHost: !static, apiKey: b.APIKey}
	u.m = &member{id: id, name: id, kind: kindUpstream, seq: s.memberSeq.Add(1), target: u, speech: newSpeech(b.Dialects),
		maxConcurrent: b.MaxConcurrent, weight: weight}
	u.m.setModels(b.Models)
	return u, nil
}

// serveWorker rejects a relay-protocol request on an upstream that cannot take it.
func (u *upstream) String() string {
	return u.m.id
}

func (u *upstream) drained() {}

// serve makes the HTTP call on the request's goroutine and streams the answer as it arrives.
// What happened before the first byte of the answer feeds the upstream's breaker.
func (u *upstream) serve(ctx context.Context, req *Request, c call) error {
	said := outcomeNone
	defer func() { c.slot.release(said) }()
	resp, err := u.send(ctx, req, &said)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	said = judge(resp.StatusCode, c.probing)
	if u.onServed != nil {
		u.onServed()
	}
	streaming := req.Streaming || isEventStream(resp.Header)
	length := int64(-1)
	if resp.ContentLength >= 0 && !streaming {
		length = resp.ContentLength
	}
	body, err := c.out.Head(resp.StatusCode, resp.Header, length)
	if err != nil {
		return err
	}
	return u.copyBody(ctx, resp.Body, body, streaming)
}

// send sends req and reads the answer's head, or says in *said how the target failed. (The
// request's build-up stays in this frame, off the stack a streamed answer is copied on.)
func (u *upstream) send(ctx context.Context, req *Request, said *outcome) (*h1.Response, error) {
	start := time.Now()
	resp, err := u.srv.upstreams.h1.Do(ctx, u.request(req))
	if err == nil {
		return resp, nil
	}
	switch {
	case req.stream != nil && req.stream.err() != nil:
		return nil, req.stream.err() // the client's body broke, not the upstream
	case ctx.Err() != nil:
		if u.unanswered(ctx, err, start) {
			*said = outcomeFailed
		}
		return nil, causeOf(ctx)
	case isDial(err):
		// The backend never saw the request: another target may serve it. (A pooled
		// connection found dead is retried by the client itself, on a fresh dial.)
		*said = outcomeRefused
		return nil, errTargetLost
	}
	*said = outcomeFailed
	return nil, errUpstream(describe(err))
}

// unanswered says whether a call the relay ended (the client left, a hard stop, the request
// timeout) is the target's failure: only the request timeout, and only when the target had the
// whole request and held it unanswered for at least half the request timeout. The rest of
// that time is the relay's (queued, reading a slow client's body, translating, sending) and a
// healthy target must not lose its breaker over it; a target that sits on a request it has
// whole for that long is not answering.
func (u *upstream) unanswered(ctx context.Context, err error, start time.Time) bool {
	return errors.Is(causeOf(ctx), errRequestTimeout) && errors.Is(err, h1.ErrUnanswered) &&
		time.Since(start) >= u.srv.opts.RequestTimeout/2
}

// judge is what an answer's status says about the target: a 5xx is a failure, a 429 a busy
// (live) target, anything else an answer. A probe's 501 means "not this API family", not a
// failure.
func judge(status int, probing bool) outcome {
	switch {
	case status == http.StatusTooManyRequests:
		return outcomeNone
	case status >= 500 && !(probing && refusesDialect(status)):
		return outcomeFailed
	}
	return outcomeOK
}

// request builds the upstream call: the upstream's base URL with the client's path and query
// appended as the client escaped them, the client's end-to-end headers, and the body:
// rewindable, so the client may send it again on a fresh connection when a pooled one turns
// out dead before any answer; a pass-through body is streamed as it arrives.
func (u *upstream) request(req *Request) *h1.Request {
	c := new(upstreamCall)
	hreq := &c.req
	*hreq = h1.Request{Method: req.Method, URL: u.base, Target: u.basePath + req.Path, Header: req.Header}
	if req.stream != nil {
		hreq.Body, hreq.ContentLength = req.stream, req.streamLength
	} else if len(req.Body) > 0 {
		c.body.Reset(req.Body)
		hreq.Body, hreq.ContentLength, hreq.Replayable = &c.body, int64(len(req.Body)), true
	} else {
		hreq.Replayable = true
	}
	if u.clientHost {
		hreq.Host = req.Host
	}
	if u.apiKey != "" {
		hreq.Header = u.credentials(req)
	}
	return hreq
}

// upstreamCall is the memory of one upstream call in one allocation: the request and its
// body's reader.
type upstreamCall struct {
	req  h1.Request
	body bytes.Reader
}

// credentials are the request's headers with the backend's own key in place of whatever the
// client sent, where the API family being sent carries it.
func (u *upstream) credentials(req *Request) http.Header {
	h := req.Header.Clone()
	h.Del("Authorization")
	h.Del("X-Api-Key")
	if req.sentAs() == Anthropic {
		h.Set("X-Api-Key", u.apiKey)
		if h.Get("Anthropic-Version") == "" {
			h.Set("Anthropic-Version", anthropicVersion)
		}
	} else {
		h.Set("Authorization", "Bearer "+u.apiKey)
	}
	return h
}

// copyBody relays the body read by read; streams flush after every read so each event
// reaches the client before the next is produced.
func (u *upstream) copyBody(ctx context.Context, body io.Reader, out Sink, streaming bool) error {
	pool := &copyBuffers
	var quiet waiter
	if streaming {
		pool = &streamBuffers
		quiet, _ = body.(waiter)
	}
	for {
		if quiet != nil {
			quiet.Wait()
		}
		bp := pool.Get().(*[]byte)
		n, err := body.Read(*bp)
		var werr error
		if n > 0 {
			werr = out.Chunk((*bp)[:n], streaming)
		}
		pool.Put(bp)
		switch {
		case werr != nil:
			return werr
		case err == io.EOF:
			return nil
		case err != nil:
			if ctx.Err() != nil {
				return causeOf(ctx)
			}
			return errUpstream(describe(err))
		}
	}
}

// waiter is a body that can wait for its next bytes without a buffer to read them into
// (relay/h1's): a held stream then keeps no copy buffer while its upstream is quiet.
type waiter interface{ Wait() }

func isDial(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

func describe(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "upstream timed out"
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "upstream closed the connection"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return "upstream connection " + oe.Op + " failed"
	}
	return "upstream request failed"
}

// discoverLoop fills in the models of an upstream configured without any, retrying until the
// upstream answers and refreshing now and then after.
func (u *upstream) discoverLoop(ctx context.Context) {
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		models, err := discoverModels(ctx, u.srv.upstreams.client, u.base)
		if err != nil {
			u.srv.log.Debug("model discovery failed", "upstream", u.m.id, "err", err)
			wait = u.srv.timings.Discovery
			continue
		}
		if u.pool != nil {
			u.pool.setModels(u.m, models, -1)
		}
		wait = 12 * u.srv.timings.Discovery
	}
}

// discoverModels asks an OpenAI-compatible server for its model ids.
func discoverModels(ctx context.Context, client *http.Client, base *url.URL) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.String()+endpoint.ModelList, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /v1/models: %s", describe(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/models: status %d", resp.StatusCode)
	}
	models, err := protocol.DecodeModelIDs(resp.Body, 4<<20)
	if err != nil {
		return nil, fmt.Errorf("GET /v1/models: %w", err)
	}
	return models, nil
}

// probe dials the upstream: the active half of its health.
func (u *upstream) probe(ctx context.Context) bool {
	host := u.base.Host
	if u.base.Port() == "" {
		port := "80"
		if u.base.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.base.Hostname(), port)
	}
	d := net.Dialer{Timeout: probeTimeout}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// DiscoverModels asks the OpenAI-compatible server at baseURL for its model ids (2 s timeout).
func (s *Server) DiscoverModels(ctx context.Context, baseURL string) ([]string, error) {
	base, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("discover models: %w", err)
	}
	return discoverModels(ctx, s.upstreams.client, base)
}
