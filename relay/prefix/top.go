package prefix

import "modelrelay/relay/rawjson"

// The top-level members placement reads. Names match as sent: one spelled with escapes is
// not one of them (see the package comment).
type field uint8

const (
	fieldNone     field = iota
	fieldSystem         // system (Anthropic), instructions (responses)
	fieldTools          // tools, functions (OpenAI's legacy list)
	fieldMessages       // messages, input (responses)
	fieldPrompt         // prompt (completions)
	fieldCacheKey       // prompt_cache_key
	fieldUser           // user
	fieldMetadata       // metadata (Anthropic's user_id)
)

// fieldOf is the member a top-level name (as sent, without its quotes) is to placement.
func fieldOf(name []byte) field {
	switch string(name) {
	case "system", "instructions":
		return fieldSystem
	case "tools", "functions":
		return fieldTools
	case "messages", "input":
		return fieldMessages
	case "prompt":
		return fieldPrompt
	case "prompt_cache_key":
		return fieldCacheKey
	case "user":
		return fieldUser
	case "metadata":
		return fieldMetadata
	}
	return fieldNone
}

// maxTop bounds the members a Top holds: each of the ten names once, as a body the relay
// accepts names each member once.
const maxTop = 10

// Top is the top level of a request body as far as placement reads it: where the members
// that hold its prompt and its session key lie, in the order they came. The first read of a
// body fills it (Add, one call per top-level member), so that ParseTop need not walk the top
// level again.
type Top struct {
	n       int
	over    bool // more members were wanted than a Top holds: ParseTop walks the body instead
	members [maxTop]struct {
		field      field
		value, end int
	}
}

// Reset empties t for another body.
func (t *Top) Reset() { t.n, t.over = 0, false }

// Add notes the top-level member m, if placement reads it.
func (t *Top) Add(m *rawjson.Member) {
	f := fieldOf(rawjson.Inner(m.Key))
	if f == fieldNone {
		return
	}
	if t.n == maxTop {
		t.over = true
		return
	}
	t.members[t.n].field, t.members[t.n].value, t.members[t.n].end = f, m.Value, m.End
	t.n++
}
