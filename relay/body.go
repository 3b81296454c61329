package relay

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"net/http"
	"unicode/utf8"

	"modelrelay/relay/prefix"
	"modelrelay/relay/rawjson"
	"modelrelay/relay/usage"
)

// bodyView is the one read of a client's inference body (parseInference): what the relay
// decides by, and where the members that later stages read or change lie, as offsets into
// the body. No later stage walks the body's top level again: placement reads its prompt
// members where they are, and the edits a target's copy needs are made in one pass (rewrite).
type bodyView struct {
	Model   string
	Stream  bool
	options *poolOptions // x_pool_options, when the body has it (even null)

	model  span       // the model member, name and value (one, in whatever spelling)
	cut    span       // x_pool_options and one separator beside it: what taking it out removes
	usage  usage.Top  // stream_options, and where a new member goes
	prompt prefix.Top // the members placement reads
	// The values of the sampling members the response cache reads (the zero span: absent).
	temperature, seed span
	// previous is previous_response_id's value, which the Responses API's history stage reads
	// (the zero span: absent).
	previous span
}

// span is the bytes b[from:to] of a body.
type span struct{ from, to int }

// parseInference validates a client body: a JSON object with a string model and an optional
// boolean stream, in valid UTF-8, each top-level member named once. Its one walk of the top
// level checks every value it steps over (rawjson's Unchecked reader: encoding/json's
// grammar), so the body is validated as it is read, and notes where the members later stages
// need lie; only the few values the relay reads are decoded. Member names match as
// encoding/json matches struct fields: case-insensitively. (FuzzParseInference checks the
// result against json.Unmarshal's on every input.)
//
// A member named twice is refused, not resolved: parsers disagree on which one counts
// (encoding/json and Python's json take the last, others the first), so the model the relay
// checks against a key's allowed models could differ from the model a target serves. The rule
// is the top level only: model, stream and x_pool_options are what the relay reads and checks,
// and whatever a target does with a duplicate deeper down (in a message) is between the client
// and the target. The relay's own members also count as named twice in two spellings
// ("model" and "Model"), since the relay reads them case-insensitively and a target may not.
func parseInference(body []byte) (bodyView, error) {
	var v bodyView
	err := v.parse(body)
	return v, err
}

// parse is parseInference filling v in place (the zero view on error): the serving path's
// view lives in one frame and is not copied between three, which keeps the deepest call of a
// request (this parse) within the 8 KiB its goroutine starts with.
func (v *bodyView) parse(body []byte) error {
	err := v.read(body)
	if err != nil {
		*v = bodyView{}
	}
	return err
}

func (v *bodyView) read(body []byte) error {
	if !utf8.Valid(body) {
		return badRequest("request body is not valid UTF-8")
	}
	open := rawjson.SkipSpace(body, 0)
	if open >= len(body) || body[open] != '{' {
		if rawjson.Valid(body) {
			return badRequest("request body must be a JSON object")
		}
		return badRequest("request body is not valid JSON")
	}
	own, err := readTop(body, open, v)
	if err != nil {
		return err
	}
	if v.Model = rawjson.String(own.model); v.Model == "" {
		if len(own.model) > 0 && own.model[0] != '"' && string(own.model) != "null" {
			return badRequest("model must be a string")
		}
		return badRequest("model is required")
	}
	switch string(own.stream) {
	case "", "null", "false":
	case "true":
		v.Stream = true
	default:
		return badRequest("stream must be a boolean")
	}
	if len(own.options) > 0 {
		o, err := parsePoolOptions(own.options)
		if err != nil {
			return err
		}
		v.options = o
	}
	return nil
}

// ownMembers are the values of the relay's own members, as sent (nil: not sent).
type ownMembers struct{ model, stream, options []byte }

