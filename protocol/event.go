package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// EventsChannel is the Pub/Sub channel the coordinator and its workers share.
const EventsChannel = "events_all-appproxy"

// Event names and sources on EventsChannel.
const (
	EventCircuitCreated      = "appproxy_circuit_created_event"
	EventCircuitRemoved      = "appproxy_circuit_removed_event"
	EventCircuitRouteUpdated = "appproxy_circuit_route_updated_event"
	EventWorkerCircuitAdded  = "appproxy_worker_circuit_added_event"

	SourceCoordinator = "appproxy-coordinator"
	SourceWorker      = "appproxy-worker"
)

// AckMetadata is the ack's metadata text. Decoders before 26.8.0 drop a message whose metadata
// has a key they do not know, so it must be exactly this.
const AckMetadata = `{"request_id":null,"user":null}`

// coordinatorMetadata is what the coordinator itself sends.
const coordinatorMetadata = `{"request_id":null,"user":null,"triggered_user":null}`

// ErrMalformedEvent marks a message on the channel that is not a well-formed event.
var ErrMalformedEvent = errors.New("malformed event")

// Format selects an envelope field: released coordinators read args, unreleased main reads
// payload.
type Format int

const (
	FormatArgs    Format = 1 << iota // base64 msgpack array of strings
	FormatPayload                    // JSON text
	FormatBoth    = FormatArgs | FormatPayload
)

// Envelope is one message on the channel. Args and Payload are the raw field texts.
type Envelope struct {
	Name     string  `json:"name"`
	Source   string  `json:"source"`
	Args     *string `json:"args,omitempty"`
	Payload  *string `json:"payload,omitempty"`
	Metadata *string `json:"metadata,omitempty"`
}

// Event is a decoded envelope: *CircuitCreated, *CircuitRemoved, *CircuitRouteUpdated,
// *WorkerCircuitAdded or *UnknownEvent.
type Event interface {
	EventName() string
}

// CircuitSet is the body shared by the created, removed and worker-added events.
type CircuitSet struct {
	Authority string
	Circuits  []Circuit
	// CircuitsJSON is the circuits list text exactly as received: the ack echoes it verbatim.
	CircuitsJSON string
}

type (
	CircuitCreated     struct{ CircuitSet }
	CircuitRemoved     struct{ CircuitSet }
	WorkerCircuitAdded struct{ CircuitSet } // our ack, decoded (tests and test doubles)
)

// CircuitRouteUpdated replaces one circuit's whole route set.
type CircuitRouteUpdated struct {
	Authority   string
	Circuit     Circuit
	Routes      []Route
	CircuitJSON string
	RoutesJSON  string
}

// UnknownEvent is any other name: the channel is shared, so this is normal traffic, not an error.
type UnknownEvent struct{ Name, Source string }

func (*CircuitCreated) EventName() string      { return EventCircuitCreated }
func (*CircuitRemoved) EventName() string      { return EventCircuitRemoved }
func (*WorkerCircuitAdded) EventName() string  { return EventWorkerCircuitAdded }
func (*CircuitRouteUpdated) EventName() string { return EventCircuitRouteUpdated }
func (e *UnknownEvent) EventName() string      { return e.Name }

// DecodeEnvelope parses the outer JSON object. Metadata that arrives as an object instead of a
// JSON text is kept as its raw text; we never act on it.
func DecodeEnvelope(data []byte) (Envelope, error) {
	var raw struct {
		Name     *string         `json:"name"`
		Source   string          `json:"source"`
		Args     *string         `json:"args"`
		Payload  *string         `json:"payload"`
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return Envelope{}, fmt.Errorf("%w: envelope: %v", ErrMalformedEvent, err)
	}
	if raw.Name == nil {
		return Envelope{}, fmt.Errorf("%w: envelope has no name", ErrMalformedEvent)
	}
	env := Envelope{Name: *raw.Name, Source: raw.Source, Args: raw.Args, Payload: raw.Payload}
	if len(raw.Metadata) > 0 && string(raw.Metadata) != "null" {
		var s string
		if json.Unmarshal(raw.Metadata, &s) != nil {
			s = string(raw.Metadata)
		}
		env.Metadata = &s
	}
	return env, nil
}

