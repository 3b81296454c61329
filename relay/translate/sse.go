package translate

import (
	"bytes"
	"errors"
)

// MaxEventBytes bounds one server-sent event (its pending line and its data): a stream whose
// event grows past it fails instead of growing the relay's memory.
const MaxEventBytes = 1 << 20

var errEventTooLarge = errors.New("stream event exceeds 1 MiB")

// sseScanner splits server-sent-event bytes, fed in pieces cut anywhere, into events.
type sseScanner struct {
	pending []byte // bytes of an unfinished line
	event   []byte // the current event's name
	data    []byte // the current event's data lines, joined by \n
	hasData bool
}

// feed scans p and calls fn for every event it completes. The slices fn gets are valid only
// during the call.
func (s *sseScanner) feed(p []byte, fn func(event, data []byte) error) error {
	if len(s.pending) > 0 {
		// Finish the line carried over from the last piece first.
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(s.pending)+len(p) > MaxEventBytes {
				return errEventTooLarge
			}
			s.pending = append(s.pending, p...)
			return nil
		}
		s.pending = append(s.pending, p[:i+1]...)
		line := s.pending
		p = p[i+1:]
		if err := s.line(line[:len(line)-1], fn); err != nil {
			return err
		}
		s.pending = s.pending[:0]
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(p) > MaxEventBytes {
				return errEventTooLarge
			}
			s.pending = append(s.pending, p...)
			return nil
		}
		if err := s.line(p[:i], fn); err != nil {
			return err
		}
		p = p[i+1:]
	}
	return nil
}

func (s *sseScanner) line(line []byte, fn func(event, data []byte) error) error {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if len(line) == 0 {
		if !s.hasData && len(s.event) == 0 {
			return nil
		}
		err := fn(s.event, s.data)
		s.event, s.data, s.hasData = s.event[:0], s.data[:0], false
		return err
	}
	if line[0] == ':' {
		return nil // comment (keep-alive)
	}
	field, value, _ := bytes.Cut(line, []byte{':'})
	value = bytes.TrimPrefix(value, []byte{' '})
	switch string(field) {
	case "event":
		s.event = append(s.event[:0], value...)
	case "data":
		if len(s.data)+len(value) > MaxEventBytes {
			return errEventTooLarge
		}
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.hasData = true
	}
	return nil
}
