// Package protocol holds the bytes on the wire and nothing else: the ModelRelay WebSocket
// messages (this file), and the Backend.AI AppProxy circuit, route, worker and event types.
//
// The relay messages mirror the Rust modelrelay-protocol crate exactly, so Go and Rust peers
// interoperate: every frame is one JSON object tagged by "type" (written first), fields appear in
// the crate's declaration order, Option<T> fields are pointers (omitted when nil, written when set
// even to a zero value), and Vec/Map fields marked skip_serializing_if=is_empty use omitempty.
package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// DefaultMaxFrameBytes is the largest frame a relay server reads from a worker unless
// configured otherwise (max_frame_bytes). A response_complete carries a whole non-streamed
// answer, so the worker daemon must send nothing larger: both sides default to this.
const DefaultMaxFrameBytes = 64 << 20

// Version is the protocol version this implementation speaks.
const Version = "2026-04-bridge-v1"

// Headers carries HTTP headers in a frame: lowercase names, repeated values joined with ", ".
// encoding/json writes map keys sorted, as the Rust BTreeMap does.
type Headers map[string]string

// Message is any relay frame in either direction.
type Message interface {
	MessageType() string
}

// Server -> worker messages.

type RegisterAck struct {
	WorkerID        string   `json:"worker_id"`
	Models          []string `json:"models"`
	Warnings        []string `json:"warnings,omitempty"`
	ProtocolVersion *string  `json:"protocol_version,omitempty"`
}

type Request struct {
	RequestID    string  `json:"request_id"`
	Model        string  `json:"model"`
	EndpointPath string  `json:"endpoint_path"`
	IsStreaming  bool    `json:"is_streaming"`
	Body         string  `json:"body"`
	Headers      Headers `json:"headers,omitempty"`
}

type Cancel struct {
	RequestID string       `json:"request_id"`
	Reason    CancelReason `json:"reason"`
}

type Ping struct {
	TimestampUnixMs *uint64 `json:"timestamp_unix_ms,omitempty"`
}

type GracefulShutdown struct {
	Reason           *string `json:"reason,omitempty"`
	DrainTimeoutSecs *uint64 `json:"drain_timeout_secs,omitempty"`
}

type ModelsRefresh struct {
	Reason *string `json:"reason,omitempty"`
}

// Worker -> server messages.

type Register struct {
	WorkerName      string   `json:"worker_name"`
	Models          []string `json:"models"`
	MaxConcurrent   uint32   `json:"max_concurrent"`
	ProtocolVersion *string  `json:"protocol_version,omitempty"`
	CurrentLoad     *uint32  `json:"current_load,omitempty"`
}

type ModelsUpdate struct {
	Models      []string `json:"models"`
	CurrentLoad uint32   `json:"current_load"`
}

type ResponseChunk struct {
	RequestID string `json:"request_id"`
	Chunk     string `json:"chunk"`
}

type ResponseComplete struct {
	RequestID   string       `json:"request_id"`
	StatusCode  uint16       `json:"status_code"`
	Headers     Headers      `json:"headers,omitempty"`
	Body        *string      `json:"body,omitempty"`
	TokenCounts *TokenCounts `json:"token_counts,omitempty"`
}

type TokenCounts struct {
	PromptTokens     *uint32 `json:"prompt_tokens,omitempty"`
	CompletionTokens *uint32 `json:"completion_tokens,omitempty"`
	TotalTokens      *uint32 `json:"total_tokens,omitempty"`
}

type Pong struct {
	CurrentLoad     uint32  `json:"current_load"`
	TimestampUnixMs *uint64 `json:"timestamp_unix_ms,omitempty"`
}

type Error struct {
	RequestID *string `json:"request_id,omitempty"`
	Code      string  `json:"code"`
	Message   string  `json:"message"`
}

func (RegisterAck) MessageType() string      { return "register_ack" }
func (Request) MessageType() string          { return "request" }
func (Cancel) MessageType() string           { return "cancel" }
func (Ping) MessageType() string             { return "ping" }
func (GracefulShutdown) MessageType() string { return "graceful_shutdown" }
func (ModelsRefresh) MessageType() string    { return "models_refresh" }
func (Register) MessageType() string         { return "register" }
func (ModelsUpdate) MessageType() string     { return "models_update" }
func (ResponseChunk) MessageType() string    { return "response_chunk" }
func (ResponseComplete) MessageType() string { return "response_complete" }
func (Pong) MessageType() string             { return "pong" }
func (Error) MessageType() string            { return "error" }

// CancelReason is one of the six named reasons, or any other text (sent as {"other":"…"}).
type CancelReason string

const (
	CancelClientDisconnect CancelReason = "client_disconnect"
	CancelTimeout          CancelReason = "timeout"
	CancelGracefulShutdown CancelReason = "graceful_shutdown"
	CancelWorkerDisconnect CancelReason = "worker_disconnect"
	CancelRequeueExhausted CancelReason = "requeue_exhausted"
	CancelServerShutdown   CancelReason = "server_shutdown"
)