// readTop walks the top level of the object whose brace is body[open], checking every value,
// and notes where the members later stages need lie. A body that is not JSON is refused as
// such before a member named twice or one too many.
func readTop(body []byte, open int, v *bodyView) (ownMembers, error) {
	*v = bodyView{usage: usage.NewTop(open)}
	var own ownMembers
	var names memberNames
	var refused error
	prevEnd, cutToNext := -1, false
	o := rawjson.ObjectAt(body, open, rawjson.Unchecked)
	var m rawjson.Member
	for o.Next(&m) {
		if refused != nil {
			continue // read on: a body that is not JSON says so first
		}
		if names.n == maxTopMembers {
			refused = errTooManyMembers
			continue
		}
		if cutToNext {
			v.cut.to, cutToNext = m.Start, false
		}
		var seen []byte
		var field string
		switch {
		case rawjson.FieldIs(m.Key, "model"):
			field, seen, own.model = "model", own.model, body[m.Value:m.End]
			v.model = span{m.Start, m.End}
		case rawjson.FieldIs(m.Key, "stream"):
			field, seen, own.stream = "stream", own.stream, body[m.Value:m.End]
		case rawjson.FieldIs(m.Key, "temperature"):
			v.temperature = span{m.Value, m.End}
		case rawjson.FieldIs(m.Key, "seed"):
			v.seed = span{m.Value, m.End}
		case rawjson.FieldIs(m.Key, "previous_response_id"):
			v.previous = span{m.Value, m.End}
		case rawjson.FieldIs(m.Key, "x_pool_options"):
			field, seen, own.options = "x_pool_options", own.options, body[m.Value:m.End]
			// The separator before it goes too; the first member takes the one after it.
			if prevEnd >= 0 {
				v.cut = span{prevEnd, m.End}
			} else {
				v.cut, cutToNext = span{m.Start, m.End}, true
			}
		}
		if seen != nil {
			refused = duplicateMember(field)
			continue
		}
		if refused = names.add(body, m.Start, m.Start+len(m.Key)); refused != nil {
			continue
		}
		v.usage.Add(&m)
		v.prompt.Add(&m)
		prevEnd = m.End
	}
	if end := o.End(); end < 0 || rawjson.SkipSpace(body, end) != len(body) {
		return ownMembers{}, badRequest("request body is not valid JSON")
	}
	if refused != nil {
		return ownMembers{}, refused
	}
	return own, nil
}

func badRequest(msg string) *relayError {
	return &relayError{status: http.StatusBadRequest, message: msg}
}

// maxTopMembers bounds the top-level members of an inference body. A request of any of the
// APIs has a few dozen parameters at most; the bound keeps the check for a name given twice
// (each against those before it) cheap.
const maxTopMembers = 256

var errTooManyMembers = badRequest(fmt.Sprintf("request body has more than %d top-level members", maxTopMembers))

func duplicateMember(name string) error {
	return badRequest("duplicate key " + rawjson.Quote(name) + " in the request body")
}

// nameSeed keys the hashes of member names: random per process, so no client can make two
// names collide on purpose.
var nameSeed = maphash.MakeSeed()

// memberNames are the top-level member names of a body seen so far. Each is kept as a hash of
// the name as it reads (unescaped), and where it starts in the body: names compare by hash,
// and only equal hashes by their text, so a body of long names that differ in their last byte
// costs one read of each name, not one per pair.
type memberNames struct {
	n      int
	inline [32]nameAt // the first 32 names; a body of more puts the rest in a heap slice
	more   []nameAt
}

type nameAt struct {
	hash  uint64
	start int // the name's opening quote
}

// add records the quoted name body[start:end], or says it was given before.
func (m *memberNames) add(body []byte, start, end int) error {
	quoted := body[start:end]
	var h uint64
	if bytes.IndexByte(quoted, '\\') < 0 {
		h = maphash.Bytes(nameSeed, quoted[1:len(quoted)-1])
	} else {
		h = maphash.String(nameSeed, rawjson.String(quoted))
	}
	for _, seen := range [2][]nameAt{m.inline[:min(m.n, len(m.inline))], m.more} {
		for _, seen := range seen {
			if seen.hash != h {
				continue
			}
			if end := rawjson.StringEnd(body, seen.start); end > 0 && sameName(body[seen.start:end], quoted) {
				return duplicateMember(rawjson.String(quoted))
			}
		}
	}
	if m.n < len(m.inline) {
		m.inline[m.n] = nameAt{h, start}
	} else {
		m.more = append(m.more, nameAt{h, start})
	}
	m.n++
	return nil
}

// sameName says whether two quoted names read the same once unescaped.
func sameName(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if bytes.IndexByte(a, '\\') < 0 && bytes.IndexByte(b, '\\') < 0 {
		return false
	}
	return rawjson.String(a) == rawjson.String(b)
}
