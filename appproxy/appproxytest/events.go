package appproxytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"modelrelay/protocol"
)

// AckTimeout is how long the real coordinator waits for a worker's ack.
const AckTimeout = 15 * time.Second

// Ack is a worker's circuit-added ack as the coordinator receives it.
type Ack struct {
	Raw      []byte
	Envelope protocol.Envelope
	Args     *protocol.WorkerCircuitAdded // decoded from args; nil when absent
	Payload  *protocol.WorkerCircuitAdded // decoded from payload; nil when absent
}

// Has reports whether either field of the ack names circuitID.
func (a *Ack) Has(circuitID string) bool {
	for _, set := range []*protocol.WorkerCircuitAdded{a.Args, a.Payload} {
		if set == nil {
			continue
		}
		for _, c := range set.Circuits {
			if c.ID == circuitID {
				return true
			}
		}
	}
	return false
}

// decodeAck returns nil for anything that is not an ack.
func decodeAck(data []byte) *Ack {
	env, err := protocol.DecodeEnvelope(data)
	if err != nil || env.Name != protocol.EventWorkerCircuitAdded {
		return nil
	}
	a := &Ack{Raw: data, Envelope: env}
	if ev, err := env.Event(protocol.FormatArgs); err == nil {
		a.Args = ev.(*protocol.WorkerCircuitAdded)
	}
	if ev, err := env.Event(protocol.FormatPayload); err == nil {
		a.Payload = ev.(*protocol.WorkerCircuitAdded)
	}
	return a
}

