package relay

import (
	"math"
	"sync/atomic"
	"time"

	"modelrelay/relay/endpoint"
)

// rememberDialect is how long a learned "this target does (not) speak X" holds.
const rememberDialect = 10 * time.Minute

// speech is what one target is known to speak. A configured list is fixed; otherwise ("auto")
// the relay learns from answers: a 404, 405 or 501 to an untranslated route means the target
// does not speak that family, a 2xx means it does. What is learned expires, so a model server
// upgraded in place is found out again. All fields are atomics: the request path reads them
// without the pool's lock.
type speech struct {
	fixed   uint8                           // bit per Dialect; 0 = auto
	refuses [endpoint.Dialects]atomic.Int64 // unix nanos until which the target is known not to speak the dialect
	speaks  [endpoint.Dialects]atomic.Int64 // unix nanos until which it is known to speak it
}

// plan is how one attempt sends a request to a target.
type plan uint8

const (
	planNative    plan = iota // send as the client sent it
	planProbe                 // send as the client sent it; a 404/405/501 means "replay translated"
	planTranslate             // send translated
)

func newSpeech(dialects []Dialect) *speech {
	s := &speech{}
	for _, d := range dialects {
		s.fixed |= 1 << d
	}
	return s
}

// assumeSpeaks seeds an auto target with a dialect it is known to serve (a circuit's runtime
// variant): a 404 on that family's path is then the model server's own answer, never read as
// "wrong family".
func (s *speech) assumeSpeaks(d Dialect) { s.speaks[d].Store(math.MaxInt64) }

// plan decides how to send a request in dialect d on route r.
func (s *speech) plan(d Dialect, r endpoint.Route, now time.Time) plan {
	if r == endpoint.RouteNone {
		return planNative
	}
	if s.fixed != 0 {
		if s.fixed&(1<<d) != 0 {
			return planNative
		}
		return planTranslate
	}
	t := now.UnixNano()
	switch {
	case s.refuses[d].Load() > t:
		return planTranslate
	case r == endpoint.RouteCountTokens:
		// Servers that speak Messages do not all count tokens: a refusal here is answered
		// from /tokenize or the estimate, and teaches nothing about the family.
		return planProbe
	case s.speaks[d].Load() > t:
		return planNative
	}
	return planProbe
}

// via is the family a request in d is translated into for this target. OpenAI Chat
// Completions and Anthropic Messages translate into each other. A Responses call goes to Chat
// Completions, unless the target is known not to speak it (configured without it while it
// speaks Messages, or a refusal learned) and then to Messages: the order tried is Responses,
// then Chat Completions, then Messages.
func (s *speech) via(d Dialect, now time.Time) Dialect {
	switch d {
	case endpoint.OpenAI:
		return endpoint.Anthropic
	case endpoint.Anthropic:
		return endpoint.OpenAI
	}
	if s.fixed != 0 {
		if s.fixed&(1<<endpoint.OpenAI) == 0 && s.fixed&(1<<endpoint.Anthropic) != 0 {
			return endpoint.Anthropic
		}
		return endpoint.OpenAI
	}
	if s.refuses[endpoint.OpenAI].Load() > now.UnixNano() {
		return endpoint.Anthropic
	}
	return endpoint.OpenAI
}

// heardSpeaks records a 2xx to an untranslated request in dialect d.
func (s *speech) heardSpeaks(d Dialect, now time.Time) {
	s.refuses[d].Store(0)
	if until := now.Add(rememberDialect).UnixNano(); s.speaks[d].Load() < until {
		s.speaks[d].Store(until) // (a seeded forever stays forever)
	}
}

// heardRefuses records a 404, 405 or 501 to an untranslated request in dialect d.
func (s *speech) heardRefuses(d Dialect, now time.Time) {
	s.refuses[d].Store(now.Add(rememberDialect).UnixNano())
}

// forget drops a learned refusal of d: the translated replay was refused as well, so the
// first refusal was about the request (an unknown model, say), not the family.
func (s *speech) forget(d Dialect) { s.refuses[d].Store(0) }

// refusesDialect reports whether a status answered to an untranslated route means the target
// does not serve that family at all.
func refusesDialect(status int) bool {
	return status == 404 || status == 405 || status == 501
}
