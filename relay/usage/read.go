package usage

import "modelrelay/relay/rawjson"

// This file reads usage objects where the answers put them. An answer is a target's text: it
// is checked as it is read (rawjson's Unchecked readers), and what is not JSON reports nothing.

// readUsage reads the usage object at b[i] into t. A value that is not an object (null
// included), or an object that is malformed or cut off, is not a report: t is left as it was.
func (t *tally) readUsage(b []byte, i int) {
	o := rawjson.ObjectAt(b, i, rawjson.Unchecked)
	var u tally
	var m rawjson.Member
	for o.Next(&m) {
		if f := field(m.Key); f >= 0 {
			if n, ok := parseCount(b[m.Value:m.End]); ok {
				u.set(f, n)
			}
		}
	}
	if o.End() < 0 {
		return
	}
	u.seen = true
	t.merge(&u)
}

// readNested reads the usage member of the object at b[i] (Anthropic's message_start
// message, the Responses API's response), if it is one.
func (t *tally) readNested(b []byte, i int) {
	o := rawjson.ObjectAt(b, i, rawjson.Unchecked)
	var m rawjson.Member
	for o.Next(&m) {
		if isUsage(m.Key) {
			t.readUsage(b, m.Value)
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
	o := rawjson.ObjectAt(data, rawjson.SkipSpace(data, 0), rawjson.Unchecked)
	var m rawjson.Member
	for o.Next(&m) {
		switch {
		case isUsage(m.Key):
			info.usage = info.usage || data[m.Value] != 'n' // a valid value starting with n is null
			info.rep.readUsage(data, m.Value)
		case rawjson.KeyIs(m.Key, "message"), rawjson.KeyIs(m.Key, "response"):
			info.rep.readNested(data, m.Value)
		case rawjson.KeyIs(m.Key, "choices"):
			info.choices = choicesKind(data, m.Value, m.End)
		}
	}
	end := o.End()
	return info, end >= 0 && rawjson.SkipSpace(data, end) == len(data)
}

// choicesKind classifies the valid value b[i:end] of a choices member.
func choicesKind(b []byte, i, end int) uint8 {
	switch {
	case b[i] != '[':
		return noChoices
	case rawjson.SkipSpace(b, i+1) == end-1:
		return emptyChoices
	}
	return someChoices
}
