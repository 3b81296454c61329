package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"modelrelay/protocol"
	"modelrelay/relay/endpoint"
	"modelrelay/relay/h1"
	"modelrelay/relay/wsconn"
)

// streamBuffers hold one backend read of a stream: the most one response_chunk carries. They
// are pooled and taken for one read and its frame, once the body has bytes (a held stream
// quiet between events holds none), and small: 2 KiB holds many token events (a few hundred
// bytes each), and a larger burst goes out in a few frames.
var streamBuffers = sync.Pool{New: func() any { b := make([]byte, 2<<10); return &b }}

// errServerCancel is the cause of a job's context when the server sent cancel.
var errServerCancel = errors.New("cancelled by the server")

// backend is the local inference server the daemon forwards to.
type backend struct {
	base string
	// h1 carries the requests (relay/h1: no goroutines per connection, header parsing
	// without reflection); client only lists the models.
	h1     *h1.Client
	client *http.Client
	log    *slog.Logger
	// maxBody caps a non-streamed answer: it travels in one frame of at most the frame limit
	// (the outbox checks the encoded frame; a raw body over the limit cannot fit in any case).
	maxBody int64
}

// newBackend makes the clients for base. Both dial it directly: a model backend is local to
// the worker, and an environment's HTTP proxy has no business in between.
func newBackend(base string, dialTimeout time.Duration, maxConcurrency int, maxBody int64, log *slog.Logger) *backend {
	t := &http.Transport{
		// Asking for gzip would make net/http decompress transparently; asking for nothing
		// keeps the bytes we relay exactly the bytes the backend sent.
		DisableCompression: true,
		DialContext:        (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		IdleConnTimeout:    90 * time.Second,
	}
	return &backend{
		base: strings.TrimRight(base, "/"),
		// Keep a connection per request slot: fewer and every burst re-dials.
		h1:      &h1.Client{DialTimeout: dialTimeout, MaxIdlePerHost: max(64, maxConcurrency)},
		client:  &http.Client{Transport: t},
		log:     log,
		maxBody: maxBody,
	}
}

// fail turns a transport error into the 502 for one request. The operator's log gets the
// whole error; the client gets words that do not reveal where the backend lives.
func (b *backend) fail(ctx context.Context, req protocol.Request, what string, err error) protocol.ResponseComplete {
	level := slog.LevelWarn
	if ctx.Err() != nil { // cancelled by the server or the daemon: expected, not a fault
		level = slog.LevelDebug
	}
	b.log.Log(ctx, level, what, "request_id", req.RequestID, "path", req.EndpointPath, "error", err)
	return backendFailure(what+": "+describe(err)).complete(req.RequestID, req.EndpointPath)
}

func (b *backend) closeIdle() {
	b.h1.CloseIdle()
	b.client.CloseIdleConnections()
}

// emitFunc hands one streamed piece of the body to the session, which encodes it before it
// returns: chunk is valid only during the call.
type emitFunc func(chunk []byte) error

// forward runs one request against the backend and returns its response_complete. It never
// fails: a backend that cannot be reached becomes a 502. When ctx is cancelled the backend
// call is aborted and the returned status is meaningless; the caller decides what to send.
// A whole answer's body comes back in body, a wsconn buffer (nil: the complete's own Body),
// which the caller releases.
func (b *backend) forward(ctx context.Context, req protocol.Request, emit emitFunc) (c protocol.ResponseComplete, body *[]byte) {
	if !strings.HasPrefix(req.EndpointPath, "/") {
		return failPath.complete(req.RequestID, req.EndpointPath), nil
	}
	target, err := url.Parse(b.base + req.EndpointPath)
	if err != nil {
		return failPath.complete(req.RequestID, req.EndpointPath), nil
	}
	// Replayable: a pooled connection the backend closed while idle is found out before any
	// answer, and the request goes again on a fresh one (as the relay does with upstreams).
	resp, err := b.h1.Do(ctx, &h1.Request{URL: target, Header: backendRequestHeaders(req.Headers),
		Body: strings.NewReader(req.Body), ContentLength: int64(len(req.Body)), Replayable: true})
	if err != nil {
		return b.fail(ctx, req, "backend request failed", err), nil
	}
	defer resp.Body.Close()
	// A streaming request the backend refused (a 4xx with a JSON error) is relayed whole, so
	// the client sees the backend's status instead of a 200 event stream holding an error.
	if req.IsStreaming && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return b.stream(ctx, req, resp, emit), nil
	}
	return b.whole(ctx, req, resp)
}

