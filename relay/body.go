package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"modelrelay/relay/rawjson"
)

// inferenceFields are the only parts of a body the relay reads; the body itself travels on
// byte for byte.
type inferenceFields struct {
	Model   string
	Stream  bool
	options *poolOptions // x_pool_options, when the body has it (even null)
}

// poolOptions are what a pool-aware client asks of the relay in x_pool_options: its own
// fallback chain, and what scheduling should do for it. Unknown keys are ignored; the object
// never reaches a target.
type poolOptions struct {
	fallbacks  []string      // replaces the configured chain (nil = keep it)
	maxLatency time.Duration // refuse rather than queue longer (0 = any wait)
	priority   string        // high, normal or low ("" = not said)
	preferGPU  string        // a target id or name that gets the request whenever it has room
}

// given says whether an optional JSON member was sent with a value (null counts as not sent).
func given(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// parsePoolOptions reads x_pool_options; a wrong type of a known key is the client's error.
func parsePoolOptions(raw json.RawMessage) (*poolOptions, error) {
	var v struct {
		FallbackModels json.RawMessage `json:"fallback_models"`
		MaxLatencyMS   json.RawMessage `json:"max_latency_ms"`
		Priority       json.RawMessage `json:"priority"`
		PreferGPU      json.RawMessage `json:"prefer_gpu"`
	}
	if string(raw) != "null" && json.Unmarshal(raw, &v) != nil {
		return nil, badRequest("x_pool_options must be an object")
	}
	o := &poolOptions{}
	if given(v.FallbackModels) {
		if json.Unmarshal(v.FallbackModels, &o.fallbacks) != nil || slices.Contains(o.fallbacks, "") {
			return nil, badRequest("x_pool_options.fallback_models must be a list of model names")
		}
		if o.fallbacks == nil {
			o.fallbacks = []string{} // an empty list: no fallback for this request
		}
	}
	if given(v.MaxLatencyMS) {
		var ms float64
		if json.Unmarshal(v.MaxLatencyMS, &ms) != nil || ms <= 0 || ms > 1e9 {
			return nil, badRequest("x_pool_options.max_latency_ms must be a positive number of milliseconds")
		}
		o.maxLatency = time.Duration(ms * float64(time.Millisecond))
	}
	if given(v.Priority) {
		err := json.Unmarshal(v.Priority, &o.priority)
		if _, ok := parsePriority(o.priority); err != nil || !ok {
			return nil, badRequest("x_pool_options.priority must be high, normal or low")
		}
	}
	if given(v.PreferGPU) && json.Unmarshal(v.PreferGPU, &o.preferGPU) != nil {
		return nil, badRequest("x_pool_options.prefer_gpu must be a target id or name")
	}
	return o, nil
}

func badRequest(msg string) *relayError {
	return &relayError{status: http.StatusBadRequest, message: msg}
}

// parseInference validates a client body: a JSON object with a string model and an optional
// boolean stream, in valid UTF-8, each top-level member named once. It reads the body once to
// validate it (fastjson's strict validator, no allocations) and once to find the top-level
// members; only the few values it needs are decoded. Member names match as encoding/json
// matches struct fields: case-insensitively. (FuzzParseInference checks the result against
// json.Unmarshal's on every input.)
//
// A member named twice is refused, not resolved: parsers disagree on which one counts
// (encoding/json and Python's json take the last, others the first), so the model the relay
// checks against a key's allowed models could differ from the model a target serves. The rule
// is the top level only: model, stream and x_pool_options are what the relay reads and checks,
// and whatever a target does with a duplicate deeper down (in a message) is between the client
// and the target. The relay's own members also count as named twice in two spellings
// ("model" and "Model"), since the relay reads them case-insensitively and a target may not.
func parseInference(body []byte) (inferenceFields, error) {
	if !utf8.Valid(body) {
		return inferenceFields{}, badRequest("request body is not valid UTF-8")
	}
	if fastjson.ValidateBytes(body) != nil {
		return inferenceFields{}, badRequest("request body is not valid JSON")
	}
	var model, stream, options []byte
	var names memberNames
	var refused error
	err := walkObject(body, func(key []byte, start, value, end int) {
		if refused != nil {
			return
		}
		if names.n == maxTopMembers {
			refused = errTooManyMembers
			return
		}
		var seen []byte
		var field string
		switch {
		case keyIs(key, "model"):
			field, seen, model = "model", model, body[value:end]
		case keyIs(key, "stream"):
			field, seen, stream = "stream", stream, body[value:end]
		case keyIs(key, "x_pool_options"):
			field, seen, options = "x_pool_options", options, body[value:end]
		}
		if seen != nil {
			refused = duplicateMember(field)
			return
		}
		refused = names.add(body, start, start+len(key))
	})
	if err != nil {
		return inferenceFields{}, badRequest("request body must be a JSON object")
	}
	if refused != nil {
		return inferenceFields{}, refused
	}
	var f inferenceFields
	if f.Model = jsonString(model); f.Model == "" {
		if len(model) > 0 && model[0] != '"' && string(model) != "null" {
			return inferenceFields{}, badRequest("model must be a string")
		}
		return inferenceFields{}, badRequest("model is required")
	}
	switch string(stream) {
	case "", "null", "false":
	case "true":
		f.Stream = true
	default:
		return inferenceFields{}, badRequest("stream must be a boolean")
	}
	if len(options) > 0 {
		o, err := parsePoolOptions(options)
		if err != nil {
			return inferenceFields{}, err
		}
		f.options = o
	}
	return f, nil
}

// maxTopMembers bounds the top-level members of an inference body. A request of any of the
// APIs has a few dozen parameters at most; the bound keeps the check for a name given twice
// (each against those before it) cheap and its memory on the stack.
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
	n  int
	at [maxTopMembers]struct {
		hash  uint64
		start int // the name's opening quote
	}
}

// add records the quoted name body[start:end], or says it was given before.
func (m *memberNames) add(body []byte, start, end int) error {
	quoted := body[start:end]
	var h uint64
	if bytes.IndexByte(quoted, '\\') < 0 {
		h = maphash.Bytes(nameSeed, quoted[1:len(quoted)-1])
	} else {
		name, _ := unquoteKey(quoted)
		h = maphash.String(nameSeed, name)
	}
	for _, seen := range m.at[:m.n] {
		if seen.hash != h {
			continue
		}
		if end, ok := rawjson.SkipString(body, seen.start); ok && sameName(body[seen.start:end], quoted) {
			name, _ := unquoteKey(quoted)
			return duplicateMember(name)
		}
	}
	m.at[m.n].hash, m.at[m.n].start = h, start
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
	ka, errA := unquoteKey(a)
	kb, errB := unquoteKey(b)
	return errA == nil && errB == nil && ka == kb
}

// jsonString decodes a valid JSON value that should be a string; "" for anything else. A
// string without escapes (every model name in practice) is one copy.
func jsonString(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}