// DecodeEvent decodes a channel message, from payload when present, else from args.
func DecodeEvent(data []byte) (Event, error) {
	env, err := DecodeEnvelope(data)
	if err != nil {
		return nil, err
	}
	f := FormatArgs
	if env.Payload != nil {
		f = FormatPayload
	}
	return env.Event(f)
}

// Event decodes the body from the field f names (FormatArgs or FormatPayload).
func (env Envelope) Event(f Format) (Event, error) {
	arity := 2
	switch env.Name {
	case EventCircuitCreated, EventCircuitRemoved, EventWorkerCircuitAdded:
	case EventCircuitRouteUpdated:
		arity = 3
	default:
		return &UnknownEvent{Name: env.Name, Source: env.Source}, nil
	}
	var fields []string
	var err error
	switch f {
	case FormatArgs:
		if env.Args == nil {
			return nil, fmt.Errorf("%w: %s has neither payload nor args", ErrMalformedEvent, env.Name)
		}
		fields, err = decodeArgs(*env.Args, arity)
	case FormatPayload:
		if env.Payload == nil {
			return nil, fmt.Errorf("%w: %s has no payload", ErrMalformedEvent, env.Name)
		}
		fields, err = decodePayload(*env.Payload, arity == 3)
	default:
		return nil, fmt.Errorf("decode %s: bad format %d", env.Name, f)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformedEvent, env.Name, err)
	}
	ev, err := typedEvent(env.Name, fields)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformedEvent, env.Name, err)
	}
	return ev, nil
}

// typedEvent builds the event from its positional fields (authority first), the same
// in both envelope formats.
func typedEvent(name string, fields []string) (Event, error) {
	if name == EventCircuitRouteUpdated {
		ev := &CircuitRouteUpdated{Authority: fields[0], CircuitJSON: fields[1], RoutesJSON: fields[2]}
		if err := json.Unmarshal([]byte(fields[1]), &ev.Circuit); err != nil {
			return nil, fmt.Errorf("circuit: %w", err)
		}
		if err := json.Unmarshal([]byte(fields[2]), &ev.Routes); err != nil {
			return nil, fmt.Errorf("routes: %w", err)
		}
		if ev.Routes == nil {
			return nil, errors.New("routes: not a list")
		}
		return ev, nil
	}
	cs, err := DecodeCircuits([]byte(fields[1]))
	if err != nil {
		return nil, err
	}
	set := CircuitSet{Authority: fields[0], Circuits: cs, CircuitsJSON: fields[1]}
	switch name {
	case EventCircuitCreated:
		return &CircuitCreated{set}, nil
	case EventCircuitRemoved:
		return &CircuitRemoved{set}, nil
	}
	return &WorkerCircuitAdded{set}, nil
}

// decodeArgs reads standard base64 of a msgpack array of strings. Python's msgpack with
// use_bin_type=True writes str, but bin is tolerated; extra elements are ignored.
func decodeArgs(text string, arity int) ([]string, error) {
	raw, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(text); err != nil {
			return nil, fmt.Errorf("args base64: %w", err)
		}
	}
	dec := msgpack.NewDecoder(bytes.NewReader(raw))
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, fmt.Errorf("args msgpack: %w", err)
	}
	if n < arity {
		return nil, fmt.Errorf("args: %d elements, want %d", n, arity)
	}
	out := make([]string, arity)
	for i := range out {
		c, err := dec.PeekCode()
		if err != nil {
			return nil, fmt.Errorf("args[%d]: %w", i, err)
		}
		if !msgpcode.IsString(c) && !msgpcode.IsBin(c) {
			return nil, fmt.Errorf("args[%d]: msgpack code 0x%02x is not str or bin", i, c)
		}
		if out[i], err = dec.DecodeString(); err != nil {
			return nil, fmt.Errorf("args[%d]: %w", i, err)
		}
	}
	return out, nil
}

