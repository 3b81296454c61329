package relay

import (
	"errors"
	"log/slog"
	"net/http"
	"runtime"
	"strings"

	"modelrelay/relay/endpoint"
	"modelrelay/relay/translate"
)

// This file joins the relay to package translate: how a request is dressed for a target of the
// other API family (the endpoint table names each call's counterpart there), and how the
// answer is turned back into the client's family on its way out (through the translate sink).

// translatedHeader names the translation on every translated answer, client's family first.
const translatedHeader = "X-Modelrelay-Translated"

// anthropicVersion is sent to Anthropic targets when the client (speaking OpenAI) sent none.
const anthropicVersion = "2023-06-01"

// maxTranslatedBody bounds a non-streamed answer held for translation (a JSON answer must be
// whole before it can be mapped); streams are translated event by event instead.
const maxTranslatedBody = 32 << 20

// maxErrorBody bounds the part of an error answer read for its message.
const maxErrorBody = 64 << 10

// wire is what a target receives of a request: its path, body, headers and API family; for a
// translated one also what mapping its answer back needs.
type wire struct {
	path    string
	body    []byte
	header  http.Header
	dialect Dialect
	meta    translate.Request
	// responses is what a Responses call mapped to chat needs of its answer (nil for others).
	responses *translate.ResponsesRequest
	// giveBack returns a translated body's charge to the body budget (nil: none).
	giveBack func()
}

// dress makes req what a target receives: translated into family via (for a target that does
// not speak the client's), or as the client sent it. A translation is built once and kept for
// requeues and replays, until a target needs it in another family.
func (s *Server) dress(req *Request, translated bool, via Dialect) error {
	if !translated && req.native == nil {
		return nil // never translated: req is as the client sent it
	}
	if req.native == nil {
		req.native = &wire{path: req.Path, body: req.Body, header: req.Header, dialect: req.Dialect}
	}
	w := req.native
	if translated {
		if req.foreign != nil && req.foreign.dialect != via {
			req.dropForeign()
		}
		if req.foreign == nil {
			f, err := s.chargedForeignWire(req, via)
			if err != nil {
				return err
			}
			req.foreign = f
		}
		w = req.foreign
	}
	req.Path, req.Body, req.Header = w.path, w.body, w.header
	req.translated = translated
	return nil
}

// sentAs is the API family req is dressed in: the client's, or its translation's.
func (req *Request) sentAs() Dialect {
	if req.translated {
		return req.foreign.dialect
	}
	return req.Dialect
}

// nativePath is the path as the client sent it.
func (req *Request) nativePath() string {
	if req.native != nil {
		return req.native.path
	}
	return req.Path
}

// collectBefore is the size of a client's body from which a translation first runs the
// garbage collector. Reading a large body leaves its smaller buffers behind (each growth
// doubles the last); collected before the translation allocates its copy, their pages are
// reused for it instead of joining it in memory. Measured on 29 MB bodies: peak RSS 2.1 times
// the body, where it was 2.1 or 3.1 times as the collector happened to run. Bodies this large
// are rare, and their translation costs tens of milliseconds already.
const collectBefore = 4 << 20

// chargedForeignWire is foreignWire charged to the body budget for as long as req holds it
// (see dropForeign). A translated body is the relay's own copy, kept beside the client's for
// the request's life (requeues and replays send it again), so it counts as a body held: when
// the budget is spent the request is refused (503, Retry-After) instead of translated. The
// budget is taken before the work, for as much as the client's body (a translation writes
// about what it reads), then set to what the translation holds.
func (s *Server) chargedForeignWire(req *Request, via Dialect) (*wire, error) {
	estimate := int64(len(req.native.body))
	if !s.bodyBudget.take(estimate) {
		s.metrics.bodyErrors.WithLabelValues("over_budget").Inc()
		return nil, errBodyBudget
	}
	if estimate >= collectBefore {
		runtime.GC()
	}
	w, err := s.foreignWire(req, via)
	if err != nil {
		s.bodyBudget.give(estimate)
		return nil, err
	}
	held := int64(cap(w.body))
	s.bodyBudget.held.Add(held - estimate) // the work is done: count what it holds, over the limit or not
	w.giveBack = func() { s.bodyBudget.give(held) }
	return w, nil
}

// dropForeign lets go of req's translation, and of its charge to the body budget.
func (req *Request) dropForeign() {
	if req.foreign != nil && req.foreign.giveBack != nil {
		req.foreign.giveBack()
	}
	req.foreign = nil
}

