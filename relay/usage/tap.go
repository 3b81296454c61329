package usage

// Mode says what kind of answer a Tap follows.
type Mode uint8

const (
	// JSON is a whole (non-streamed) JSON answer: its top-level usage member counts.
	JSON Mode = iota
	// Stream is a server-sent-events stream, watched only: Write passes every byte on.
	Stream
	// StreamStrip is an OpenAI SSE stream whose usage chunk the client did not ask for (the
	// relay asked for it with AskForUsage): watched, and the usage removed before the client
	// sees it.
	StreamStrip
)

// Tap follows one answer as its bytes pass from the model server to the client and keeps
// the tokens it reports. The zero value is not ready: call Reset. It is reusable (sync.Pool
// friendly) via Reset, and not safe for concurrent use.
type Tap struct {
	mode  Mode
	tally tally
	fr    framer
	held  []byte  // the current event's bytes so far, while it is no longer than maxEvent
	long  bool    // the current event is longer than maxEvent: only its end is kept, in tail
	tail  ring    // JSON: the end of the answer; stream modes: the end of a long event
	join  []byte  // an event's data joined from several data lines
	data  []byte  // StreamStrip: the data of an event without its usage
	edit  []byte  // StreamStrip: that event rewritten
	out   emitter // StreamStrip: what Write passes on
}

// Reset makes the tap ready to follow a new answer of mode m (an unknown mode is Stream),
// keeping its buffers but letting go of an output buffer a huge Write left large.
func (t *Tap) Reset(m Mode) {
	if m > StreamStrip {
		m = Stream
	}
	t.mode, t.tally, t.fr, t.long = m, tally{}, framer{}, false
	t.held = t.held[:0]
	t.tail.reset()
	t.out.reset()
}

// Write takes the next bytes of the answer and returns the bytes to pass on to the client
// now. In JSON and Stream modes that is always b itself (same slice, unchanged). In
// StreamStrip mode it may hold back the tail of an incomplete event until its end arrives,
// and drops or edits the usage chunk; the returned slice may alias b or an internal buffer
// valid until the next call.
func (t *Tap) Write(b []byte) []byte {
	switch t.mode {
	case JSON:
		t.tail.write(b)
		return b
	case StreamStrip:
		t.out.start(b, true)
		t.writeStream(b)
		return t.out.result()
	}
	t.out.start(nil, false) // off: nothing to collect, nothing of b to keep
	t.writeStream(b)
	return b
}

// Close ends the answer and returns what the tap still holds, to pass on: in StreamStrip
// mode, an unterminated last event (edited or dropped like any other); nothing otherwise.
// The returned slice is valid until the next call.
func (t *Tap) Close() []byte {
	if t.mode == JSON {
		t.tally.readTail(t.tail.bytes())
		t.tail.reset()
		return nil
	}
	t.out.start(nil, t.mode == StreamStrip)
	switch {
	case t.long:
		t.endLong()
	case len(t.held) > 0:
		t.settle(t.held, -1, -1)
	}
	t.held, t.fr = t.held[:0], framer{}
	if t.mode != StreamStrip {
		return nil
	}
	return t.out.result()
}

// Counts is what the answer reported: call it after Close. Fields the answer never reported
// stay 0.
func (t *Tap) Counts() Counts { return t.tally.counts() }
