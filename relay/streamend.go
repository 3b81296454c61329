package relay

import "bytes"

// streamEnd follows an event stream as it is written to the client, to tell whether it is over:
// its last event is whole and is one after which the API sends nothing (OpenAI's data: [DONE],
// Anthropic's message_stop, the Responses API's response.completed, .incomplete or .failed). A
// target lost after that event (a worker killed between its last chunk and its completion
// frame, an upstream cut before its chunked body's end) has delivered the whole answer: an
// error event appended to it would be an event after the end of the stream.
//
// It keeps the first bytes of the event being written and whether the bytes so far end at an
// event's end (a blank line), across writes split anywhere.
type streamEnd struct {
	head  [32]byte // the first bytes of the last event begun
	n     int
	mid   bool // inside an event: the next byte does not begin one
	nl    bool // the last byte written was a line end
	whole bool // the last event begun has ended (the bytes so far end with a blank line)
}

// finalEvents begin the events after which a stream carries nothing more.
var finalEvents = [...]string{
	"data: [DONE]",
	"event: message_stop",
	"event: response.completed",
	"event: response.incomplete",
	"event: response.failed",
}

// write follows b, the next bytes of the stream.
func (s *streamEnd) write(b []byte) {
	for len(b) > 0 {
		if !s.mid {
			if b[0] == '\n' || b[0] == '\r' { // blank lines between events
				b = b[1:]
				continue
			}
			s.mid, s.whole, s.n, s.nl = true, false, 0, false
		}
		// Up to the end of the current event, or of b.
		i := eventEnd(b, s.nl)
		part := b
		if i >= 0 {
			part = b[:i]
		}
		s.n += copy(s.head[s.n:], part)
		if i < 0 {
			s.nl = b[len(b)-1] == '\n'
			return
		}
		s.mid, s.whole = false, true
		b = b[i:]
	}
}

// eventEnd is the index just past the blank line ending an event in b (nl: the bytes before
// b ended with a line end), or -1.
func eventEnd(b []byte, nl bool) int {
	if nl && b[0] == '\n' {
		return 1
	}
	if i := bytes.Index(b, []byte("\n\n")); i >= 0 {
		return i + 2
	}
	return -1
}

// over reports whether the stream's last event is whole and final.
func (s *streamEnd) over() bool {
	if !s.whole {
		return false
	}
	head := s.head[:s.n]
	for _, f := range finalEvents {
		if bytes.HasPrefix(head, []byte(f)) && len(head) > len(f) && (head[len(f)] == '\n' || head[len(f)] == '\r') {
			return true
		}
	}
	return false
}
