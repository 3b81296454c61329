package relay

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Dialect is the API family of a route: errors the relay writes itself speak it.
type Dialect uint8

const (
	OpenAI Dialect = iota
	Anthropic
)

func openAIErrorType(status int) string {
	switch status {
	case 400, 404, 405, 413:
		return "invalid_request_error"
	case 403:
		return "permission_error"
	case 429:
		return "rate_limit_error"
	case 502:
		return "upstream_error"
	case 504:
		return "timeout_error"
	}
	return "server_error"
}

func anthropicErrorType(status int) string {
	switch status {
	case 400, 405, 413:
		return "invalid_request_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 429:
		return "rate_limit_error"
	case 503:
		return "overloaded_error"
	}
	return "api_error"
}

type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
	} `json:"error"`
}

type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// errorBody renders a relay error in the dialect.
func (d Dialect) errorBody(e *relayError) []byte {
	var v any
	if d == Anthropic {
		var a anthropicError
		a.Type = "error"
		a.Error.Type = anthropicErrorType(e.status)
		a.Error.Message = e.message
		v = a
	} else {
		var o openAIError
		o.Error.Message = e.message
		o.Error.Type = openAIErrorType(e.status)
		if e.code != "" {
			o.Error.Code = &e.code
		}
		v = o
	}
	b, _ := json.Marshal(v) // plain structs of strings cannot fail
	return b
}

// streamErrorEvent is the one SSE event that ends a stream the relay had to cut short.
func (d Dialect) streamErrorEvent(message, code string) []byte {
	if d == Anthropic {
		var a anthropicError
		a.Type = "error"
		a.Error.Type = "api_error"
		a.Error.Message = message
		b, _ := json.Marshal(a)
		return append(append([]byte("event: error\ndata: "), b...), '\n', '\n')
	}
	var o openAIError
	o.Error.Message = message
	o.Error.Type = "upstream_error"
	o.Error.Code = &code
	b, _ := json.Marshal(o)
	return append(append([]byte("data: "), b...), '\n', '\n')
}

// writeError answers with a relay error; Retry-After tells clients when to back off.
func writeError(w http.ResponseWriter, d Dialect, e *relayError) {
	noteReason(w, e.message)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable {
		h.Set("Retry-After", retryAfter(e))
	}
	body := d.errorBody(e)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.status)
	w.Write(body)
}
