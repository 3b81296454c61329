package usage

// This file reads usage objects where the answers put them.

// readUsage reads the usage object at b[i] into t. A value that is not an object (null
// included), or an object that is malformed or cut off, is not a report: t is left as it was.
func (t *tally) readUsage(b []byte, i, depth int) {
	w := walk(b, i, depth+1)
	var u tally
	var m member
	for w.next(&m) {
		if f := field(m.key); f >= 0 {
			if n, ok := parseCount(b[m.val:m.end]); ok {
				u.set(f, n)
			}
		}
	}
	if w.end() < 0 {
		return
	}
	u.seen = true
	t.merge(&u)
}

// readNested reads the usage member of the object at b[i] (Anthropic's message_start
// message, the Responses API's response), if it is one.
func (t *tally) readNested(b []byte, i, depth int) {
	w := walk(b, i, depth+1)
	var m member
	for w.next(&m) {
		if isUsage(m.key) {
			t.readUsage(b, m.val, depth+1)
		}
	}
}

// eventInfo is what one stream event's JSON says.
type eventInfo struct {
	rep     tally // its usage objects
	usage   bool  // it has a top-level usage member that is not null
	choices uint8 // its top-level choices member: noChoices, emptyChoices or someChoices
}

const (
	noChoices    uint8 = iota // none, or not an array: not an OpenAI chunk
	emptyChoices              // "choices": [], OpenAI's usage chunk
	someChoices               // a chunk with choices
)

// readEvent reads an event's data: usage objects at top level (OpenAI chunks, Anthropic's
// message_delta), in message (message_start) and in response (the Responses API's
// response.completed, .incomplete and .failed). ok is false when the data is not a JSON
// object: then nothing it holds counts.
func readEvent(data []byte) (info eventInfo, ok bool) {
	w := walk(data, skipSpace(data, 0), 0)
	var m member
	for w.next(&m) {
		switch {
		case isUsage(m.key):
			info.usage = info.usage || data[m.val] != 'n' // a valid value starting with n is null
			info.rep.readUsage(data, m.val, 0)
		case keyIs(m.key, "message"), keyIs(m.key, "response"):
			info.rep.readNested(data, m.val, 0)
		case keyIs(m.key, "choices"):
			info.choices = choicesKind(data, m.val, m.end)
		}
	}
	end := w.end()
	return info, end >= 0 && skipSpace(data, end) == len(data)
}

// choicesKind classifies the valid value b[i:end] of a choices member.
func choicesKind(b []byte, i, end int) uint8 {
	switch {
	case b[i] != '[':
		return noChoices
	case skipSpace(b, i+1) == end-1:
		return emptyChoices
	}
	return someChoices
}
