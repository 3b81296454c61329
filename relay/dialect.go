package relay

import (
	"encoding/json"
	"net/http"
	"strconv"

	"modelrelay/relay/endpoint"
)

// Dialect is the API family of a route: errors the relay writes itself speak it.
type Dialect = endpoint.Dialect

const (
	OpenAI    = endpoint.OpenAI
	Anthropic = endpoint.Anthropic
	Responses = endpoint.Responses
)

type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// responsesError is the Responses API's error object: OpenAI's, with param always present.
type responsesError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
		Param   *string `json:"param"`
	} `json:"error"`
}

type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// errorBody renders a relay error in the dialect. A Responses client's 429 says when to try
// again in its message, where Codex CLI reads it.
func errorBody(d Dialect, e *relayError) []byte {
	var v any
	switch d {
	case Responses:
		var r responsesError
		r.Error.Message = e.message
		if e.status == http.StatusTooManyRequests {
			r.Error.Message += ". Please try again in " + retryAfter(e) + "s."
		}
		r.Error.Type = d.ErrorType(e.status)
		if e.code != "" {
			r.Error.Code = &e.code
		}
		v = r
	case Anthropic:
		var a anthropicError
		a.Type = "error"
		a.Error.Type = d.ErrorType(e.status)
		a.Error.Message = e.message
		v = a
	default:
		var o openAIError
		o.Error.Message = e.message
		o.Error.Type = d.ErrorType(e.status)
		if e.code != "" {
			o.Error.Code = &e.code
		}
		v = o
	}
	b, _ := json.Marshal(v) // plain structs of strings cannot fail
	return b
}

// streamErrorEvent is the one SSE event that ends a stream the relay had to cut short: an
// upstream failure, typed as the family types a 502. (A Responses stream the relay translated
// ends in its own response.failed instead; this is for one a target sent as it is.)
func streamErrorEvent(d Dialect, message, code string) []byte {
	switch d {
	case Responses:
		b, _ := json.Marshal(struct {
			Type    string  `json:"type"`
			Code    string  `json:"code"`
			Message string  `json:"message"`
			Param   *string `json:"param"`
		}{"error", code, message, nil})
		return append(append([]byte("event: error\ndata: "), b...), '\n', '\n')
	case Anthropic:
		var a anthropicError
		a.Type = "error"
		a.Error.Type = d.ErrorType(http.StatusBadGateway)
		a.Error.Message = message
		b, _ := json.Marshal(a)
		return append(append([]byte("event: error\ndata: "), b...), '\n', '\n')
	}
	var o openAIError
	o.Error.Message = message
	o.Error.Type = d.ErrorType(http.StatusBadGateway)
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
	body := errorBody(d, e)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.status)
	w.Write(body)
}
