package relay

import (
	"context"
	"net/http"
	"strings"
	"time"

	"modelrelay/relay/keys"
	"modelrelay/relay/rawjson"
	"modelrelay/relay/responses"
	"modelrelay/relay/translate"
)

// This file is the Responses API's state, for the calls the relay translates: a response whose
// request asked to be stored (store, default true) is kept once its answer completed, a later
// call that names it in previous_response_id continues its conversation, and GET and DELETE
// /v1/responses/{id} read and remove it. A stored response belongs to whoever created it (the
// client key, or the circuit its call came through): anyone else is told it does not exist.
//
// A target that speaks the Responses API itself keeps its own state: a previous_response_id
// the relay does not hold reaches it untouched, and a call that must be translated gets 404
// previous_response_not_found instead of a conversation silently cut short.

// responsesRetention bounds how long after its answer ended a record is written: the store
// call runs on the request's goroutine, after the client has the whole answer.
const responsesRetention = 2 * time.Second

// owner names who may read a stored response: the client key, else the circuit the call came
// through, else anyone without a key ("").
func owner(key *keys.Key, at Placement) string {
	switch {
	case key != nil:
		return "key:" + key.ID
	case at.Pool != "":
		return "pool:" + at.Pool
	}
	return ""
}

// withHistory is the Responses call body with the conversation it continues in front of its
// input, when it names (in previous_response_id, where its view says) a previous response this
// relay holds for who; nil when the body stays as it is. A name the relay does not hold stays in
// the body (a target that speaks the API may hold it); one held for someone else is 404; a
// store that does not answer is 503.
func (s *Server) withHistory(ctx context.Context, body []byte, v *bodyView, who string) ([]byte, error) {
	id := rawjson.String(body[v.previous.from:v.previous.to])
	if id == "" {
		return nil, nil // absent, or not a string: the mapping says what is wrong with it
	}
	rec, found, err := s.responses.Get(ctx, id)
	if err != nil {
		// Not "not found": the conversation may well exist. The client may try again.
		s.log.Warn("responses store unavailable; previous_response_id not read", "err", err)
		return nil, errResponsesStoreDown
	}
	if !found {
		return nil, nil
	}
	if rec.Owner != who {
		return nil, errPreviousResponse
	}
	out, err := translate.WithHistory(body, rec.Items)
	if err != nil {
		return nil, badRequest(err.Error())
	}
	return out, nil
}

// responsesCall is what a Responses call carries besides its body.
type responsesCall struct {
	// asSent is the body as the client sent it; the body sent on has the stored conversation
	// in front of its input. Its answer echoes the call as sent.
	asSent []byte
	// keep keeps the call's answer once it completed (when the relay translated it and the
	// call asked to store it).
	keep func(id string, response []byte)
}

// keepResponse keeps the answer to req, a Responses call, for who: the response, and the
// conversation a later call continues (req's input, its stored conversation in front, then
// the response's output).
func (s *Server) keepResponse(req *Request, who string) func(id string, response []byte) {
	return func(id string, response []byte) {
		items, err := translate.ConversationItems(req.native.body, response)
		if err != nil {
			return // the mapping read the input already: nothing to continue from
		}
		// The client has its whole answer: it is stored though the client leave now.
		ctx, cancel := context.WithTimeout(context.Background(), responsesRetention)
		defer cancel()
		if err := s.responses.Put(ctx, id, &responses.Record{Owner: who, Response: response, Items: items}); err != nil {
			s.log.Warn("response not stored: responses store unavailable", "request_id", req.ID, "err", err)
		}
	}
}

// StoredResponsePath reports whether r reads or removes a stored response (GET or DELETE
// /v1/responses/{id}).
func StoredResponsePath(r *http.Request) bool {
	id, ok := strings.CutPrefix(r.URL.Path, "/v1/responses/")
	return ok && id != "" && !strings.Contains(id, "/") && (r.Method == http.MethodGet || r.Method == http.MethodDelete)
}

// ServeStoredResponse answers GET or DELETE /v1/responses/{id} from the responses store, for
// who may see it at: the client key (checked here, as on the inference routes), or the circuit
// when at.OwnAuth says the caller passed the circuit's checks. On a circuit it answers only
// what the relay holds for that circuit and reports false otherwise: the circuit's model
// server may hold the id itself, and the call passes through to it.
func (s *Server) ServeStoredResponse(w http.ResponseWriter, r *http.Request, at Placement) (served bool) {
	if s.crossOrigin(w, r, DialectErrors(Responses)) {
		return true
	}
	var key *keys.Key
	if !at.OwnAuth && (s.opts.RequireAPIKeys || presentsKey(r.Header)) {
		if key = s.authorize(w, r, Responses, time.Now()); key == nil {
			return true
		}
	}
	id := strings.TrimPrefix(r.URL.Path, "/v1/responses/")
	rec, found, err := s.responses.Get(r.Context(), id)
	if err != nil {
		s.log.Warn("responses store unavailable", "err", err)
		writeError(w, Responses, errResponsesStoreDown)
		return true
	}
	if !found || rec.Owner != owner(key, at) {
		if at.OwnAuth {
			return false
		}
		writeError(w, Responses, &relayError{status: http.StatusNotFound, code: "not_found",
			message: "No response found with id '" + id + "'."})
		return true
	}
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		w.Write(rec.Response)
		return true
	}
	if _, err := s.responses.Delete(r.Context(), id); err != nil {
		writeError(w, Responses, errResponsesStoreDown)
		return true
	}
	WriteJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response", "deleted": true})
	return true
}

var errResponsesStoreDown = &relayError{status: http.StatusServiceUnavailable, code: "store_unavailable",
	message: "the responses store is unavailable; try again"}
