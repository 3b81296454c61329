package daemon

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/gorilla/websocket"

	"modelrelay/protocol"
	"modelrelay/relay/wsconn"
)

// errDrained ends a session whose daemon was shut down after its last request finished.
var errDrained = errors.New("drained for shutdown")

// outFrame is one queued write: a text frame, or the close frame that ends a drained session.
type outFrame struct {
	payload *[]byte // in a wsconn buffer, released once written
	closing bool
}

// outbox is the only writer of a connection (gorilla/websocket allows one). Control answers
// (pong, models_update) jump ahead of queued chunks so a busy stream cannot starve the
// heartbeat; everything else keeps its order, so a request's chunks precede its completion.
// The frames queued when the writer gets to them go out in one write to the socket.
type outbox struct {
	conn     *websocket.Conn
	batch    *wsconn.Conn // the socket under conn
	timeout  time.Duration
	maxFrame int64
	urgent   chan outFrame
	queue    chan outFrame
}

// maxBatch bounds the frames written together: the frames queued behind the first wait no
// longer than it takes to copy that many.
const maxBatch = 64

// errFrameTooLarge means a frame would exceed the frame limit once encoded.
var errFrameTooLarge = errors.New("frame exceeds the frame limit")

func newOutbox(conn *websocket.Conn, batch *wsconn.Conn, timeout time.Duration, maxFrame int64) *outbox {
	return &outbox{conn: conn, batch: batch, timeout: timeout, maxFrame: maxFrame,
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
	frame := wsconn.Buffer()
	var err error
	if *frame, err = protocol.AppendMarshal(*frame, m); err != nil {
		wsconn.Release(frame)
		return err
	}
	return o.queueFrame(ctx, ch, frame)
}

// sendComplete queues c behind earlier frames, with *body as its body when body is not nil
// (a whole answer read into a wsconn buffer, released here once encoded).
func (o *outbox) sendComplete(ctx context.Context, c protocol.ResponseComplete, body *[]byte) error {
	if body == nil {
		return o.send(ctx, c)
	}
	frame := wsconn.Buffer()
	*frame = protocol.AppendResponseComplete(*frame, c, *body)
	wsconn.Release(body)
	return o.queueFrame(ctx, o.queue, frame)
}

// sendChunk queues a response_chunk behind earlier frames, encoded straight from chunk.
func (o *outbox) sendChunk(ctx context.Context, requestID string, chunk []byte) error {
	frame := wsconn.Buffer()
	*frame = protocol.AppendResponseChunk(*frame, requestID, chunk)
	return o.queueFrame(ctx, o.queue, frame)
}

// queueFrame hands an encoded frame to the writer; it waits for room until ctx is done.
func (o *outbox) queueFrame(ctx context.Context, ch chan outFrame, frame *[]byte) error {
	if o.maxFrame > 0 && int64(len(*frame)) > o.maxFrame {
		wsconn.Release(frame)
		return errFrameTooLarge // the server would close the session on it
	}
	select {
	case ch <- outFrame{payload: frame}:
		return nil
	case <-ctx.Done():
		wsconn.Release(frame)
		return context.Cause(ctx)
	}
}

// run writes frames until ctx is done, a write fails, or a close frame was written; the
// returned error says which. The frames already queued when it takes one, urgent ones first,
// go out with it in one write; when the queue runs dry it yields once first, so the streams
// ready to run queue theirs too (a write went from 1.2 frames to ~5 under load).
func (o *outbox) run(ctx context.Context) error {
	for {
		var f outFrame
		select {
		case f = <-o.urgent:
		default:
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case f = <-o.urgent:
			case f = <-o.queue:
			}
		}
		o.batch.Hold()
		err := o.write(f)
		yielded := false
		for n := 1; err == nil && n < maxBatch; n++ {
			next, ok := o.queued()
			if !ok {
				if yielded {
					break
				}
				yielded = true
				runtime.Gosched()
				continue
			}
			err = o.write(next)
		}
		if ferr := o.batch.Flush(); ferr != nil && (err == nil || errors.Is(err, errDrained)) {
			return fmt.Errorf("write frame: %w", ferr)
		}
		if err != nil {
			return err
		}
	}
}

// queued takes the next frame already queued, urgent ones first; false when none is.
func (o *outbox) queued() (outFrame, bool) {
	select {
	case f := <-o.urgent:
		return f, true
	default:
	}
	select {
	case f := <-o.urgent:
		return f, true
	case f := <-o.queue:
		return f, true
	default:
		return outFrame{}, false
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
	err := o.conn.WriteMessage(websocket.TextMessage, *f.payload)
	wsconn.Release(f.payload)
	if err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}
