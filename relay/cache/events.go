package cache

import (
	"bytes"
	"iter"

	"modelrelay/relay/rawjson"
)

// A stream is stored only when it reached its terminal event: one cut short (a broken
// target, a relay that ended it with an error event) must not replay as if complete.

// Complete reports whether an event stream's last event is a terminal one: OpenAI's
// "data: [DONE]", Anthropic's message_stop, the Responses API's response.completed (named by
// the event's "event:" line, or by its data's "type" when it has none).
func Complete(stream []byte) bool {
	var last []byte
	for ev := range Events(stream) {
		if len(bytes.TrimSpace(ev)) > 0 {
			last = ev
		}
	}
	var name, data []byte
	lines := 0
	for line := range bytes.Lines(last) {
		line = bytes.TrimRight(line, "\r\n")
		field, value, _ := bytes.Cut(line, []byte{':'})
		value = bytes.TrimPrefix(value, []byte{' '})
		switch string(field) {
		case "event":
			name = value
		case "data":
			if lines++; lines > 1 {
				data = append(data, '\n') // data lines join with a line feed
			}
			data = append(data, value...)
		}
	}
	if len(name) == 0 {
		if string(data) == "[DONE]" {
			return true
		}
		name = typeOf(data)
	}
	return terminal(string(name))
}

// terminal reports whether an event of this name ends a stream.
func terminal(name string) bool {
	return name == "message_stop" || name == "response.completed"
}

// typeOf is the string "type" member of a JSON object, nil when there is none.
func typeOf(data []byte) []byte {
	start := rawjson.SkipSpace(data, 0)
	if start >= len(data) || data[start] != '{' || !rawjson.Valid(data) {
		return nil
	}
	o := rawjson.ObjectAt(data, start, rawjson.Checked)
	var m rawjson.Member
	for o.Next(&m) {
		if rawjson.KeyIs(m.Key, "type") && data[m.Value] == '"' {
			return []byte(rawjson.String(data[m.Value:m.End]))
		}
	}
	return nil
}

// Events yields the events of a stream, each with the blank line that ends it (a last one
// may have none): a replay flushes each as the target's client received it.
func Events(stream []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for len(stream) > 0 {
			n := eventLen(stream)
			if !yield(stream[:n]) {
				return
			}
			stream = stream[n:]
		}
	}
}

// eventLen is the length of the event b starts with, through its blank line: a line
// terminator (\n or \r\n) right after another.
func eventLen(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return len(b)
		}
		i += j + 1
		switch {
		case i < len(b) && b[i] == '\n':
			return i + 1
		case i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n':
			return i + 2
		}
	}
}