// whole reads a whole answer into a wsconn buffer, which the frame is then encoded from.
func (b *backend) whole(ctx context.Context, req protocol.Request, resp *h1.Response) (protocol.ResponseComplete, *[]byte) {
	body := wsconn.Buffer()
	if n := resp.ContentLength; n > 0 && n <= b.maxBody {
		*body = slices.Grow(*body, int(n))
	}
	var err error
	*body, err = wsconn.ReadAll(*body, io.LimitReader(resp.Body, b.maxBody+1))
	switch {
	case err != nil:
		wsconn.Release(body)
		return b.fail(ctx, req, "reading backend response", err), nil
	case int64(len(*body)) > b.maxBody:
		wsconn.Release(body)
		return tooLargeForFrame(b.maxBody).complete(req.RequestID, req.EndpointPath), nil
	}
	return protocol.ResponseComplete{RequestID: req.RequestID, StatusCode: uint16(resp.StatusCode),
		Headers: frameHeaders(resp.Header)}, body
}

// stream sends one chunk per backend read, cut on rune boundaries, then a response_complete
// with an empty body carrying the backend's status and headers.
func (b *backend) stream(ctx context.Context, req protocol.Request, resp *h1.Response, emit emitFunc) protocol.ResponseComplete {
	var cut runeCutter
	quiet, _ := resp.Body.(interface{ Wait() })
	for {
		if quiet != nil {
			quiet.Wait() // a quiet stream holds no buffer: it is taken once there are bytes
		}
		bp := streamBuffers.Get().(*[]byte)
		n, err := resp.Body.Read(*bp)
		var eerr error
		if n > 0 {
			if piece := cut.cut((*bp)[:n]); len(piece) > 0 {
				eerr = emit(piece)
			}
		}
		streamBuffers.Put(bp)
		if eerr != nil {
			return backendFailure("relaying stream: "+eerr.Error()).complete(req.RequestID, req.EndpointPath)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// Chunks already reached the server; this ends the stream there.
			return b.fail(ctx, req, "backend stream failed", err)
		}
	}
	if rest := cut.flush(); len(rest) > 0 {
		if err := emit(rest); err != nil {
			return backendFailure("relaying stream: "+err.Error()).complete(req.RequestID, req.EndpointPath)
		}
	}
	empty := ""
	return protocol.ResponseComplete{RequestID: req.RequestID, StatusCode: uint16(resp.StatusCode),
		Headers: frameHeaders(resp.Header), Body: &empty}
}

// models asks the backend which models it serves (OpenAI GET /v1/models).
func (b *backend) models(ctx context.Context) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+endpoint.ModelList, nil)
	if err != nil {
		return nil, fmt.Errorf("build models request: %w", err)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("list backend models: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("list backend models: status %d", resp.StatusCode)
	}
	ids, err := protocol.DecodeModelIDs(resp.Body, 8<<20)
	if err != nil {
		return nil, fmt.Errorf("decode backend models: %w", err)
	}
	if len(ids) == 0 {
		return nil, errors.New("backend lists no models")
	}
	return ids, nil
}

// describe says what went wrong in words fit for an API client: the full error (logged for
// the operator) names the backend's address, which clients have no business knowing.
func describe(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "request cancelled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed before the response ended"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "backend host not found"
	}
	return "backend unreachable"
}