// decodePayload reads the JSON payload into the same positional fields as args, keeping the
// circuits (or circuit and routes) as the raw text found there.
func decodePayload(text string, routeUpdate bool) ([]string, error) {
	var p struct {
		Authority *string         `json:"target_worker_authority"`
		Circuits  json.RawMessage `json:"circuits"`
		Circuit   json.RawMessage `json:"circuit"`
		Routes    json.RawMessage `json:"routes"`
	}
	if err := json.Unmarshal([]byte(text), &p); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	if p.Authority == nil {
		return nil, errors.New("payload: no target_worker_authority")
	}
	if routeUpdate {
		if p.Circuit == nil || p.Routes == nil {
			return nil, errors.New("payload: needs circuit and routes")
		}
		return []string{*p.Authority, string(p.Circuit), string(p.Routes)}, nil
	}
	if p.Circuits == nil {
		return nil, errors.New("payload: no circuits")
	}
	return []string{*p.Authority, string(p.Circuits)}, nil
}

// EncodeAck builds the ack for a created event: both fields, so every coordinator version reads
// the one it knows. circuitsJSON must be the inbound circuits text, untouched.
func EncodeAck(authority, circuitsJSON string) ([]byte, error) {
	b, err := encodeEnvelope(EventWorkerCircuitAdded, SourceWorker, AckMetadata, FormatBoth,
		[]string{authority, circuitsJSON}, circuitsPayload(authority, circuitsJSON))
	if err != nil {
		return nil, fmt.Errorf("encode ack: %w", err)
	}
	return b, nil
}

// EncodeCircuitEvent builds a coordinator event carrying a circuit list (created or removed), as
// the coordinator would; the relay itself only needs it in tests.
func EncodeCircuitEvent(name, authority, circuitsJSON string, f Format) ([]byte, error) {
	return encodeEnvelope(name, SourceCoordinator, coordinatorMetadata, f,
		[]string{authority, circuitsJSON}, circuitsPayload(authority, circuitsJSON))
}

// EncodeRouteUpdate builds a coordinator route-update event.
func EncodeRouteUpdate(authority, circuitJSON, routesJSON string, f Format) ([]byte, error) {
	payload := struct {
		Authority string          `json:"target_worker_authority"`
		Circuit   json.RawMessage `json:"circuit"`
		Routes    json.RawMessage `json:"routes"`
	}{authority, json.RawMessage(circuitJSON), json.RawMessage(routesJSON)}
	return encodeEnvelope(EventCircuitRouteUpdated, SourceCoordinator, coordinatorMetadata, f,
		[]string{authority, circuitJSON, routesJSON}, payload)
}

func circuitsPayload(authority, circuitsJSON string) any {
	return struct {
		Authority string          `json:"target_worker_authority"`
		Circuits  json.RawMessage `json:"circuits"`
	}{authority, json.RawMessage(circuitsJSON)}
}

func encodeEnvelope(name, source, metadata string, f Format, args []string, payload any) ([]byte, error) {
	env := Envelope{Name: name, Source: source, Metadata: &metadata}
	if f&FormatArgs != 0 {
		a, err := encodeArgs(args)
		if err != nil {
			return nil, err
		}
		env.Args = &a
	}
	if f&FormatPayload != 0 {
		p, err := json.Marshal(payload)
		if err != nil {
			return nil, fmt.Errorf("payload: %w", err)
		}
		s := string(p)
		env.Payload = &s
	}
	return json.Marshal(env)
}

func encodeArgs(fields []string) (string, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeArrayLen(len(fields)); err != nil {
		return "", fmt.Errorf("args: %w", err)
	}
	for _, s := range fields {
		if err := enc.EncodeString(s); err != nil {
			return "", fmt.Errorf("args: %w", err)
		}
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}