// foreignWire translates req into family via (req.native is set). The query string is dropped
// (it belonged to the client's family) and so are the client family's own headers; the
// client's credential moves to where the target's family carries it.
func (s *Server) foreignWire(req *Request, via Dialect) (*wire, error) {
	n := req.native
	w := wire{path: req.endpoint.Counterpart, dialect: via}
	var err error
	switch req.endpoint.Route {
	case endpoint.RouteMessages:
		w.body, w.meta, err = translate.AnthropicToOpenAI(n.body)
	case endpoint.RouteCountTokens:
		w.body, err = translate.TokenizeRequest(n.body)
	case endpoint.RouteChat:
		w.body, w.meta, err = translate.OpenAIToAnthropic(n.body, s.opts.DefaultMaxTokens)
		// The body may ask for usage because the relay asked (for its accounting): the
		// translated stream carries a usage chunk only if the client asked.
		if req.askedUsage {
			w.meta.IncludeUsage = false
		}
	case endpoint.RouteResponses:
		var rr translate.ResponsesRequest
		w.body, rr, err = translate.ResponsesToChat(n.body, s.opts.Reasoning(req.Model))
		w.meta, w.responses = rr.Request, &rr
		if err == nil && via == Anthropic {
			// A target of Messages alone: the chat call is translated once more.
			chat, _ := endpoint.For(w.path)
			w.path = chat.Counterpart
			w.body, _, err = translate.OpenAIToAnthropic(w.body, s.opts.DefaultMaxTokens)
		}
	}
	switch {
	case errors.Is(err, translate.ErrPreviousResponse):
		return nil, errPreviousResponse
	case errors.Is(err, translate.ErrTooLarge):
		return nil, &relayError{status: http.StatusRequestEntityTooLarge, message: err.Error(), code: "request_too_large"}
	case err != nil:
		return nil, &relayError{status: http.StatusBadRequest, message: err.Error(), code: "invalid_request_error"}
	}
	h := n.header.Clone()
	// The relay reads the answer: it must come unencoded, and the body's length has changed.
	h.Del("Accept-Encoding")
	h.Del("Content-Length")
	switch {
	case req.Dialect == Anthropic:
		if key := h.Get("X-Api-Key"); key != "" && h.Get("Authorization") == "" {
			h.Set("Authorization", "Bearer "+key)
		}
		for _, name := range []string{"X-Api-Key", "Anthropic-Version", "Anthropic-Beta"} {
			h.Del(name)
		}
	case via == Anthropic:
		if auth := h.Get("Authorization"); h.Get("X-Api-Key") == "" && strings.HasPrefix(auth, "Bearer ") {
			h.Set("X-Api-Key", strings.TrimPrefix(auth, "Bearer "))
			h.Del("Authorization")
		}
		if h.Get("Anthropic-Version") == "" {
			h.Set("Anthropic-Version", anthropicVersion)
		}
		h.Del("Openai-Organization")
		h.Del("Openai-Project")
	}
	h.Set("Content-Type", "application/json")
	w.header = h
	return &w, nil
}

// conversion turns one target's answer, in another family, into the client's family. A
// stream is translated as its bytes arrive for a client that asked for one; a JSON answer is
// held (bounded) until it is whole, and so is a stream the client did not ask for, gathered
// into the answer the target should have sent (a client that did not ask for a stream cannot
// read one, and nothing reaches it until the answer is whole: a stream that fails on the way
// gets a 502 in the client's family, never a 200 with an error event).
type conversion struct {
	log            *slog.Logger
	id             string // the request's, for log lines
	route          endpoint.Route
	client, target Dialect
	meta           translate.Request
	streaming      bool                 // the client asked for a stream
	stream         translate.Stream     // set once a 2xx event stream started
	heldAnswer                          // an answer that is not a stream, held until it is whole
	collect        *translate.Collector // gathers a held 2xx event stream into a whole answer
	native         []byte               // the client's own request (count_tokens estimates from it)
	// A Responses client: what its answer is built from, the stream that builds it, and who
	// is given the answer once it completed (the responses store; nil: nobody).
	response  *translate.ResponseMeta
	responses *translate.ResponsesStream
	completed func(id string, response []byte)
}

// newConversion converts the answer to req, dressed translated.
func newConversion(req *Request, log *slog.Logger) *conversion {
	c := &conversion{log: log, id: req.ID, route: req.endpoint.Route, client: req.Dialect, target: req.foreign.dialect,
		meta: req.foreign.meta, streaming: req.Streaming && req.endpoint.Route != endpoint.RouteCountTokens,
		native: req.native.body}
	if rr := req.foreign.responses; rr != nil {
		c.response = &translate.ResponseMeta{ID: translate.NewResponseID(), Model: rr.Model,
			CreatedAt: req.arrival.Unix(), Request: req.responses.asSent, IncludeEncrypted: rr.IncludeEncrypted}
		if rr.Store {
			c.completed = req.responses.keep
		}
	}
	return c
}

// name is the x-modelrelay-translated value: the client's family first.
func (c *conversion) name() string { return c.client.String() + "->" + c.target.String() }

