package usage

import "bytes"

// This file reads one server-sent event: its lines, and its data (the values of its data
// lines joined with \n, one space after the colon removed). Comments (":…") and other fields
// (event:, id:, retry:) are not data.

// nextLine returns the line at ev[i:] without its terminator (\n or \r\n; a last line may
// have none) and the index of the next line.
func nextLine(ev []byte, i int) (line []byte, next int) {
	j := bytes.IndexByte(ev[i:], '\n')
	if j < 0 {
		line, next = ev[i:], len(ev)
	} else {
		line, next = ev[i:i+j], i+j+1
	}
	return bytes.TrimSuffix(line, []byte{'\r'}), next
}

// dataValue returns the value of a data line, and whether line is one.
func dataValue(line []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("data"))
	if !ok {
		return nil, false
	}
	if len(rest) == 0 {
		return rest, true // "data" alone: an empty value
	}
	if rest[0] != ':' {
		return nil, false // another field, "datum:" say
	}
	return bytes.TrimPrefix(rest[1:], []byte{' '}), true
}

// eventData returns the data of ev. With one data line, the usual case, it is a subslice of
// ev; with several, it is joined in join (grown, at most to len(ev)). found is false when ev
// has no data line.
func eventData(ev []byte, join *[]byte) (data []byte, found bool) {
	n := 0
	for i := 0; i < len(ev); {
		line, next := nextLine(ev, i)
		i = next
		v, ok := dataValue(line)
		if !ok {
			continue
		}
		switch n {
		case 0:
			data = v
		case 1:
			*join = grow((*join)[:0], len(ev), maxEvent)
			*join = append(append(append(*join, data...), '\n'), v...)
			data = *join
		default:
			*join = append(append(*join, '\n'), v...)
			data = *join
		}
		n++
	}
	return data, n > 0
}
