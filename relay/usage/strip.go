package usage

// This file edits an event of an OpenAI stream whose usage the client did not ask for: its
// data loses every top-level usage member that is not null, the rest of the event stays as
// it was.

import (
	"bytes"

	"modelrelay/relay/rawjson"
)

// stripped reports whether a member goes: a top-level usage that is not null ("usage": null
// in ordinary chunks is what the client gets without asking, it stays).
func stripped(data []byte, m *rawjson.Member) bool {
	return isUsage(m.Key) && data[m.Value] != 'n'
}

// withoutUsage appends to dst the JSON object data (valid: readEvent read it) without its
// stripped members. The bytes around them stay as they were, separators included:
// `{"a":1, "usage":{…}}` becomes `{"a":1}`, `{"usage":{…}, "a":1}` becomes `{"a":1}`.
func withoutUsage(dst, data []byte) []byte {
	open := rawjson.SkipSpace(data, 0)
	dst = append(dst, data[:open+1]...)
	o := rawjson.ObjectAt(data, open, rawjson.Checked)
	var m rawjson.Member
	first, prev, wrote := -1, open+1, false
	for o.Next(&m) {
		if first < 0 {
			first = m.Start
		}
		if !stripped(data, &m) {
			if wrote {
				dst = append(dst, data[prev:m.Start]...) // the separator before m
			} else {
				dst = append(dst, data[open+1:first]...) // the space after the brace
			}
			dst = append(dst, data[m.Start:m.End]...)
			wrote = true
		}
		prev = m.End
	}
	return append(dst, data[prev:]...)
}

// rewriteEvent appends to dst the event ev with data in place of its data. Lines that are not
// data stay as they were, in place; the data lines become one line per line of data, where
// the first data line was, with its prefix ("data:" or "data: ") and line terminator.
func rewriteEvent(dst, ev, data []byte) []byte {
	done := false
	for i := 0; i < len(ev); {
		line, next := nextLine(ev, i)
		raw := ev[i:next]
		i = next
		if _, ok := dataValue(line); !ok {
			dst = append(dst, raw...)
			continue
		}
		if !done {
			dst = appendData(dst, data, len(line) > 5 && line[5] == ' ', raw[len(line):])
			done = true
		}
	}
	return dst
}

// appendData writes data as data lines: "data:", a space if the original line had one (or if
// the piece starts with a space, which a reader would take for the optional one), the piece,
// and the terminator term (\n between pieces if term does not end a line: the event's
// unterminated last line).
func appendData(dst, data []byte, space bool, term []byte) []byte {
	for {
		piece, rest, more := bytes.Cut(data, []byte{'\n'})
		dst = append(dst, "data:"...)
		if space || len(piece) > 0 && piece[0] == ' ' {
			dst = append(dst, ' ')
		}
		dst = append(dst, piece...)
		if !more {
			return append(dst, term...)
		}
		if bytes.HasSuffix(term, []byte{'\n'}) {
			dst = append(dst, term...)
		} else {
			dst = append(dst, '\n')
		}
		data = rest
	}
}