func (r CancelReason) named() bool {
	switch r {
	case CancelClientDisconnect, CancelTimeout, CancelGracefulShutdown, CancelWorkerDisconnect,
		CancelRequeueExhausted, CancelServerShutdown:
		return true
	}
	return false
}

func (r CancelReason) MarshalJSON() ([]byte, error) {
	if r.named() {
		return json.Marshal(string(r))
	}
	return json.Marshal(struct {
		Other string `json:"other"`
	}{string(r)})
}

func (r *CancelReason) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*r = CancelReason(s)
		return nil
	}
	var o struct {
		Other *string `json:"other"`
	}
	if err := json.Unmarshal(b, &o); err != nil || o.Other == nil {
		return errors.New(`cancel reason must be a string or {"other":"…"}`)
	}
	*r = CancelReason(*o.Other)
	return nil
}

// Marshal encodes m as one frame: {"type":"<type>", …fields}. The hot frames (request, cancel,
// response_chunk, response_complete) are written by hand (fastencode.go) to the very bytes the
// reflective encoder below writes; every other frame goes through encoding/json.
func Marshal(m Message) ([]byte, error) {
	if b, ok := marshalHot(m); ok {
		return b, nil
	}
	return marshalReflective(m)
}

// AppendMarshal appends the frame of m to b, so a writer can encode into a buffer it reuses.
func AppendMarshal(b []byte, m Message) ([]byte, error) {
	if out, ok := appendHot(b, m); ok {
		return out, nil
	}
	frame, err := marshalReflective(m)
	return append(b, frame...), err
}

// marshalReflective is the encoding/json encoder, the reference the hand-written one must equal.
func marshalReflective(m Message) ([]byte, error) {
	m = withEmptyLists(m)
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.MessageType(), err)
	}
	var b bytes.Buffer
	b.Grow(len(body) + len(m.MessageType()) + 12)
	b.WriteString(`{"type":"`)
	b.WriteString(m.MessageType())
	b.WriteByte('"')
	if len(body) > 2 { // body is "{…}"; "{}" has no fields to append
		b.WriteByte(',')
		b.Write(body[1:])
	} else {
		b.WriteByte('}')
	}
	return b.Bytes(), nil
}

// withEmptyLists turns nil required lists into empty ones: Rust rejects null for a Vec.
func withEmptyLists(m Message) Message {
	switch v := m.(type) {
	case RegisterAck:
		if v.Models == nil {
			v.Models = []string{}
		}
		return v
	case Register:
		if v.Models == nil {
			v.Models = []string{}
		}
		return v
	case ModelsUpdate:
		if v.Models == nil {
			v.Models = []string{}
		}
		return v
	}
	return m
}

// frame is the union of every field of every message, so a frame decodes in one pass.
type frame struct {
	Type string `json:"type"`

	// server -> worker
	WorkerID         string           `json:"worker_id"`
	Warnings         []string         `json:"warnings"`
	Model            string           `json:"model"`
	EndpointPath     string           `json:"endpoint_path"`
	IsStreaming      bool             `json:"is_streaming"`
	Reason           *json.RawMessage `json:"reason"`
	DrainTimeoutSecs *uint64          `json:"drain_timeout_secs"`

	// worker -> server
	WorkerName    string       `json:"worker_name"`
	MaxConcurrent uint32       `json:"max_concurrent"`
	CurrentLoad   *uint32      `json:"current_load"`
	Chunk         *string      `json:"chunk"`
	StatusCode    uint16       `json:"status_code"`
	TokenCounts   *TokenCounts `json:"token_counts"`
	Code          string       `json:"code"`
	Message       string       `json:"message"`

	// shared
	Models          []string `json:"models"`
	ProtocolVersion *string  `json:"protocol_version"`
	RequestID       *string  `json:"request_id"`
	Body            *string  `json:"body"`
	Headers         Headers  `json:"headers"`
	TimestampUnixMs *uint64  `json:"timestamp_unix_ms"`
}

// DecodeError says why a frame was rejected; it never carries the frame itself.
type DecodeError struct{ Reason string }

func (e *DecodeError) Error() string { return "invalid frame: " + e.Reason }

func bad(format string, args ...any) error { return &DecodeError{fmt.Sprintf(format, args...)} }

func decodeFrame(data []byte) (*frame, error) {
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, bad("not a JSON object of the expected shape")
	}
	if f.Type == "" {
		return nil, bad(`missing "type"`)
	}
	return &f, nil
}

func (f *frame) requestID() (string, error) {
	if f.RequestID == nil || *f.RequestID == "" {
		return "", bad("%s without request_id", f.Type)
	}
	return *f.RequestID, nil
}

