package relay

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"
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
// boolean stream, in valid UTF-8.
func parseInference(body []byte) (inferenceFields, error) {
	if !utf8.Valid(body) {
		return inferenceFields{}, badRequest("request body is not valid UTF-8")
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] != '{' && json.Valid(trimmed) {
		return inferenceFields{}, badRequest("request body must be a JSON object")
	}
	var raw struct {
		Model   json.RawMessage `json:"model"`
		Stream  json.RawMessage `json:"stream"`
		Options json.RawMessage `json:"x_pool_options"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return inferenceFields{}, badRequest("request body is not valid JSON")
	}
	var f inferenceFields
	if len(raw.Model) == 0 || json.Unmarshal(raw.Model, &f.Model) != nil || f.Model == "" {
		return inferenceFields{}, badRequest("model is required")
	}
	if given(raw.Stream) {
		if json.Unmarshal(raw.Stream, &f.Stream) != nil {
			return inferenceFields{}, badRequest("stream must be a boolean")
		}
	}
	if len(raw.Options) > 0 {
		o, err := parsePoolOptions(raw.Options)
		if err != nil {
			return inferenceFields{}, err
		}
		f.options = o
	}
	return f, nil
}
