package usage

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
	open := skipSpace(body, 0)
	top, ok := findMember(body, open, "stream_options")
	if !ok || skipSpace(body, top.close) != len(body) {
		return body, true
	}
	switch {
	case top.val < 0:
		return insertMember(body, open, top.lastEnd, `"stream_options":{"include_usage":true}`), false
	case body[top.val] != '{':
		return splice(body, top.val, top.end, `{"include_usage":true}`), false
	}
	opts, _ := findMember(body, top.val, "include_usage") // valid: the walk above checked it
	switch {
	case opts.val < 0:
		return insertMember(body, top.val, opts.lastEnd, `"include_usage":true`), false
	case string(body[opts.val:opts.end]) == "true":
		return body, true
	}
	return splice(body, opts.val, opts.end, "true"), false
}

// objInfo is what findMember learns of an object.
type objInfo struct {
	val, end int // the value of the last member of the name looked for, b[val:end]; val < 0: none
	lastEnd  int // where the object's last member ends; -1 when it has none
	close    int // the index after the object's closing brace
}

// findMember walks the object whose brace is b[i], looking for its last member named name.
// ok is false if b[i] does not start a valid object.
func findMember(b []byte, i int, name string) (o objInfo, ok bool) {
	o = objInfo{val: -1, lastEnd: -1}
	w := walk(b, i, 0)
	var m member
	for w.next(&m) {
		if keyIs(m.key, name) {
			o.val, o.end = m.val, m.end
		}
		o.lastEnd = m.end
	}
	o.close = w.end()
	return o, o.close >= 0
}

// insertMember adds the member text to the object whose brace is b[open], after its last
// member, which ends at after (-1: it has none, the member goes right after the brace).
func insertMember(b []byte, open, after int, text string) []byte {
	if after < 0 {
		return splice(b, open+1, open+1, "", text)
	}
	return splice(b, after, after, ",", text)
}

// splice returns a copy of b with b[i:j] replaced by the texts.
func splice(b []byte, i, j int, texts ...string) []byte {
	n := len(b) - (j - i)
	for _, s := range texts {
		n += len(s)
	}
	out := make([]byte, 0, n)
	out = append(out, b[:i]...)
	for _, s := range texts {
		out = append(out, s...)
	}
	return append(out, b[j:]...)
}
