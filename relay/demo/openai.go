package demo

import (
	"cmp"
	"fmt"
	"net/http"
	"time"
)

// The OpenAI side: chat completions and legacy completions, whole or streamed as
// `data: {chunk}` events ending in `data: [DONE]`, with the usage chunk (choices: []) when
// stream_options.include_usage asks for it.

type openAIObject struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Choices []openAIChoice `json:"choices"`
	Usage   *openAIUsage   `json:"usage,omitempty"`
}

type openAIChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"` // chat, whole
	Delta        *chatMessage `json:"delta,omitempty"`   // chat, streamed
	Text         *string      `json:"text,omitempty"`    // completions
	Logprobs     any          `json:"logprobs"`          // always null
	FinishReason *string      `json:"finish_reason"`     // null until the last chunk
}

type chatMessage struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type openAIUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req request
	if e := s.decode(w, r, &req); e != nil {
		openAI.fail(w, e)
		return
	}
	p, pe := chatPrompt(req.Messages, nil)
	limit, le := openAILimit(req)
	if e := cmp.Or(pe, le); e != nil {
		openAI.fail(w, e)
		return
	}
	s.answerOpenAI(w, r, req, compose(p, limit), true)
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req request
	if e := s.decode(w, r, &req); e != nil {
		openAI.fail(w, e)
		return
	}
	p, pe := completionPrompt(req.Prompt)
	limit, le := openAILimit(req)
	if e := cmp.Or(pe, le); e != nil {
		openAI.fail(w, e)
		return
	}
	s.answerOpenAI(w, r, req, compose(p, limit), false)
}

// openAILimit is max_completion_tokens, or the older max_tokens; 0 = none.
func openAILimit(req request) (int, *apiError) {
	if req.MaxCompletionTokens != nil {
		return maxTokens("max_completion_tokens", req.MaxCompletionTokens)
	}
	return maxTokens("max_tokens", req.MaxTokens)
}

// openAIAnswer is one answer in OpenAI's shapes: the envelope every chunk of it repeats,
// and how it ends.
type openAIAnswer struct {
	base   openAIObject
	chat   bool
	finish string
	usage  *openAIUsage
}

func (s *Server) answerOpenAI(w http.ResponseWriter, r *http.Request, req request, a answer, chat bool) {
	o := openAIAnswer{chat: chat, finish: "stop",
		base:  openAIObject{Object: "text_completion", Created: time.Now().Unix(), Model: s.opts.Model},
		usage: &openAIUsage{PromptTokens: a.input, CompletionTokens: a.output(), TotalTokens: a.input + a.output()}}
	n := s.seq.Add(1)
	o.base.ID = fmt.Sprintf("cmpl-demo-%d", n)
	if chat {
		o.base.ID, o.base.Object = fmt.Sprintf("chatcmpl-demo-%d", n), "chat.completion"
	}
	if a.truncated {
		o.finish = "length"
	}
	wr := s.writer(w, r)
	if !req.Stream {
		if wr.whole(a) {
			wr.json(o.whole(a))
		}
		return
	}
	if chat {
		o.base.Object = "chat.completion.chunk"
	}
	o.stream(wr, a, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
}

func (o openAIAnswer) whole(a answer) openAIObject {
	text := a.text()
	choice := openAIChoice{FinishReason: &o.finish, Text: &text}
	if o.chat {
		choice = openAIChoice{FinishReason: &o.finish, Message: &chatMessage{Role: "assistant", Content: &text}}
	}
	out := o.base
	out.Choices, out.Usage = []openAIChoice{choice}, o.usage
	return out
}

// chunk is one event of the stream: a piece of text, or (text nil, finish set) the chunk that
// ends a chat stream.
func (o openAIAnswer) chunk(text, finish *string) openAIObject {
	choice := openAIChoice{Text: text, FinishReason: finish}
	if o.chat {
		choice = openAIChoice{Delta: &chatMessage{Content: text}, FinishReason: finish}
	}
	out := o.base
	out.Choices = []openAIChoice{choice}
	return out
}

// stream sends a chat stream's opening chunk (the role, empty content), a chunk per token,
// one with the finish reason, the usage chunk when asked for, then [DONE].
func (o openAIAnswer) stream(wr *writer, a answer, includeUsage bool) {
	if !wr.token() {
		return
	}
	wr.startStream()
	empty := ""
	if o.chat {
		opening := o.chunk(&empty, nil)
		opening.Choices[0].Delta.Role = "assistant"
		if !wr.event("", opening) {
			return
		}
	}
	for i, tok := range a.tokens {
		if i > 0 && !wr.token() {
			return
		}
		if !wr.event("", o.chunk(&tok, nil)) {
			return
		}
	}
	last := o.chunk(nil, &o.finish) // a chat delta is then {}
	if !o.chat {
		last = o.chunk(&empty, &o.finish) // a completion chunk always has its text
	}
	if !wr.event("", last) {
		return
	}
	if includeUsage {
		final := o.base
		final.Choices, final.Usage = []openAIChoice{}, o.usage
		if !wr.event("", final) {
			return
		}
	}
	wr.raw("", []byte("[DONE]"))
}
