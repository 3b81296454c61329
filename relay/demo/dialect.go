package demo

import "net/http"

// dialect is an API family: it decides the shape of errors.
type dialect int

const (
	openAI dialect = iota
	anthropic
)

// fail answers e in d's error shape.
func (d dialect) fail(w http.ResponseWriter, e *apiError) {
	if d == anthropic {
		kind := "invalid_request_error"
		switch e.status {
		case http.StatusNotFound:
			kind = "not_found_error"
		case http.StatusRequestEntityTooLarge:
			kind = "request_too_large"
		}
		writeJSON(w, e.status, map[string]any{"type": "error",
			"error": map[string]string{"type": kind, "message": e.msg}})
		return
	}
	var code any // null unless set, as OpenAI writes it
	if e.code != "" {
		code = e.code
	}
	writeJSON(w, e.status, map[string]any{"error": map[string]any{"message": e.msg,
		"type": "invalid_request_error", "param": nil, "code": code}})
}
