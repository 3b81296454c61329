package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"modelrelay/protocol"
)

// errDrained ends a session whose daemon was shut down after its last request finished.
var errDrained = errors.New("drained for shutdown")

// outFrame is one queued write: a text frame, or the close frame that ends a drained session.
type outFrame struct {
	payload []byte
	closing bool
}

// outbox is the only writer of a connection (gorilla/websocket allows one). Control answers
// (pong, models_update) jump ahead of queued chunks so a busy stream cannot starve the
// heartbeat; everything else keeps its order, so a request's chunks precede its completion.
type outbox struct {
	conn     *websocket.Conn
	timeout  time.Duration
	maxFrame int64
	urgent   chan outFrame
	queue    chan outFrame
}

// errFrameTooLarge means a frame would exceed the frame limit once encoded.
var errFrameTooLarge = errors.New("frame exceeds the frame limit")

func newOutbox(conn *websocket.Conn, timeout time.Duration, maxFrame int64) *outbox {
	return &outbox{conn: conn, timeout: timeout, maxFrame: maxFrame,
		urgent: make(chan outFrame, 16), queue: make(chan outFrame, 64)}
}

// send queues m behind earlier frames; it waits for room until ctx is done.
func (o *outbox) send(ctx context.Context, m protocol.Message) error {
	return o.push(ctx, o.queue, m)
}

// sendUrgent queues m ahead of the ordinary frames.
func (o *outbox) sendUrgent(ctx context.Context, m protocol.Message) error {
	return o.push(ctx, o.urgent, m)
}

// closeAfterQueued asks the writer to end the session with a normal close once every frame
// queued so far is written.
func (o *outbox) closeAfterQueued(ctx context.Context) error {
	select {
	case o.queue <- outFrame{closing: true}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (o *outbox) push(ctx context.Context, ch chan outFrame, m protocol.Message) error {
	b, err := protocol.Marshal(m)
	if err != nil {
		return err
	}
	if o.maxFrame > 0 && int64(len(b)) > o.maxFrame {
		return errFrameTooLarge // the server would close the session on it
	}
	select {
	case ch <- outFrame{payload: b}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// run writes frames until ctx is done, a write fails, or a close frame was written; the
// returned error says which.
func (o *outbox) run(ctx context.Context) error {
	for {
		select {
		case f := <-o.urgent:
			if err := o.write(f); err != nil {
				return err
			}
			continue
		default:
		}
		var f outFrame
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case f = <-o.urgent:
		case f = <-o.queue:
		}
		if err := o.write(f); err != nil {
			return err
		}
	}
}

func (o *outbox) write(f outFrame) error {
	deadline := time.Now().Add(o.timeout)
	if f.closing {
		msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "worker shutting down")
		if err := o.conn.WriteControl(websocket.CloseMessage, msg, deadline); err != nil {
			return fmt.Errorf("write close frame: %w", err)
		}
		return errDrained
	}
	if err := o.conn.SetWriteDeadline(deadline); err != nil {
		return fmt.Errorf("set write deadline: %w", err)
	}
	if err := o.conn.WriteMessage(websocket.TextMessage, f.payload); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}
