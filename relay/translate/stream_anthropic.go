package translate

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Stream translates one server-sent-event stream as its bytes arrive.
type Stream interface {
	// Write takes the next bytes from the target and returns the bytes to send the client
	// (possibly none), valid until the next call. An error means the stream is broken
	// (an event over MaxEventBytes); send Fail's bytes and stop.
	Write(p []byte) ([]byte, error)
	// Close is called when the target's stream ended; it returns the closing events the
	// target did not send (or an error event when it ended before the model finished).
	Close() []byte
	// Fail ends the stream with an error event after the target failed.
	Fail(message string) []byte
	// Usage is the token usage the stream reported so far.
	Usage() Usage
}

// blockKind is the kind of the Anthropic content block open in a translated stream.
type blockKind uint8

const (
	blockNone blockKind = iota
	blockText
	blockThinking
	blockTool
)

// anthropicStream turns OpenAI chat.completion.chunk events into Anthropic message events,
// in exactly Anthropic's order: message_start, then per block content_block_start,
// content_block_delta..., content_block_stop, then message_delta and message_stop.
type anthropicStream struct {
	sc      sseScanner
	model   []byte // JSON string
	out     []byte
	started bool
	done    bool
	blocks  int // blocks opened so far (the next block's index)
	open    blockKind
	tool    int // OpenAI index of the open tool call
	stop    string
	usage   Usage
	chunk   openAIChunk
}

// NewAnthropicStream translates an OpenAI chat completion stream for an Anthropic client that
// asked for model.
func NewAnthropicStream(model string) Stream {
	m, _ := json.Marshal(model)
	return &anthropicStream{model: m}
}

