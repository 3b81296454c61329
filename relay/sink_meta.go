package relay

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// metaSink adds x_pool_meta to a successful JSON answer, for a request that carried
// x_pool_options: such an answer is held whole (up to maxTranslatedBody; a larger one goes on
// as it came) and written with where it ran and how long it took. Anything else passes.
type metaSink struct {
	next    Sink
	where   *servedBy
	arrival time.Time
	holding bool
	held    heldAnswer
}

func (m *metaSink) wrap(next Sink) Sink {
	m.next = next
	return m
}

func (m *metaSink) Head(status int, h http.Header, length int64) (Sink, error) {
	if success(status) && strings.HasPrefix(h.Get("Content-Type"), "application/json") && h.Get("Content-Encoding") == "" {
		m.holding = true
		m.held = heldAnswer{status: status, header: h, body: m.held.body[:0]}
		return m, nil
	}
	return m.next.Head(status, h, length)
}

func (m *metaSink) Chunk(b []byte, flush bool) error {
	if m.holding {
		a := &m.held
		if len(a.body)+len(b) <= maxTranslatedBody {
			a.add(b, maxTranslatedBody)
			return nil
		}
		// Too large to hold: it goes out as the target sent it.
		m.holding = false
		if _, err := m.next.Head(a.status, a.header, -1); err != nil {
			return err
		}
		if err := m.next.Chunk(a.body, false); err != nil {
			return err
		}
	}
	return m.next.Chunk(b, flush)
}

func (m *metaSink) End() error {
	if m.holding {
		m.holding = false
		body := m.withMeta(m.held.body)
		h := make(http.Header, len(m.held.header)+1)
		copyRewrittenHead(h, m.held.header, "")
		h.Set("Content-Type", "application/json")
		sink, err := m.next.Head(m.held.status, h, int64(len(body)))
		if err != nil {
			return err
		}
		if err := sink.Chunk(body, false); err != nil {
			return err
		}
	}
	return m.next.End()
}

// withMeta adds x_pool_meta to a JSON object answer: where it ran, how long it waited for the
// target, how long the target took. Anything but an object is left as it is.
func (m *metaSink) withMeta(body []byte) []byte {
	end := len(bytes.TrimRight(body, " \t\r\n")) - 1
	if end < 1 || body[end] != '}' {
		return body
	}
	inner := bytes.TrimRight(body[:end], " \t\r\n")
	if len(inner) == 0 {
		return body // a lone "}": not an object
	}
	at := m.where
	meta, _ := json.Marshal(struct {
		Target      string `json:"target"`
		QueueMS     int64  `json:"queue_ms"`
		InferenceMS int64  `json:"inference_ms"`
	}{at.target, at.queued.Milliseconds(), (time.Since(m.arrival) - at.queued).Milliseconds()})
	out := make([]byte, 0, len(body)+len(meta)+20)
	out = append(out, inner...)
	if inner[len(inner)-1] != '{' {
		out = append(out, ',')
	}
	out = append(append(append(out, `"x_pool_meta":`...), meta...), '}')
	return append(out, body[end+1:]...)
}
