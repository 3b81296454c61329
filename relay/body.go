package relay

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// inferenceFields are the only parts of a body the relay reads; the body itself travels on
// byte for byte.
type inferenceFields struct {
	Model   string
	Stream  bool
	options *poolOptions // x_pool_options, when the body has it (even null)
}

// poolOptions are what a pool-aware client asks of the relay in x_pool_options (gateway.md
// sections 2 and 3). Unknown keys are ignored; the object never reaches a target.
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
// boolean stream, in valid UTF-8. It reads the body once to validate it (fastjson's strict
// validator, no allocations) and once to find the top-level members; only the few values it
// needs are decoded. Member names match as encoding/json matches struct fields:
// case-insensitively, the last occurrence winning. (FuzzParseInference checks the result
// against json.Unmarshal's on every input.)
func parseInference(body []byte) (inferenceFields, error) {
	if !utf8.Valid(body) {
		return inferenceFields{}, badRequest("request body is not valid UTF-8")
	}
	if fastjson.ValidateBytes(body) != nil {
		return inferenceFields{}, badRequest("request body is not valid JSON")
	}
	var model, stream, options []byte
	err := walkObject(body, func(key []byte, _, value, end int) {
		switch {
		case keyIs(key, "model"):
			model = body[value:end]
		case keyIs(key, "stream"):
			stream = body[value:end]
		case keyIs(key, "x_pool_options"):
			options = body[value:end]
		}
	})
	if err != nil {
		return inferenceFields{}, badRequest("request body must be a JSON object")
	}
	var f inferenceFields
	if f.Model = jsonString(model); f.Model == "" {
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
