package relay

import (
	"net/http"
)

// holdSink keeps an answer from the client while the request may still be served otherwise:
// a probe's refusal (404, 405 or 501: "not this API family", replayed translated on the same
// target) and, when the request may move on, a failure (429 or 5xx: another target or the
// next model may serve it). What it held is for the chain code to take once the target is
// done; a failure too large to hold is the answer after all and goes on as it came.
type holdSink struct {
	next     Sink
	refusals bool // hold a refusal of the client's family
	failures bool // hold a failure
	held     *heldAnswer
}

// heldAnswer is a target's answer kept instead of written.
type heldAnswer struct {
	status  int
	header  http.Header
	length  int64 // as the target announced it (-1 unknown)
	body    []byte
	over    bool // more came than the bound add was given
	refusal bool // held as "does not speak this family" (else as a failure)
	// Set by the chain code that kept it: the conversion it was to go through, and what
	// answered it.
	conv  *conversion
	where servedBy
}

// add keeps b, up to limit bytes of body in all.
func (a *heldAnswer) add(b []byte, limit int) {
	if room := limit - len(a.body); len(b) > room {
		b = b[:max(room, 0)]
		a.over = true
	}
	a.body = append(a.body, b...)
}

// failed reports whether a status may send the request to another target: a busy target
// (429) or a failing one (5xx).
func failed(status int) bool { return status == http.StatusTooManyRequests || status >= 500 }

func (h *holdSink) wrap(next Sink, refusals, failures bool) Sink {
	h.next, h.refusals, h.failures, h.held = next, refusals, failures, nil
	return h
}

func (h *holdSink) Head(status int, hdr http.Header, length int64) (Sink, error) {
	refusal := h.refusals && refusesDialect(status)
	if refusal || (h.failures && failed(status)) {
		h.held = &heldAnswer{status: status, header: hdr, length: length, refusal: refusal}
		return h, nil
	}
	return h.next.Head(status, hdr, length)
}

// Chunk holds a refusal's body (its first maxErrorBody bytes: the replay needs none of it, a
// refusal in both families shows it) and a failure's while it fits maxErrorBody.
func (h *holdSink) Chunk(b []byte, flush bool) error {
	if k := h.held; k != nil {
		if k.refusal || len(k.body)+len(b) <= maxErrorBody {
			k.add(b, maxErrorBody)
			return nil
		}
		h.held = nil
		if _, err := h.next.Head(k.status, k.header, k.length); err != nil {
			return err
		}
		if err := h.next.Chunk(k.body, false); err != nil {
			return err
		}
	}
	return h.next.Chunk(b, flush)
}

// End passes nothing on while an answer is held: it is the chain code's to take.
func (h *holdSink) End() error {
	if h.held != nil {
		return nil
	}
	return h.next.End()
}

// take returns what is held (nil: nothing) and lets go of it.
func (h *holdSink) take() *heldAnswer {
	k := h.held
	h.held = nil
	return k
}

// refusal takes a held refusal; a held failure stays.
func (h *holdSink) refusal() *heldAnswer {
	if h.held == nil || !h.held.refusal {
		return nil
	}
	return h.take()
}

// drop lets go of what is held: the target broke off, so it is no answer to give.
func (h *holdSink) drop() { h.held = nil }
