package translate

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/valyala/fastjson"

	"modelrelay/relay/endpoint"
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
	parser  fastjson.Parser // reused: parsing a chunk allocates nothing once warm
	val     textBuf         // one delta's JSON text
}

// NewAnthropicStream translates an OpenAI chat completion stream for an Anthropic client that
// asked for model.
func NewAnthropicStream(model string) Stream {
	m, _ := json.Marshal(model)
	return &anthropicStream{model: m}
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
	c, err := s.parser.ParseBytes(data)
	if err != nil || c.Type() != fastjson.TypeObject {
		return nil // not a chunk (a stray line); nothing to relay
	}
	if e := c.Get("error"); e != nil && e.Type() != fastjson.TypeNull {
		msg := e.GetStringBytes("message")
		if e.Type() == fastjson.TypeString {
			msg, _ = e.StringBytes()
		}
		s.fail(string(msg))
		return nil
	}
	s.start(c.GetStringBytes("id"))
	if u := c.Get("usage"); u != nil && u.Type() == fastjson.TypeObject {
		s.usage = Usage{u.GetInt("prompt_tokens"), u.GetInt("completion_tokens")}
	}
	for _, ch := range c.GetArray("choices") {
		if d := ch.Get("delta"); d != nil {
			if t := s.val.text(d.Get("reasoning_content")); t != nil {
				s.delta(blockThinking, -1, nil, nil, `"thinking_delta","thinking":`, t)
			}
			if t := s.val.text(d.Get("reasoning")); t != nil {
				s.delta(blockThinking, -1, nil, nil, `"thinking_delta","thinking":`, t)
			}
			if t := s.val.text(d.Get("content")); t != nil {
				s.delta(blockText, -1, nil, nil, `"text_delta","text":`, t)
			}
			for _, tc := range d.GetArray("tool_calls") {
				s.delta(blockTool, tc.GetInt("index"), tc.GetStringBytes("id"), tc.GetStringBytes("function", "name"),
					`"input_json_delta","partial_json":`, s.val.text(tc.Get("function", "arguments")))
			}
		}
		if finish := ch.GetStringBytes("finish_reason"); len(finish) > 0 {
			s.stop = stopReason(string(finish))
			s.closeBlock()
		}
	}
	return nil
}

// textBuf turns parsed string values back into JSON text, reusing one buffer.
type textBuf []byte

// text is v as JSON text when it is a non-empty string, else nil; valid until the next call.
func (b *textBuf) text(v *fastjson.Value) []byte {
	if v == nil || v.Type() != fastjson.TypeString {
		return nil
	}
	s, _ := v.StringBytes()
	if len(s) == 0 {
		return nil
	}
	// Quoted by JSON's rules (fastjson's own quoting writes control characters as \x01,
	// which is not JSON), invalid UTF-8 replaced.
	*b = appendQuoted((*b)[:0], s)
	return *b
}

// start sends message_start before anything else.
func (s *anthropicStream) start(id []byte) {
	if s.started {
		return
	}
	s.started = true
	idJSON, _ := json.Marshal("msg_" + string(id))
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
func (s *anthropicStream) delta(kind blockKind, tool int, id, name []byte, head string, value []byte) {
	if s.open != kind || (kind == blockTool && s.tool != tool) {
		s.closeBlock()
		s.openBlock(kind, tool, id, name)
	}
	if value == nil {
		return // a tool call's first delta often carries only its id and name
	}
	s.out = append(s.out, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	s.out = strconv.AppendInt(s.out, int64(s.blocks-1), 10)
	s.out = append(s.out, `,"delta":{"type":`...)
	s.out = append(s.out, head...)
	s.out = append(s.out, value...)
	s.out = append(s.out, "}}\n\n"...)
}

func (s *anthropicStream) openBlock(kind blockKind, tool int, id, name []byte) {
	s.out = append(s.out, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
	s.out = strconv.AppendInt(s.out, int64(s.blocks), 10)
	switch kind {
	case blockText:
		s.out = append(s.out, `,"content_block":{"type":"text","text":""}}`...)
	case blockThinking:
		s.out = append(s.out, `,"content_block":{"type":"thinking","thinking":""}}`...)
	case blockTool:
		if len(id) == 0 {
			id = strconv.AppendInt([]byte("toolu_"), int64(s.blocks), 10)
		}
		idJSON, _ := json.Marshal(string(id))
		nameJSON, _ := json.Marshal(string(name))
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
	s.start(nil)
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

// fail ends the stream with an error event, typed as an upstream failure (a 502).
func (s *anthropicStream) fail(message string) {
	if s.done {
		return
	}
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{
		"type": endpoint.Anthropic.ErrorType(http.StatusBadGateway), "message": message}})
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
