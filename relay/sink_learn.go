package relay

import (
	"net/http"
	"time"
)

// learnSink is a probe's ear: a 2xx to a request sent in the client's family teaches the
// target that it speaks that family (a refusal is learned by the chain code, which replays
// the request translated).
type learnSink struct {
	next    Sink
	speech  *speech // the target's; nil once it learned
	dialect Dialect // the client's
}

func (l *learnSink) wrap(next Sink, s *speech) Sink {
	l.next, l.speech = next, s
	return l
}

func (l *learnSink) Head(status int, h http.Header, length int64) (Sink, error) {
	if l.speech != nil && success(status) {
		l.speech.heardSpeaks(l.dialect, time.Now())
		l.speech = nil
	}
	return l.next.Head(status, h, length)
}

func (l *learnSink) Chunk(b []byte, flush bool) error { return l.next.Chunk(b, flush) }

func (l *learnSink) End() error { return l.next.End() }
