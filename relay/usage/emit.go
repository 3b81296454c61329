package usage

// maxOut is as large an output buffer as Reset keeps: the buffer holds one Write's output in
// StreamStrip mode (its events, edited, and an event held from earlier Writes), so a Write
// of a huge slice makes it as large, but a pooled Tap does not keep that for ever.
const maxOut = 4 * maxEvent

// emitter collects what a StreamStrip Write passes on. While that is one run of the input's
// bytes, the usual case, it is a subslice of the input: no copy. Off (the other modes), it
// does nothing.
type emitter struct {
	on     bool
	src    []byte
	ps, pe int  // src[ps:pe] goes out next, not yet copied
	copied bool // buf holds the output so far
	buf    []byte
}

func (e *emitter) reset() {
	if cap(e.buf) > maxOut {
		e.buf = nil
	}
	e.start(nil, false)
}

func (e *emitter) start(src []byte, on bool) {
	e.on, e.src, e.ps, e.pe, e.copied, e.buf = on, src, 0, 0, false, e.buf[:0]
}

// pass sends src[i:j] on as it is.
func (e *emitter) pass(i, j int) {
	if !e.on || i >= j {
		return
	}
	if e.pe > e.ps && e.pe == i {
		e.pe = j
		return
	}
	e.flush()
	e.ps, e.pe = i, j
}

// bytes sends p on (a held event, an edited one).
func (e *emitter) bytes(p []byte) {
	if !e.on || len(p) == 0 {
		return
	}
	e.flush()
	e.buf = append(e.buf, p...)
	e.copied = true
}

func (e *emitter) flush() {
	if e.pe > e.ps {
		e.buf = append(e.buf, e.src[e.ps:e.pe]...)
		e.copied = true
	}
	e.ps, e.pe = 0, 0
}

// result is the output; the emitter lets go of the input.
func (e *emitter) result() []byte {
	out := e.src[e.ps:e.pe]
	if e.copied {
		e.flush()
		out = e.buf
	}
	e.src, e.ps, e.pe = nil, 0, 0
	return out
}
