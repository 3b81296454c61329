package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// readBody reads at most limit bytes; a larger body is a 413.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	body, err := readAll(http.MaxBytesReader(nil, r.Body, limit), r.ContentLength)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, tooLarge(limit)
	}
	if err != nil {
		return nil, errClientGone
	}
	return body, nil
}

func tooLarge(limit int64) *relayError {
	return &relayError{status: http.StatusRequestEntityTooLarge, message: fmt.Sprintf("request body exceeds %d bytes", limit)}
}

// readAll is io.ReadAll that starts from the announced length, so a body arrives in one
// allocation instead of a doubling series.
func readAll(r io.Reader, announced int64) ([]byte, error) {
	if announced <= 0 || announced > 1<<20 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, announced+1) // +1: EOF is seen without growing
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow: the client sent more than it announced
		}
	}
}