type openAIChunk struct {
	ID      string `json:"id"`
	Choices []struct {
		Delta struct {
			Content          json.RawMessage `json:"content"`
			ReasoningContent json.RawMessage `json:"reasoning_content"`
			Reasoning        json.RawMessage `json:"reasoning"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *openAIUsage  `json:"usage"`
	Error *errorPayload `json:"error"`
}

type errorPayload struct {
	Message string `json:"message"`
}

func (s *anthropicStream) Usage() Usage { return s.usage }

func (s *anthropicStream) Write(p []byte) ([]byte, error) {
	s.out = s.out[:0]
	if s.done {
		return nil, nil
	}
	err := s.sc.feed(p, s.event)
	return s.out, err
}

func (s *anthropicStream) event(_, data []byte) error {
	if s.done {
		return nil
	}
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		s.finish()
		return nil
	}
	c := &s.chunk
	*c = openAIChunk{}
	if err := json.Unmarshal(data, c); err != nil {
		return nil // not a chunk (a stray line); nothing to relay
	}
	if c.Error != nil {
		s.fail(c.Error.Message)
		return nil
	}
	s.start(c.ID)
	if c.Usage != nil {
		s.usage = Usage{c.Usage.PromptTokens, c.Usage.CompletionTokens}
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		d := &ch.Delta
		if isText(d.ReasoningContent) {
			s.delta(blockThinking, -1, "", "", `"thinking_delta","thinking":`, d.ReasoningContent)
		}
		if isText(d.Reasoning) {
			s.delta(blockThinking, -1, "", "", `"thinking_delta","thinking":`, d.Reasoning)
		}
		if isText(d.Content) {
			s.delta(blockText, -1, "", "", `"text_delta","text":`, d.Content)
		}
		for _, tc := range d.ToolCalls {
			s.delta(blockTool, tc.Index, tc.ID, tc.Function.Name, `"input_json_delta","partial_json":`, tc.Function.Arguments)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.stop = stopReason(*ch.FinishReason)
			s.closeBlock()
		}
	}
	return nil
}

// isText reports whether raw is a non-empty JSON string.
func isText(raw json.RawMessage) bool {
	return len(raw) > 2 && raw[0] == '"'
}

// start sends message_start before anything else.
func (s *anthropicStream) start(id string) {
	if s.started {
		return
	}
	s.started = true
	idJSON, _ := json.Marshal("msg_" + id)
	s.out = append(s.out, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"...)
	s.out = append(s.out, idJSON...)
	s.out = append(s.out, `,"type":"message","role":"assistant","model":`...)
	s.out = append(s.out, s.model...)
	s.out = append(s.out, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	s.out = strconv.AppendInt(s.out, int64(s.usage.InputTokens), 10)
	s.out = append(s.out, ",\"output_tokens\":0}}}\n\n"...)
}

// delta appends one content_block_delta, opening the block it belongs to first (and closing
// the open one when it is of another kind, or another tool call). value is a JSON string.
func (s *anthropicStream) delta(kind blockKind, tool int, id, name, head string, value json.RawMessage) {
	if s.open != kind || (kind == blockTool && s.tool != tool) {
		s.closeBlock()
		s.openBlock(kind, tool, id, name)
	}
	if !isText(value) {
		return // a tool call's first delta often carries only its id and name
	}
	s.out = append(s.out, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	s.out = strconv.AppendInt(s.out, int64(s.blocks-1), 10)
	s.out = append(s.out, `,"delta":{"type":`...)
	s.out = append(s.out, head...)
	s.out = append(s.out, value...)
	s.out = append(s.out, "}}\n\n"...)
}

func (s *anthropicStream) openBlock(kind blockKind, tool int, id, name string) {
	s.out = append(s.out, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
	s.out = strconv.AppendInt(s.out, int64(s.blocks), 10)
	switch kind {
	case blockText:
		s.out = append(s.out, `,"content_block":{"type":"text","text":""}}`...)
	case blockThinking:
		s.out = append(s.out, `,"content_block":{"type":"thinking","thinking":""}}`...)
	case blockTool:
		if id == "" {
			id = "toolu_" + strconv.Itoa(s.blocks)
		}
		idJSON, _ := json.Marshal(id)
		nameJSON, _ := json.Marshal(name)
		s.out = append(s.out, `,"content_block":{"type":"tool_use","id":`...)
		s.out = append(s.out, idJSON...)
		s.out = append(s.out, `,"name":`...)
		s.out = append(s.out, nameJSON...)
		s.out = append(s.out, `,"input":{}}}`...)
		s.tool = tool
	}
	s.out = append(s.out, "\n\n"...)
	s.open = kind
	s.blocks++
}

func (s *anthropicStream) closeBlock() {
	if s.open == blockNone {
		return
	}
	s.out = append(s.out, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":"...)
	s.out = strconv.AppendInt(s.out, int64(s.blocks-1), 10)
	s.out = append(s.out, "}\n\n"...)
	s.open = blockNone
}

// finish sends the closing events: message_delta (stop reason, usage) and message_stop.
func (s *anthropicStream) finish() {
	s.start("")
	s.closeBlock()
	stop := s.stop
	if stop == "" {
		stop = "end_turn"
	}
	s.out = append(s.out, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\""...)
	s.out = append(s.out, stop...)
	s.out = append(s.out, `","stop_sequence":null},"usage":{`...)
	if s.usage.InputTokens > 0 {
		s.out = append(s.out, `"input_tokens":`...)
		s.out = strconv.AppendInt(s.out, int64(s.usage.InputTokens), 10)
		s.out = append(s.out, ',')
	}
	s.out = append(s.out, `"output_tokens":`...)
	s.out = strconv.AppendInt(s.out, int64(s.usage.OutputTokens), 10)
	s.out = append(s.out, "}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
	s.done = true
}

func (s *anthropicStream) fail(message string) {
	if s.done {
		return
	}
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": "api_error", "message": message}})
	s.out = append(s.out, "event: error\ndata: "...)
	s.out = append(s.out, b...)
	s.out = append(s.out, "\n\n"...)
	s.done = true
}

func (s *anthropicStream) Close() []byte {
	s.out = s.out[:0]
	if !s.done {
		if s.stop != "" {
			s.finish() // the target ended without [DONE] after its finish_reason: complete
		} else {
			s.fail("the model server ended the stream before the answer was complete")
		}
	}
	return s.out
}

func (s *anthropicStream) Fail(message string) []byte {
	s.out = s.out[:0]
	s.fail(message)
	return s.out
}
