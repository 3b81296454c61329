package usage

// maxEvent bounds the events a tap parses, and holds a copy of while they arrive: an event
// whose bytes (blank line included) exceed it is never parsed as a whole, nor edited; only
// its last maxTail bytes are kept, and searched for the last usage object as a JSON answer's
// are, so that a long Responses API response.completed (which repeats the whole answer)
// still counts. The bound holds whether an event arrives in one Write or in many, so the
// result does not depend on how the stream is cut.
const maxEvent = 64 << 10

// verdict is what becomes of an event in StreamStrip mode.
type verdict uint8

const (
	keep verdict = iota // passed on as it is
	drop                // the usage chunk: dropped
	edit                // passed on without its usage member: t.edit
)

// writeStream splits b into events, the first of which may have begun in an earlier Write.
func (t *Tap) writeStream(b []byte) {
	for pos := 0; pos < len(b); {
		n := t.fr.cut(b[pos:])
		if n < 0 {
			t.partial(b, pos)
			return
		}
		t.complete(b, pos, pos+n)
		pos += n
	}
}

// partial takes b[i:], the start or more of an event that goes on past b.
func (t *Tap) partial(b []byte, i int) {
	p := b[i:]
	switch {
	case t.long:
		t.tail.write(p)
		t.out.pass(i, len(b))
	case len(t.held)+len(p) > maxEvent:
		t.goLong()
		t.tail.write(p)
		t.out.pass(i, len(b))
	default:
		t.held = appendBounded(t.held, p, maxEvent)
	}
}

// complete takes b[i:j], the end (or all) of an event.
func (t *Tap) complete(b []byte, i, j int) {
	p := b[i:j]
	switch {
	case t.long:
		t.tail.write(p)
		t.out.pass(i, j)
		t.endLong()
	case len(t.held)+len(p) > maxEvent:
		t.goLong()
		t.tail.write(p)
		t.out.pass(i, j)
		t.endLong()
	case len(t.held) > 0:
		t.held = appendBounded(t.held, p, maxEvent)
		t.settle(t.held, -1, -1)
		t.held = t.held[:0]
	default:
		t.settle(p, i, j)
	}
}

// goLong gives the current event up: what was held of it is passed on and kept as the start
// of its tail.
func (t *Tap) goLong() {
	t.out.bytes(t.held)
	t.tail.reset()
	t.tail.write(t.held)
	t.held, t.long = t.held[:0], true
}

// endLong reads the tail of the long event that just ended.
func (t *Tap) endLong() {
	t.tally.readTail(t.tail.bytes())
	t.tail.reset()
	t.long = false
}

// settle reads a complete event, ev, and passes on what becomes of it: ev is the input's
// bytes [i:j] or, with i < 0, held ones.
func (t *Tap) settle(ev []byte, i, j int) {
	switch t.event(ev) {
	case keep:
		if i >= 0 {
			t.out.pass(i, j)
		} else {
			t.out.bytes(ev)
		}
	case edit:
		t.out.bytes(t.edit)
	}
}

// event reads a complete event no longer than maxEvent: only one that contains "usage" (not
// followed by null) is parsed.
func (t *Tap) event(ev []byte) verdict {
	if !mayReport(ev) {
		return keep
	}
	data, ok := eventData(ev, &t.join)
	if !ok {
		return keep
	}
	info, ok := readEvent(data)
	if !ok {
		return keep
	}
	t.tally.merge(&info.rep)
	if t.mode != StreamStrip || !info.usage || info.choices == noChoices {
		return keep // not an OpenAI chunk with usage: Anthropic's message_delta keeps its own
	}
	if info.choices == emptyChoices {
		return drop
	}
	t.data = withoutUsage(grow(t.data[:0], len(data), maxEvent), data)
	t.edit = rewriteEvent(grow(t.edit[:0], 2*len(ev), 2*maxEvent), ev, t.data)
	return edit
}