// AddCircuit assigns a circuit to authority with no event, as if the event had been lost: only
// a pull shows it.
func (c *Coordinator) AddCircuit(authority string, circuit json.RawMessage) (id string, err error) {
	var head struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(circuit, &head); err != nil || head.ID == "" {
		return "", fmt.Errorf("circuit needs an id: %v", err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, circuit); err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.circuits[authority]
	for i, sc := range list {
		if sc.id == head.ID {
			list[i].raw = compact.Bytes()
			return head.ID, nil
		}
	}
	c.circuits[authority] = append(list, storedCircuit{id: head.ID, raw: compact.Bytes()})
	return head.ID, nil
}

// DropCircuit unassigns a circuit with no event.
func (c *Coordinator) DropCircuit(authority, id string) (json.RawMessage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.circuits[authority]
	for i, sc := range list {
		if sc.id == id {
			c.circuits[authority] = append(list[:i:i], list[i+1:]...)
			return sc.raw, true
		}
	}
	return nil, false
}

// CreateCircuit assigns the circuit, publishes appproxy_circuit_created_event in format f with
// the circuit text as given (so a verbatim echo can be checked), and waits up to 15 s for the ack
// that names it.
func (c *Coordinator) CreateCircuit(ctx context.Context, authority string, circuit json.RawMessage, f protocol.Format) (*Ack, error) {
	id, err := c.AddCircuit(authority, circuit)
	if err != nil {
		return nil, err
	}
	msg, err := protocol.EncodeCircuitEvent(protocol.EventCircuitCreated, authority, "["+string(circuit)+"]", f)
	if err != nil {
		return nil, err
	}
	return c.PublishAndWaitAck(ctx, msg, id)
}

// PublishAndWaitAck publishes msg and waits up to 15 s for an ack naming circuitID.
func (c *Coordinator) PublishAndWaitAck(ctx context.Context, msg []byte, circuitID string) (*Ack, error) {
	ctx, cancel := context.WithTimeout(ctx, AckTimeout)
	defer cancel()
	w, err := c.WatchAcks(ctx)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if err := c.Publish(ctx, msg); err != nil {
		return nil, err
	}
	return w.Wait(ctx, circuitID)
}

// UpdateRoutes replaces a circuit's route_info and publishes the route update (never acked).
func (c *Coordinator) UpdateRoutes(ctx context.Context, authority, circuitID string, routes json.RawMessage, f protocol.Format) error {
	raw, ok := c.DropCircuit(authority, circuitID)
	if !ok {
		return fmt.Errorf("circuit %s is not assigned to %s", circuitID, authority)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	m["route_info"] = json.RawMessage(routes)
	updated, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := c.AddCircuit(authority, updated); err != nil {
		return err
	}
	msg, err := protocol.EncodeRouteUpdate(authority, string(updated), string(routes), f)
	if err != nil {
		return err
	}
	return c.Publish(ctx, msg)
}

// RemoveCircuit unassigns a circuit and publishes the removal (never acked).
func (c *Coordinator) RemoveCircuit(ctx context.Context, authority, circuitID string, f protocol.Format) error {
	raw, ok := c.DropCircuit(authority, circuitID)
	if !ok {
		return fmt.Errorf("circuit %s is not assigned to %s", circuitID, authority)
	}
	msg, err := protocol.EncodeCircuitEvent(protocol.EventCircuitRemoved, authority, "["+string(raw)+"]", f)
	if err != nil {
		return err
	}
	return c.Publish(ctx, msg)
}

// Publish puts raw bytes on the events channel (garbage included).
func (c *Coordinator) Publish(ctx context.Context, msg []byte) error {
	if c.rdb == nil {
		return errors.New("coordinator has no redis")
	}
	if err := c.rdb.Publish(ctx, protocol.EventsChannel, msg).Err(); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

// AckWatch collects every ack seen on the channel while it is open. Wait and Close belong to
// one goroutine.
type AckWatch struct {
	ps   *redis.PubSub
	ch   chan *Ack
	done chan struct{}
	acks []*Ack
}

// WatchAcks subscribes (confirmed before it returns) and collects acks until Close or ctx ends.
func (c *Coordinator) WatchAcks(ctx context.Context) (*AckWatch, error) {
	if c.rdb == nil {
		return nil, errors.New("coordinator has no redis")
	}
	ps := c.rdb.Subscribe(ctx)
	if err := ps.Subscribe(ctx, protocol.EventsChannel); err != nil {
		ps.Close()
		return nil, fmt.Errorf("watch acks: %w", err)
	}
	if _, err := ps.ReceiveTimeout(ctx, 5*time.Second); err != nil {
		ps.Close()
		return nil, fmt.Errorf("watch acks: %w", err)
	}
	w := &AckWatch{ps: ps, ch: make(chan *Ack, 1024), done: make(chan struct{})}
	go w.run(ctx)
	return w, nil
}

func (w *AckWatch) run(ctx context.Context) {
	defer close(w.done)
	stop := context.AfterFunc(ctx, func() { _ = w.ps.Close() })
	defer stop()
	for {
		msg, err := w.ps.Receive(ctx)
		if err != nil {
			return
		}
		m, ok := msg.(*redis.Message)
		if !ok {
			continue
		}
		if a := decodeAck([]byte(m.Payload)); a != nil {
			select {
			case w.ch <- a:
			default: // a test that floods acks only loses the overflow
			}
		}
	}
}

// Wait returns the first ack naming circuitID that arrives (or arrived) while watching.
func (w *AckWatch) Wait(ctx context.Context, circuitID string) (*Ack, error) {
	for _, a := range w.acks {
		if a.Has(circuitID) {
			return a, nil
		}
	}
	for {
		select {
		case a := <-w.ch:
			w.acks = append(w.acks, a)
			if a.Has(circuitID) {
				return a, nil
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("no ack for circuit %s: %w", circuitID, ctx.Err())
		}
	}
}

// Close stops watching and returns every ack seen.
func (w *AckWatch) Close() []*Ack {
	_ = w.ps.Close()
	<-w.done
	for {
		select {
		case a := <-w.ch:
			w.acks = append(w.acks, a)
		default:
			return w.acks
		}
	}
}

// newUUID makes worker ids.
