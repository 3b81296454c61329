package relay

import (
	"net/http"
)

// translateSink turns a target's answer in the other API family into the client's, through
// the attempt's conversion (convert.go): a 2xx event stream to a client that asked for a stream
// is translated as it comes, head first; anything else is held until it is whole and written
// at End. A translated stream ends in its own events, so the sink also writes the event that
// ends one the relay cuts short (streamEnder).
type translateSink struct {
	next    Sink
	conv    *conversion
	holding bool // the answer is held until it is whole
}

// wrap translates through c; client learns that a translated stream's last event is c's.
func (t *translateSink) wrap(next Sink, c *conversion, client *clientWriter) Sink {
	t.next, t.conv, t.holding = next, c, false
	client.ender = t
	return t
}

func (t *translateSink) Head(status int, h http.Header, _ int64) (Sink, error) {
	c := t.conv
	stream := isEventStream(h)
	if !stream || !success(status) || !c.streaming {
		t.holding = true
		c.hold(status, h, stream)
		return t, nil
	}
	head := make(http.Header, len(h)+3)
	copyRewrittenHead(head, h, c.name())
	head.Set("Content-Type", "text/event-stream")
	head.Set("Cache-Control", "no-cache")
	c.startStream()
	if _, err := t.next.Head(status, head, -1); err != nil {
		return nil, err
	}
	return t, nil
}

// Chunk translates a stream's bytes as they come, or holds an answer until it is whole. A
// stream that breaks (an event over the event bound) or a held one that cannot be gathered is
// cut short: the client is told why.
func (t *translateSink) Chunk(b []byte, _ bool) error {
	c := t.conv
	if c.stream == nil {
		if err := c.keep(b); err != nil {
			return &cutShort{err: err}
		}
		return nil
	}
	out, err := c.stream.Write(b)
	if err != nil {
		return &cutShort{err: &relayError{status: http.StatusBadGateway, message: err.Error()}}
	}
	if len(out) == 0 {
		return nil
	}
	return t.next.Chunk(out, true)
}

// End sends the closing events of a stream, or the whole translated answer that was held.
func (t *translateSink) End() error {
	c := t.conv
	if c.stream != nil {
		if tail := c.stream.Close(); len(tail) > 0 {
			if err := t.next.Chunk(tail, true); err != nil {
				return err
			}
		}
		c.finishStream()
		return t.next.End()
	}
	if !t.holding {
		return t.next.End()
	}
	t.holding = false
	status, body, estimated, err := c.answer()
	if err != nil {
		return err
	}
	h := make(http.Header, len(c.header)+3)
	copyRewrittenHead(h, c.header, c.name())
	if estimated {
		h.Set("X-Modelrelay-Estimated", "true")
	}
	h.Set("Content-Type", "application/json")
	sink, err := t.next.Head(status, h, int64(len(body)))
	if err != nil {
		return err
	}
	if err := sink.Chunk(body, false); err != nil {
		return err
	}
	return t.next.End()
}

// endEvent is the event that ends a translated stream the relay cut short (none once the
// stream completed); a stream not started is not the translation's to end.
func (t *translateSink) endEvent(message string) ([]byte, bool) {
	if t.conv == nil || t.conv.stream == nil {
		return nil, false
	}
	return t.conv.stream.Fail(message), true
}
