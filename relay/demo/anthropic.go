package demo

import (
	"cmp"
	"fmt"
	"net/http"
)

// The Anthropic side: messages, whole or streamed as message_start, content_block_start,
// ping, content_block_delta per token, content_block_stop, message_delta (stop reason and
// usage), message_stop; and count_tokens.

type anthropicMessage struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []textBlock    `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"` // always null: the demo has no stop sequences
	Usage        anthropicUsage `json:"usage"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

type textDelta struct {
	Type string `json:"type"` // text_delta
	Text string `json:"text"`
}

type blockEvent struct {
	Type         string     `json:"type"`
	Index        int        `json:"index"`
	ContentBlock *textBlock `json:"content_block,omitempty"` // content_block_start
	Delta        *textDelta `json:"delta,omitempty"`         // content_block_delta
}

type messageStart struct {
	Type    string           `json:"type"` // message_start
	Message anthropicMessage `json:"message"`
}

type messageDelta struct {
	Type  string `json:"type"` // message_delta
	Delta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	} `json:"delta"`
	Usage anthropicUsage `json:"usage"`
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	var req request
	if e := s.decode(w, r, &req); e != nil {
		anthropic.fail(w, e)
		return
	}
	p, pe := chatPrompt(req.Messages, req.System)
	var required *apiError
	if req.MaxTokens == nil {
		required = badRequest("max_tokens: Field required") // the Messages API has no default
	}
	limit, le := maxTokens("max_tokens", req.MaxTokens)
	if e := cmp.Or(pe, required, le); e != nil {
		anthropic.fail(w, e)
		return
	}
	a := compose(p, limit)
	stop := "end_turn"
	if a.truncated {
		stop = "max_tokens"
	}
	msg := anthropicMessage{ID: fmt.Sprintf("msg_demo_%d", s.seq.Add(1)), Type: "message", Role: "assistant",
		Model: s.opts.Model, Content: []textBlock{{Type: "text", Text: a.text()}}, StopReason: &stop,
		Usage: anthropicUsage{InputTokens: a.input, OutputTokens: a.output()}}
	wr := s.writer(w, r)
	if !req.Stream {
		if wr.whole(a) {
			wr.json(msg)
		}
		return
	}
	streamMessage(wr, msg, a)
}

// streamMessage sends msg as the Messages API streams it, a content_block_delta per token.
func streamMessage(wr *writer, msg anthropicMessage, a answer) {
	if !wr.token() {
		return
	}
	wr.startStream()
	start := msg
	start.Content, start.StopReason = []textBlock{}, nil
	start.Usage.OutputTokens = 1 // what the API reports before the first token
	if !wr.event("message_start", messageStart{Type: "message_start", Message: start}) ||
		!wr.event("content_block_start", blockEvent{Type: "content_block_start", ContentBlock: &textBlock{Type: "text"}}) ||
		!wr.event("ping", map[string]string{"type": "ping"}) {
		return
	}
	for i, tok := range a.tokens {
		if i > 0 && !wr.token() {
			return
		}
		if !wr.event("content_block_delta", blockEvent{Type: "content_block_delta", Delta: &textDelta{Type: "text_delta", Text: tok}}) {
			return
		}
	}
	end := messageDelta{Type: "message_delta", Usage: msg.Usage}
	end.Delta.StopReason = *msg.StopReason
	if wr.event("content_block_stop", blockEvent{Type: "content_block_stop"}) && wr.event("message_delta", end) {
		wr.event("message_stop", map[string]string{"type": "message_stop"})
	}
}

// handleCountTokens answers what the messages would cost as input, without generating.
func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) {
	var req request
	if e := s.decode(w, r, &req); e != nil {
		anthropic.fail(w, e)
		return
	}
	p, e := chatPrompt(req.Messages, req.System)
	if e != nil {
		anthropic.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": p.tokens})
}
