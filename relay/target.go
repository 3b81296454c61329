package relay

import (
	"context"
	"errors"
)

// target is anything the dispatcher can hand a request to: a relay worker session or an HTTP
// upstream. Both run a request on the request's own goroutine, so a slow client slows only
// its own stream.
type target interface {
	// serve runs one attempt of req and writes the answer to c.out: its head and its body,
	// never End (the caller ends the answer once the target is done with it). It returns nil
	// when the target answered (whatever the status), errTargetLost when the target went away
	// before the first byte reached the client (the caller requeues), or another error (the
	// caller answers it). It must arrange for c.slot.release to be called exactly once,
	// possibly after it returns, with what the attempt said about the target's health.
	serve(ctx context.Context, req *Request, c call) error
	// drained is called when a draining member finishes its last request.
	drained()
}

// call is one attempt as its target sees it: where the answer goes and what the attempt is.
type call struct {
	out Sink
	// probing: the request goes in the client's family to a target that may not speak it, so
	// a 404, 405 or 501 may mean "not this family" (no failure of the target).
	probing bool
	slot    releaser
}

// releaser gives back a hold on a target's capacity with what the attempt said of the target.
type releaser interface{ release(outcome) }

// errTargetLost means the attempt's target disappeared; what happens next depends on whether
// the client has seen any bytes.
var errTargetLost = errors.New("target lost")