// DecodeWorkerMessage decodes one frame a worker sent. Unknown fields are ignored; an unknown
// type or a missing required field is a *DecodeError. Canonical response_chunk and
// response_complete frames take the hand-written path (fastframe.go); anything it is not sure
// of, errors included, is decoded by decodeWorkerReflective, so the result is always the
// reflective one.
func DecodeWorkerMessage(data []byte) (Message, error) {
	if m, ok := decodeHot(data, workerDirection); ok {
		return m, nil
	}
	return decodeWorkerReflective(data)
}

// decodeWorkerReflective is the encoding/json decoder of worker frames, the reference.
func decodeWorkerReflective(data []byte) (Message, error) {
	f, err := decodeFrame(data)
	if err != nil {
		return nil, err
	}
	switch f.Type {
	case "register":
		return Register{WorkerName: f.WorkerName, Models: f.Models, MaxConcurrent: f.MaxConcurrent,
			ProtocolVersion: f.ProtocolVersion, CurrentLoad: f.CurrentLoad}, nil
	case "models_update":
		var load uint32
		if f.CurrentLoad != nil {
			load = *f.CurrentLoad
		}
		return ModelsUpdate{Models: f.Models, CurrentLoad: load}, nil
	case "response_chunk":
		id, err := f.requestID()
		if err != nil {
			return nil, err
		}
		if f.Chunk == nil {
			return nil, bad("response_chunk without chunk")
		}
		return ResponseChunk{RequestID: id, Chunk: *f.Chunk}, nil
	case "response_complete":
		id, err := f.requestID()
		if err != nil {
			return nil, err
		}
		if f.StatusCode < 100 || f.StatusCode > 999 {
			return nil, bad("response_complete with status_code %d", f.StatusCode)
		}
		return ResponseComplete{RequestID: id, StatusCode: f.StatusCode, Headers: f.Headers,
			Body: f.Body, TokenCounts: f.TokenCounts}, nil
	case "pong":
		var load uint32
		if f.CurrentLoad != nil {
			load = *f.CurrentLoad
		}
		return Pong{CurrentLoad: load, TimestampUnixMs: f.TimestampUnixMs}, nil
	case "error":
		return Error{RequestID: f.RequestID, Code: f.Code, Message: f.Message}, nil
	}
	return nil, bad("unknown worker message type %q", truncate(f.Type, 64))
}

// DecodeServerMessage decodes one frame a server sent. Canonical request and cancel frames take
// the hand-written path, the rest the reflective one, as in DecodeWorkerMessage.
func DecodeServerMessage(data []byte) (Message, error) {
	if m, ok := decodeHot(data, serverDirection); ok {
		return m, nil
	}
	return decodeServerReflective(data)
}

// decodeServerReflective is the encoding/json decoder of server frames, the reference.
func decodeServerReflective(data []byte) (Message, error) {
	f, err := decodeFrame(data)
	if err != nil {
		return nil, err
	}
	switch f.Type {
	case "register_ack":
		return RegisterAck{WorkerID: f.WorkerID, Models: f.Models, Warnings: f.Warnings,
			ProtocolVersion: f.ProtocolVersion}, nil
	case "request":
		id, err := f.requestID()
		if err != nil {
			return nil, err
		}
		var body string
		if f.Body != nil {
			body = *f.Body
		}
		return Request{RequestID: id, Model: f.Model, EndpointPath: f.EndpointPath,
			IsStreaming: f.IsStreaming, Body: body, Headers: f.Headers}, nil
	case "cancel":
		id, err := f.requestID()
		if err != nil {
			return nil, err
		}
		var reason CancelReason
		if f.Reason != nil {
			if err := reason.UnmarshalJSON(*f.Reason); err != nil {
				return nil, bad("%v", err)
			}
		}
		return Cancel{RequestID: id, Reason: reason}, nil
	case "ping":
		return Ping{TimestampUnixMs: f.TimestampUnixMs}, nil
	case "graceful_shutdown":
		var reason *string
		if f.Reason != nil {
			var s string
			if err := json.Unmarshal(*f.Reason, &s); err != nil {
				return nil, bad("graceful_shutdown reason must be a string")
			}
			reason = &s
		}
		return GracefulShutdown{Reason: reason, DrainTimeoutSecs: f.DrainTimeoutSecs}, nil
	case "models_refresh":
		var reason *string
		if f.Reason != nil {
			var s string
			if err := json.Unmarshal(*f.Reason, &s); err != nil {
				return nil, bad("models_refresh reason must be a string")
			}
			reason = &s
		}
		return ModelsRefresh{Reason: reason}, nil
	}
	return nil, bad("unknown server message type %q", truncate(f.Type, 64))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Ptr returns a pointer to v, for the optional fields.
func Ptr[T any](v T) *T { return &v }
