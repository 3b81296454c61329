package usage

import "modelrelay/relay/rawjson"

// AskForUsage makes an OpenAI streaming request body (chat/completions or completions) ask for
// the final usage chunk: it sets stream_options.include_usage to true, keeping every other
// member and every other stream_options member (e.g. continuous_usage_stats) as sent. asked
// reports whether the client had asked for it already (then out is body itself, unchanged). A
// body that is not a JSON object is returned unchanged with asked=true (so nothing is
// stripped later). Minimal edits: the bytes outside the changed member stay byte-identical.
//
// Where a member is sent twice, the last one is what a server reads, so the last one is
// edited. A stream_options that is not an object (null, say) is replaced by
// {"include_usage":true}.
func AskForUsage(body []byte) (out []byte, asked bool) {
	top, ok := readTop(body)
	if !ok {
		return body, true
	}
	var e rawjson.Edits
	if Ask(&e, body, top) {
		return body, true
	}
	return e.Apply(body), false
}

// Top is what Ask needs of a body's top level, as the one read of the body found it.
type Top struct {
	Open    int            // the opening brace
	LastEnd int            // where the last member ends; -1: there is none
	Options rawjson.Member // the (last) stream_options member; a nil Key: none
}

// NewTop starts a Top for the object whose opening brace is at open; Add its members.
func NewTop(open int) Top { return Top{Open: open, LastEnd: -1} }

// Add notes the object's next member m, read in order.
func (t *Top) Add(m *rawjson.Member) {
	if isStreamOptions(m.Key) {
		t.Options = *m
	}
	t.LastEnd = m.End
}

// readTop reads the top level of body, checking it; ok is false when body is not one JSON
// object.
func readTop(body []byte) (top Top, ok bool) {
	top = NewTop(rawjson.SkipSpace(body, 0))
	o := rawjson.ObjectAt(body, top.Open, rawjson.Unchecked)
	var m rawjson.Member
	for o.Next(&m) {
		top.Add(&m)
	}
	end := o.End()
	return top, end >= 0 && rawjson.SkipSpace(body, end) == len(body)
}

// isStreamOptions reports whether a member name, as written, is stream_options: as a decoder
// reads it, escapes decoded ("stream\u005foptions" is stream_options to a model server).
func isStreamOptions(key []byte) bool { return rawjson.KeyIs(key, "stream_options") }

// Ask adds to e the edits that make body, a checked JSON object whose top level is top, ask
// for usage, or reports that it asks already (asked; then it adds none).
func Ask(e *rawjson.Edits, body []byte, top Top) (asked bool) {
	opts := &top.Options
	switch {
	case opts.Key == nil && top.LastEnd < 0:
		e.Replace(top.Open+1, top.Open+1, `"stream_options":{"include_usage":true}`)
		return false
	case opts.Key == nil:
		e.Replace(top.LastEnd, top.LastEnd, `,"stream_options":{"include_usage":true}`)
		return false
	case body[opts.Value] != '{':
		e.Replace(opts.Value, opts.End, `{"include_usage":true}`)
		return false
	}
	o := rawjson.ObjectAt(body, opts.Value, rawjson.Checked)
	var m rawjson.Member
	include, last := -1, -1 // the last include_usage's value, and the last member's end
	includeEnd := 0
	for o.Next(&m) {
		if rawjson.KeyIs(m.Key, "include_usage") {
			include, includeEnd = m.Value, m.End
		}
		last = m.End
	}
	switch {
	case include >= 0 && string(body[include:includeEnd]) == "true":
		return true
	case include >= 0:
		e.Replace(include, includeEnd, "true")
	case last >= 0:
		e.Replace(last, last, `,"include_usage":true`)
	default:
		e.Replace(opts.Value+1, opts.Value+1, `"include_usage":true`)
	}
	return false
}
