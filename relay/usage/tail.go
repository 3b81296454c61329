package usage

import (
	"slices"

	"modelrelay/relay/rawjson"
)

// maxTail is how much of the end of a JSON answer (or of an event too long to hold) is kept
// to find its usage in. Every server writes usage at or near the end: OpenAI and vLLM after
// choices (then at most system_fingerprint, service_tier, a few nulls), Anthropic last, the
// Responses API before only user and metadata (at most 16 short pairs). 16 KiB leaves room to
// spare for those and for the usage object itself, while a body of any size costs no more.
const maxTail = 16 << 10

// ring keeps the last maxTail bytes written to it, in a buffer of at most maxTail bytes.
type ring struct {
	buf  []byte // the bytes, in order until full; then oldest at head
	head int
}

func (r *ring) reset() { r.buf, r.head = r.buf[:0], 0 }

func (r *ring) write(p []byte) {
	if len(p) >= maxTail {
		r.buf, r.head = appendBounded(r.buf[:0], p[len(p)-maxTail:], maxTail), 0
		return
	}
	if room := maxTail - len(r.buf); room > 0 {
		n := min(room, len(p))
		r.buf = appendBounded(r.buf, p[:n], maxTail)
		p = p[n:]
	}
	for len(p) > 0 { // full: overwrite the oldest bytes
		n := copy(r.buf[r.head:], p)
		p = p[n:]
		r.head = (r.head + n) % maxTail
	}
}

// bytes returns the kept bytes in order, valid until the next write.
func (r *ring) bytes() []byte {
	if r.head != 0 { // rotate left by head, in place
		slices.Reverse(r.buf[:r.head])
		slices.Reverse(r.buf[r.head:])
		slices.Reverse(r.buf)
		r.head = 0
	}
	return r.buf
}

// readTail reads the usage object of a JSON text of which tail is the end: the last
// "usage" followed by a colon names a member (inside a string its quotes would be escaped),
// and the object after it is read. If that value is not an object, or is cut off, there is
// no report: an earlier usage member is not looked for.
func (t *tally) readTail(tail []byte) {
	for end := len(tail); ; {
		k := lastIndexUsage(tail[:end])
		if k < 0 {
			return
		}
		end = k
		if escaped(tail, k) {
			continue // the end of a string holding `\"usage`
		}
		colon := rawjson.SkipSpace(tail, k+len(usageKey))
		if colon < len(tail) && tail[colon] == ':' {
			t.readUsage(tail, rawjson.SkipSpace(tail, colon+1))
			return
		}
	}
}

// escaped reports whether the quote at b[k] is escaped: an odd run of backslashes before it.
func escaped(b []byte, k int) bool {
	n := 0
	for k-n-1 >= 0 && b[k-n-1] == '\\' {
		n++
	}
	return n%2 == 1
}