func (c *conversion) startStream() {
	switch c.client {
	case Anthropic:
		c.stream = translate.NewAnthropicStream(c.meta.Model)
	case OpenAI:
		c.stream = translate.NewOpenAIStream(c.meta.Model, c.meta.IncludeUsage)
	default:
		c.responses = translate.NewResponsesStream(*c.response)
		c.stream = c.responses
		if c.target == Anthropic {
			c.stream = translate.Chain(translate.NewOpenAIStream(c.meta.Model, true), c.responses)
		}
	}
}

// finishStream is the end of a translated stream the target completed: a Responses answer
// that completed is given on.
func (c *conversion) finishStream() {
	if c.responses != nil && c.completed != nil {
		if r := c.responses.Response(); r != nil {
			c.completed(c.response.ID, r)
		}
	}
}

// refused reports whether the translated request was refused as the wrong family too.
func (c *conversion) refused() bool { return c.stream == nil && refusesDialect(c.status) }

// hold starts holding an answer that is not translated as a stream; a 2xx event stream is
// gathered into a whole answer (count_tokens has none to gather: its answer is estimated).
func (c *conversion) hold(status int, h http.Header, eventStream bool) {
	c.status, c.header = status, h
	if eventStream && success(status) && c.route != endpoint.RouteCountTokens {
		c.collect = translate.NewCollector(c.target == Anthropic, maxTranslatedBody)
	}
}

// keep holds more of the answer: a whole one up to maxTranslatedBody, an error's first
// maxErrorBody bytes (enough for its message). An error means a gathered stream broke (an
// event over the event bound, an answer over maxTranslatedBody): the answer is that 502.
func (c *conversion) keep(b []byte) error {
	if c.collect != nil {
		if err := c.collect.Write(b); err != nil {
			return errUpstream(err.Error())
		}
		return nil
	}
	limit := maxTranslatedBody
	if !success(c.status) {
		limit = maxErrorBody
	}
	c.add(b, limit)
	return nil
}

// answer is the client's answer for a held one: status, body and whether the body is the
// marked token estimate.
func (c *conversion) answer() (status int, body []byte, estimated bool, err error) {
	ok := success(c.status)
	if c.route == endpoint.RouteCountTokens {
		// /tokenize counted, or the target has none (or answered nonsense): estimate.
		if n, counted := translate.TokenizeCount(c.body); ok && !c.over && counted {
			return http.StatusOK, translate.CountTokensAnswer(n), false, nil
		}
		n, err := translate.EstimateTokens(c.native)
		if err != nil {
			return 0, nil, false, err
		}
		return http.StatusOK, translate.CountTokensAnswer(n), true, nil
	}
	if !ok {
		return c.status, c.errorBody(), false, nil
	}
	if c.collect != nil {
		// The target's error event, or a stream that ended early: its message is the 502's.
		if c.body, err = c.collect.Answer(); err != nil {
			return 0, nil, false, errUpstream(err.Error())
		}
	}
	if c.over {
		return 0, nil, false, errUpstream("answer too large to translate")
	}
	switch c.client {
	case Anthropic:
		var bad []translate.Unparseable
		body, _, bad, err = translate.OpenAIResponseToAnthropic(c.body, c.meta.Model)
		for _, u := range bad {
			c.log.Warn("tool call arguments are not JSON; the client got input {}", "request_id", c.id, "tool", u.Tool,
				"arguments", u.Arguments[:min(len(u.Arguments), 512)])
		}
	case OpenAI:
		body, _, err = translate.AnthropicResponseToOpenAI(c.body, c.meta.Model)
	default:
		chat := c.body
		if c.target == Anthropic {
			chat, _, err = translate.AnthropicResponseToOpenAI(c.body, c.meta.Model)
		}
		if err == nil {
			body, _, err = translate.ChatResponseToResponses(chat, *c.response)
		}
		if err == nil && c.completed != nil {
			c.completed(c.response.ID, body)
		}
	}
	if err != nil {
		return 0, nil, false, errUpstream("the model server's answer could not be translated")
	}
	return c.status, body, false, nil
}

// errorBody is a target's held error answer in the client's family; a Responses client's 429
// says when to try again (Codex reads it from the message).
func (c *conversion) errorBody() []byte {
	if c.client == Responses {
		return translate.ResponsesErrorBody(c.status, c.body, retryAfterSeconds(c.header))
	}
	return translate.ErrorBody(c.status, c.body, c.client == Anthropic)
}

// copyRewrittenHead copies the end-to-end headers of an answer the relay rewrites (translated,
// or given x_pool_meta) that still hold: not its length, type or encoding, which the relay
// sets itself. name is the translation, "" for none.
func copyRewrittenHead(dst, src http.Header, name string) {
	copyEndToEnd(dst, src, func(k string) bool {
		return k == "Content-Length" || k == "Content-Type" || k == "Content-Encoding"
	})
	if name != "" {
		dst.Set(translatedHeader, name)
	}
}

func success(status int) bool { return status >= 200 && status <= 299 }
