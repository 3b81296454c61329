package relay

import (
	"net/http"

	"modelrelay/relay/usage"
)

// tapSink reads the tokens a successful answer used as its bytes pass, before any translation
// (the tap reads either family). For an OpenAI stream whose usage chunk the relay asked for and
// the client did not (strip), it takes that chunk out again; a translated stream carries the
// usage chunk only if the client asked, so there is nothing to take out. It follows one answer
// per request: the tap is pooled, and before it follows it holds another request's counts.
type tapSink struct {
	next      Sink
	usage     *usage.Tap
	strip     bool // for the request
	stripHere bool // for this attempt: strip, and the answer is not translated
	tapping   bool // following an answer now
	followed  bool // followed one: its counts are this request's
}

func (t *tapSink) wrap(next Sink, untranslated bool) Sink {
	t.next, t.stripHere = next, t.strip && untranslated
	return t
}

// Head starts following a successful answer, a stream or a whole body; the body of any other
// answer does not pass the tap.
func (t *tapSink) Head(status int, h http.Header, length int64) (Sink, error) {
	if !success(status) || t.tapping {
		return t.next.Head(status, h, length)
	}
	mode := usage.JSON
	switch stream := isEventStream(h); {
	case stream && t.stripHere:
		mode = usage.StreamStrip
	case stream:
		mode = usage.Stream
	}
	t.usage.Reset(mode)
	t.tapping, t.followed = true, true
	if _, err := t.next.Head(status, h, length); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *tapSink) Chunk(b []byte, flush bool) error {
	if t.tapping {
		if b = t.usage.Write(b); len(b) == 0 {
			return nil
		}
	}
	return t.next.Chunk(b, flush)
}

// End sends what the tap held back: a stripped stream's last event, while it was incomplete.
func (t *tapSink) End() error {
	if t.tapping {
		t.tapping = false
		if tail := t.usage.Close(); len(tail) > 0 {
			if err := t.next.Chunk(tail, true); err != nil {
				return err
			}
		}
	}
	return t.next.End()
}

// counts is what the answer reported (nothing unless a successful answer was followed); it
// ends the tap's reading.
func (t *tapSink) counts() usage.Counts {
	if !t.followed {
		return usage.Counts{}
	}
	if t.tapping {
		t.tapping = false
		t.usage.Close()
	}
	return t.usage.Counts()
}
