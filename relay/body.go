package relay

import (
	"bytes"
	"encoding/json"
	"net/http"
	"unicode/utf8"
)

// inferenceFields are the only parts of a body the relay reads; the body itself travels on
// byte for byte.
type inferenceFields struct {
	Model  string
	Stream bool
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
		Model  json.RawMessage `json:"model"`
		Stream json.RawMessage `json:"stream"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return inferenceFields{}, badRequest("request body is not valid JSON")
	}
	var f inferenceFields
	if len(raw.Model) == 0 || json.Unmarshal(raw.Model, &f.Model) != nil || f.Model == "" {
		return inferenceFields{}, badRequest("model is required")
	}
	if len(raw.Stream) > 0 && string(raw.Stream) != "null" {
		if json.Unmarshal(raw.Stream, &f.Stream) != nil {
			return inferenceFields{}, badRequest("stream must be a boolean")
		}
	}
	return f, nil
}
