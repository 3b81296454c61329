package relay

import (
	"context"
	"errors"
)

// target is anything the dispatcher can hand a request to: a relay worker session or an HTTP
// upstream. Both run a request on the request's own goroutine, so a slow client slows only
// its own stream.
type target interface {
	// serve runs one attempt of req and writes the answer to out. It returns nil when the
	// target answered (whatever the status), errTargetLost when the target went away before
	// the first byte reached the client (the caller requeues), or another error. It must
	// arrange for release to be called exactly once, possibly after it returns, with what the
	// attempt said about the target's health.
	serve(ctx context.Context, req *Request, out *responder, release func(outcome)) error
	// drained is called when a draining member finishes its last request.
	drained()
}

// errTargetLost means the attempt's target disappeared; what happens next depends on whether
// the client has seen any bytes.
var errTargetLost = errors.New("target lost")
