package relay

import (
	"net/http"
	"strings"
	"time"

	"modelrelay/relay/usage"
)

// Sink is the only way an answer travels from a target to the client. A target calls Head
// once, then Chunk on the sink Head returned for each piece of the body; once the target is
// done (and its slot free) the chain code calls End, or answers the error the target returned.
// Each transformation of the answer is a Sink that wraps the next one; the last one writes to
// the client. A sink may keep what it is given (a held failure, a body to translate whole) and
// pass it on later, but never changes it: h belongs to the target, and b is valid only during
// the call.
type Sink interface {
	// Head starts the answer: the target's status, its headers, and the length of its body
	// (-1 when unknown; the answer to a relay protocol stream is Head(200, an event-stream
	// header, -1)). It returns the sink the body goes to: this one, or, when this one has
	// nothing to do with the body, what its next returned, so that each chunk passes only
	// the sinks that work on it. (Chunk on a sink that stepped aside still passes it on.)
	Head(status int, h http.Header, length int64) (Sink, error)
	// Chunk passes the next bytes of the body; flush asks for them to reach the client before
	// the target is read again (every read of a stream).
	Chunk(b []byte, flush bool) error
	// End completes the answer: a sink that held something sends it on.
	End() error
}

// answer is one request's way back to the client: every sink its attempts may compose, and
// what the chain code keeps between attempts. The sinks live here, so composing a chain
// allocates nothing (the extras once, for a request that needs one). It is owned by the
// request's goroutine; only the commit's gate is shared, with the request-timeout timer.
type answer struct {
	// where names what serves the request; the chain code sets it per model and attempt.
	where servedBy
	// kept is a failure held from an earlier attempt: the answer if the chain runs out.
	kept *heldAnswer

	// The sinks most answers pass, by value.
	client clientWriter
	commit commitSink
	hold   holdSink
	tap    tapSink // in every chain once the request asks to read usage (tapUsage)
	// The sinks only some requests pass, allocated together when a request first needs one
	// (see extras): the common answer stays no larger than the writer it replaced.
	extra    *extraSinks
	withMeta bool // the request asked for x_pool_meta (addMeta)
	caching  bool // the answer is recorded for the response cache (record)
}

// extraSinks are the sinks of a probe, a translation, x_pool_meta and the response cache.
type extraSinks struct {
	learn     learnSink
	translate translateSink
	meta      metaSink
	cache     cacheSink
}

// attemptPlan is what one attempt decided about its answer.
type attemptPlan struct {
	conv         *conversion // the target speaks the other family: translate (nil: as it comes)
	probing      bool        // the target may not speak the client's family: hold a refusal
	learn        *speech     // a 2xx teaches this target the client's family (nil: nothing to learn)
	keepFailures bool        // another target or model may still serve the request: hold a failure
}

// servedBy is what an answer's x-modelrelay-* headers say: the model that serves the request
// and, after a fallback, the one the client asked for; the target's name and how long the
// request waited for it.
type servedBy struct {
	served, from string
	target       string
	queued       time.Duration
}

func newAnswer(w http.ResponseWriter, d Dialect, maxStream int64, arrival time.Time) *answer {
	a := &answer{}
	a.client = clientWriter{w: w, dialect: d, maxStream: maxStream, where: &a.where}
	a.commit.arrival = arrival
	return a
}

// extras returns the sinks only some requests pass, made on first use.
func (a *answer) extras() *extraSinks {
	if a.extra == nil {
		a.extra = &extraSinks{learn: learnSink{dialect: a.client.dialect},
			meta: metaSink{where: &a.where, arrival: a.commit.arrival}}
	}
	return a.extra
}

// addMeta asks for x_pool_meta in a whole JSON answer (the request carried x_pool_options).
func (a *answer) addMeta() { a.withMeta = true }

// tapUsage reads what a successful answer used with t; strip takes the usage chunk out of an
// OpenAI stream (the relay asked for it, the client did not).
func (a *answer) tapUsage(t *usage.Tap, strip bool) { a.tap.usage, a.tap.strip = t, strip }

// compose builds the chain one attempt's answer passes through, once per attempt, and returns
// its target end. Each line wraps one transformation where the plans ask for it: a new
// transformation is a sink type in its own file and one line here (its sink held in answer or
// among the extras). The lines wrap from the client outwards; an answer passes the sinks in
// this order:
//
//	hold      keeps a probe's refusal (for a translated replay) or a failure (for another
//	          target or model) from the client
//	learn     a probe's 2xx teaches the target the client's family
//	commit    the answer is this one: the request timeout can no longer answer instead
//	tap       reads the usage, before translation (it reads either family)
//	translate turns the answer into the client's family
//	meta      adds x_pool_meta to a whole JSON answer
//	cache     records what the client receives, for the response cache
//	client    writes to the client
func (a *answer) compose(at attemptPlan) Sink {
	var s Sink = &a.client
	a.client.ender = nil // a sink that speaks the stream to the client claims it below
	if a.caching {
		s = a.extra.cache.wrap(s)
	}
	if a.withMeta {
		s = a.extras().meta.wrap(s)
	}
	if at.conv != nil {
		s = a.extras().translate.wrap(s, at.conv, &a.client)
	}
	if a.tap.usage != nil {
		s = a.tap.wrap(s, at.conv == nil)
	}
	s = a.commit.wrap(s)
	if at.learn != nil {
		s = a.extras().learn.wrap(s, at.learn)
	}
	if at.probing || at.keepFailures {
		s = a.hold.wrap(s, at.probing, at.keepFailures)
	}
	return s
}

// started reports whether the client's answer is decided: a target's answer passed the hold
// (whatever a sink still holds of it), or the relay answered itself. The request may then go
// to no other target or model.
func (a *answer) started() bool { return a.commit.done || a.client.wrote }

// expire is the request timeout's side of the race: true means nothing was sent and nothing
// will be, so the caller may answer 504.
func (a *answer) expire() bool { return a.commit.expire() }

// settle ends an attempt on what its target returned: a target that failed has not answered
// (what the hold kept of it goes); a failure the hold kept becomes the request's kept answer
// (errHeld: the request may move on); anything else is the answer, completed.
func (a *answer) settle(out Sink, conv *conversion, err error) error {
	if err != nil {
		a.hold.drop()
		return err
	}
	if k := a.hold.take(); k != nil {
		k.conv, k.where = conv, a.where
		a.kept = k
		return errHeld
	}
	return out.End()
}

// replay writes a held answer as the client's answer, through the translation it was to go
// through.
func (a *answer) replay(k *heldAnswer) error {
	out := a.compose(attemptPlan{conv: k.conv})
	body, err := out.Head(k.status, k.header, int64(len(k.body)))
	if err != nil {
		return err
	}
	if err := body.Chunk(k.body, false); err != nil {
		return err
	}
	return out.End()
}

// usage is what the answer reported using (nothing unless a successful answer was followed);
// it ends the tap's reading.
func (a *answer) usage() usage.Counts { return a.tap.counts() }

// isEventStream reports whether headers announce a server-sent-event stream.
func isEventStream(h http.Header) bool {
	return strings.HasPrefix(field(h, "Content-Type"), "text/event-stream")
}
