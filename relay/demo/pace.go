package demo

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// writer sends one answer at the model's pace. Every wait ends when the client goes away
// (the request's context), and every write has a deadline, so a client that stops reading
// holds the handler for WriteTimeout at most: nothing here can block forever.
type writer struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	ctx     context.Context
	opts    *Options
	started bool // the first token has been waited for
	failed  bool // a write failed or the client left: send nothing more
}

func (s *Server) writer(w http.ResponseWriter, r *http.Request) *writer {
	return &writer{w: w, rc: http.NewResponseController(w), ctx: r.Context(), opts: &s.opts}
}

// token waits until the next token is due: FirstToken for the first, PerToken after.
func (wr *writer) token() bool {
	d := wr.opts.PerToken
	if !wr.started {
		d, wr.started = wr.opts.FirstToken, true
	}
	return wr.wait(d)
}

// whole waits as long as generating all of a's tokens takes, for an answer sent at once.
func (wr *writer) whole(a answer) bool {
	return wr.wait(wr.opts.FirstToken + time.Duration(max(a.output()-1, 0))*wr.opts.PerToken)
}

func (wr *writer) wait(d time.Duration) bool {
	if wr.failed || wr.ctx.Err() != nil {
		wr.failed = true
		return false
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-wr.ctx.Done():
		wr.failed = true
		return false
	case <-t.C:
		return true
	}
}

// deadline bounds the next write. A ResponseWriter without deadlines (a test recorder)
// cannot block on a client anyway.
func (wr *writer) deadline() bool {
	err := wr.rc.SetWriteDeadline(time.Now().Add(wr.opts.WriteTimeout))
	return err == nil || errors.Is(err, http.ErrNotSupported)
}

// json sends a whole answer.
func (wr *writer) json(v any) {
	if wr.failed || !wr.deadline() {
		return
	}
	writeJSON(wr.w, http.StatusOK, v)
}

// startStream sends the head of an event stream.
func (wr *writer) startStream() {
	h := wr.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold the events back
	wr.w.WriteHeader(http.StatusOK)
}

// event sends one server-sent event (name "" = data only, OpenAI's framing) and flushes it,
// so each token reaches the client when it is produced.
func (wr *writer) event(name string, v any) bool {
	data, err := json.Marshal(v)
	if err != nil { // only our own types get here
		wr.failed = true
		return false
	}
	return wr.raw(name, data)
}

func (wr *writer) raw(name string, data []byte) bool {
	if wr.failed || !wr.deadline() {
		wr.failed = true
		return false
	}
	buf := make([]byte, 0, len(name)+len(data)+16)
	if name != "" {
		buf = append(append(append(buf, "event: "...), name...), '\n')
	}
	buf = append(append(append(buf, "data: "...), data...), "\n\n"...)
	if _, err := wr.w.Write(buf); err != nil {
		wr.failed = true
		return false
	}
	if err := wr.rc.Flush(); err != nil {
		wr.failed = true
		return false
	}
	return true
}
