// Package demo is a model server without a model. It answers OpenAI (chat completions,
// completions) and Anthropic (messages, count_tokens) requests for one model, "demo", with a
// short answer that depends only on the prompt, streamed a word at a time at the pace of a
// small model, with usage, in each API's own framing and error shapes.
//
// `modelrelay-server --demo` puts it behind the relay as an ordinary static backend, so that a
// fresh install answers its first request; `modelrelay-bench fake-upstream` serves it alone,
// to try a worker daemon without a GPU. It asks for no credentials.
package demo

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"modelrelay/relay/rawjson"
)

// DefaultModel is the model a Server serves unless Options.Model names another.
const DefaultModel = "demo"

// Defaults of Options: a small model on a shared GPU takes about this long to read a short
// prompt and to produce each word after it.
const (
	DefaultFirstToken   = 100 * time.Millisecond
	DefaultPerToken     = 20 * time.Millisecond
	DefaultWriteTimeout = 10 * time.Second
)

// maxBody bounds a request body: a demo has no use for a long prompt, and must not hold one.
const maxBody = 4 << 20

// Options shape a Server. Zero values take the defaults; a negative duration means none.
type Options struct {
	Model        string        // the one model served; "" = DefaultModel
	FirstToken   time.Duration // before the first token: the prompt's prefill
	PerToken     time.Duration // between tokens
	WriteTimeout time.Duration // each write of an answer must finish within this
	// Speaks limits the API families served, as model servers that speak one do: "openai"
	// (chat completions and completions) or "anthropic" (messages); "" = both. The other
	// family's paths answer 404, which is how the relay finds out.
	Speaks string
}

func (o *Options) fill() {
	if o.Model == "" {
		o.Model = DefaultModel
	}
	o.FirstToken = orDefault(o.FirstToken, DefaultFirstToken)
	o.PerToken = orDefault(o.PerToken, DefaultPerToken)
	o.WriteTimeout = orDefault(o.WriteTimeout, DefaultWriteTimeout)
}

func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// Server is the demo model server, an http.Handler. It keeps no state between requests but
// a counter for answer ids, so one Server may serve any number of clients at once.
type Server struct {
	opts Options
	mux  *http.ServeMux
	seq  atomic.Uint64
}

// New returns a Server for opts.
func New(opts Options) *Server {
	opts.fill()
	s := &Server{opts: opts, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /v1/models", s.handleModels)
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	if opts.Speaks != "anthropic" {
		s.mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
		s.mux.HandleFunc("POST /v1/completions", s.handleCompletions)
	}
	if opts.Speaks != "openai" {
		s.mux.HandleFunc("POST /v1/messages", s.handleMessages)
		s.mux.HandleFunc("POST /v1/messages/count_tokens", s.handleCountTokens)
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		openAI.fail(w, notFound("no route "+r.Method+" "+r.URL.Path))
	})
	return s
}

// Model is the name of the model s serves.
func (s *Server) Model() string { return s.opts.Model }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// handleModels lists the model in a shape both families' SDKs read: OpenAI's list (object,
// data[].id, owned_by) with Anthropic's members (type, display_name, created_at, has_more)
// beside it, since both serve the list on the same path.
func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		Type        string `json:"type"`
		DisplayName string `json:"display_name"`
		Created     int64  `json:"created"`
		CreatedAt   string `json:"created_at"`
		OwnedBy     string `json:"owned_by"`
	}
	m := model{ID: s.opts.Model, Object: "model", Type: "model", DisplayName: s.opts.Model,
		CreatedAt: time.Unix(0, 0).UTC().Format(time.RFC3339), OwnedBy: "modelrelay"}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []model{m},
		"has_more": false, "first_id": m.ID, "last_id": m.ID})
}

// decode reads a request body into v and checks the model: the errors a client can cause
// before anything is generated. A body that does not decode is told what is wrong in the
// API's terms ("messages must be an array"), not in encoding/json's, which names Go types.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v *request) *apiError {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
		return &apiError{status: http.StatusRequestEntityTooLarge, msg: "request body is larger than 4 MiB"}
	}
	if err != nil {
		return badRequest("request body could not be read")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return badRequest(rawjson.Explain(raw, err))
	}
	switch v.Model {
	case "":
		return badRequest("model: required")
	case s.opts.Model:
		return nil
	}
	return &apiError{status: http.StatusNotFound, code: "model_not_found",
		msg: "model " + quote(v.Model) + " does not exist; this server serves " + quote(s.opts.Model)}
}

// apiError is an answer the client caused; each dialect renders it in its own shape.
type apiError struct {
	status int
	msg    string
	code   string // OpenAI's error code, "" = none
}

func badRequest(msg string) *apiError { return &apiError{status: http.StatusBadRequest, msg: msg} }
func notFound(msg string) *apiError   { return &apiError{status: http.StatusNotFound, msg: msg} }

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only our own types get here
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
