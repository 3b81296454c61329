package daemon

import (
	"encoding/json"
	"fmt"

	"modelrelay/protocol"
	"modelrelay/relay/endpoint"
)

// failure is an answer the daemon makes up itself instead of relaying the backend's.
type failure struct {
	status  uint16
	code    string // machine-readable OpenAI "code"
	message string
}

var (
	failBusy     = failure{503, "worker_busy", "worker is at its concurrency limit"}
	failDraining = failure{503, "worker_draining", "worker is shutting down"}
	failPath     = failure{400, "invalid_endpoint_path", "invalid endpoint path"}
)

func backendFailure(message string) failure {
	return failure{502, "backend_unavailable", message}
}

// tooLargeForFrame is the answer to a non-streamed backend response that does not fit in one
// frame of limit bytes (the server's max_frame_bytes must be at least the daemon's).
func tooLargeForFrame(limit int64) failure {
	return backendFailure(fmt.Sprintf("backend response exceeds the %d-byte frame limit (stream it, or raise max_frame_bytes on both sides)", limit))
}

// cancelledStatus is the answer to a cancelled request (nginx's "client closed request"); the
// server only needs some response_complete to free the slot.
const cancelledStatus = 499

// complete renders f as the response_complete for one request, in the error dialect of the
// endpoint so a client library can parse it.
func (f failure) complete(requestID, endpointPath string) protocol.ResponseComplete {
	headers := protocol.Headers{"content-type": "application/json"}
	if f.status == 503 {
		headers["retry-after"] = "1"
	}
	body := string(f.body(endpointPath))
	return protocol.ResponseComplete{RequestID: requestID, StatusCode: f.status,
		Headers: headers, Body: &body}
}

func (f failure) body(endpointPath string) []byte {
	var v any
	d := endpoint.DialectOf(endpointPath)
	if d == endpoint.Anthropic {
		v = map[string]any{"type": "error", "error": map[string]string{
			"type": d.ErrorType(int(f.status)), "message": f.message}}
	} else {
		v = map[string]any{"error": map[string]string{
			"message": f.message, "type": d.ErrorType(int(f.status)), "code": f.code}}
	}
	b, _ := json.Marshal(v) // maps of strings always encode
	return b
}
