package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"

	"github.com/valyala/fastjson"
)

var (
	errAnswerTooLarge = errors.New("answer too large to translate")
	errCutShort       = errors.New("the model server ended the stream before the answer was complete")
)

// Collector gathers a target's event stream into the whole answer its API family gives when
// not streaming: for a client that asked for a whole answer from a target that streamed
// anyway. The answer is then translated like any whole one. It keeps the answer (text, tool
// calls, usage), not the stream: memory grows with the answer's text, up to the bound it was
// given, and one event is bounded by MaxEventBytes as in a translated stream.
type Collector struct {
	sc        sseScanner
	parser    fastjson.Parser
	anthropic bool // Anthropic message events, else OpenAI chat completion chunks
	limit     int
	size      int   // bytes of the answer kept so far
	err       error // why the stream cannot become an answer (sticky)
	failure   string
	failed    bool // the target sent an error event (failure is its message)
	complete  bool // the stream said the answer is whole (a stop reason, [DONE] or message_stop)
	done      bool // nothing more belongs to the answer ([DONE], message_stop or an error)
	id        string
	blocks    []collected
	byIndex   map[int]int // the stream's block index (Anthropic) or tool call index (OpenAI) -> blocks
	stop      string      // finish_reason (OpenAI) or stop_reason (Anthropic), as the stream said it
	usage     Usage
	hasUsage  bool
}

// collected is one content block of a collected answer.
type collected struct {
	kind     blockKind
	id, name string
	text     []byte // the text, the thinking, or a tool call's arguments (JSON text)
}

// NewCollector gathers a stream of the given family (anthropic: message events, else chat
// completion chunks) into an answer of at most limit bytes of text.
func NewCollector(anthropic bool, limit int) *Collector {
	return &Collector{anthropic: anthropic, limit: limit}
}

// Write takes the next bytes of the stream. An error means the stream cannot become an answer
// (an event over MaxEventBytes, an answer over the limit); the error stays.
func (c *Collector) Write(p []byte) error {
	if c.err != nil || c.done {
		return c.err
	}
	if c.anthropic {
		c.err = c.sc.feed(p, c.anthropicEvent)
	} else {
		c.err = c.sc.feed(p, c.openAIChunk)
	}
	return c.err
}

// Answer is the whole answer, in the stream's family, once the stream ended. An error says why
// there is none: the target's error event (its message), or a stream that ended before the
// model finished.
func (c *Collector) Answer() ([]byte, error) {
	switch {
	case c.err != nil:
		return nil, c.err
	case c.failed:
		return nil, errors.New(c.failure)
	case !c.complete:
		return nil, errCutShort
	case c.anthropic:
		return c.anthropicAnswer()
	}
	return c.openAIAnswer()
}

// keep adds n bytes to the answer's size: false once it is over the limit.
func (c *Collector) keep(n int) bool {
	c.size += n
	return c.size <= c.limit
}

// block returns the block the stream calls index, opening it as kind, id and name; nil when the
// answer holds maxToolCalls blocks already (later ones are dropped, as in a translated stream).
func (c *Collector) block(index int, kind blockKind, id, name []byte) *collected {
	if i, ok := c.byIndex[index]; ok {
		return &c.blocks[i]
	}
	if len(c.blocks) >= maxToolCalls {
		return nil
	}
	if c.byIndex == nil {
		c.byIndex = map[int]int{}
	}
	c.byIndex[index] = len(c.blocks)
	c.blocks = append(c.blocks, collected{kind: kind, id: string(id), name: string(name)})
	return &c.blocks[len(c.blocks)-1]
}

// add appends text to b (nil: a dropped block).
func (c *Collector) add(b *collected, text []byte) error {
	if b == nil || len(text) == 0 {
		return nil
	}
	if !c.keep(len(text)) {
		return errAnswerTooLarge
	}
	b.text = append(b.text, text...)
	return nil
}

// failWith records the target's error event.
func (c *Collector) failWith(message []byte) {
	c.failed, c.done, c.failure = true, true, string(message)
	if c.failure == "" {
		c.failure = "the model server reported an error"
	}
}

// openAIChunk reads one chat completion chunk. Text and thinking each gather into one block
// (the answer has one content and one reasoning_content), under indexes no tool call has;
// tool calls keep their own.
func (c *Collector) openAIChunk(_, data []byte) error {
	if c.done {
		return nil
	}
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		c.complete, c.done = true, true
		return nil
	}
	v, err := c.parser.ParseBytes(data)
	if err != nil || v.Type() != fastjson.TypeObject {
		return nil // not a chunk (a stray line)
	}
	if e := v.Get("error"); e != nil && e.Type() != fastjson.TypeNull {
		msg := e.GetStringBytes("message")
		if e.Type() == fastjson.TypeString {
			msg, _ = e.StringBytes()
		}
		c.failWith(msg)
		return nil
	}
	if c.id == "" {
		id := v.GetStringBytes("id")
		if !c.keep(len(id)) {
			return errAnswerTooLarge
		}
		c.id = string(id)
	}
	if u := v.Get("usage"); u != nil && u.Type() == fastjson.TypeObject {
		c.usage, c.hasUsage = Usage{u.GetInt("prompt_tokens"), u.GetInt("completion_tokens")}, true
	}
	for _, ch := range v.GetArray("choices") {
		if d := ch.Get("delta"); d != nil {
			for _, f := range [...]struct {
				kind  blockKind
				field string
			}{{blockThinking, "reasoning_content"}, {blockThinking, "reasoning"}, {blockText, "content"}} {
				if s := d.GetStringBytes(f.field); len(s) > 0 {
					if err := c.add(c.block(math.MinInt+int(f.kind), f.kind, nil, nil), s); err != nil {
						return err
					}
				}
			}
			for _, tc := range d.GetArray("tool_calls") {
				id, name := tc.GetStringBytes("id"), tc.GetStringBytes("function", "name")
				if !c.keep(len(id) + len(name)) {
					return errAnswerTooLarge
				}
				if err := c.add(c.block(tc.GetInt("index"), blockTool, id, name), tc.GetStringBytes("function", "arguments")); err != nil {
					return err
				}
			}
		}
		if finish := ch.GetStringBytes("finish_reason"); len(finish) > 0 {
			c.stop, c.complete = string(finish), true
		}
	}
	return nil
}

// anthropicEvent reads one message event.
func (c *Collector) anthropicEvent(_, data []byte) error {
	if c.done {
		return nil
	}
	e, err := c.parser.ParseBytes(bytes.TrimSpace(data))
	if err != nil || e.Type() != fastjson.TypeObject {
		return nil
	}
	index := e.GetInt("index")
	switch string(e.GetStringBytes("type")) {
	case "message_start":
		id := e.GetStringBytes("message", "id")
		if !c.keep(len(id)) {
			return errAnswerTooLarge
		}
		c.id = string(id)
		if u := e.Get("message", "usage"); u != nil {
			c.usage, c.hasUsage = Usage{u.GetInt("input_tokens"), u.GetInt("output_tokens")}, true
		}
	case "content_block_start":
		b := e.Get("content_block")
		kind := blockText
		switch string(b.GetStringBytes("type")) {
		case "thinking":
			kind = blockThinking
		case "tool_use":
			kind = blockTool
		}
		id, name := b.GetStringBytes("id"), b.GetStringBytes("name")
		if !c.keep(len(id) + len(name)) {
			return errAnswerTooLarge
		}
		blk := c.block(index, kind, id, name)
		if kind == blockText {
			return c.add(blk, b.GetStringBytes("text"))
		}
	case "content_block_delta":
		d := e.Get("delta")
		field := "text"
		switch string(d.GetStringBytes("type")) {
		case "thinking_delta":
			field = "thinking"
		case "input_json_delta":
			field = "partial_json"
		}
		return c.add(c.block(index, blockText, nil, nil), d.GetStringBytes(field))
	case "message_delta":
		if u := e.Get("usage"); u != nil {
			c.usage.OutputTokens, c.hasUsage = u.GetInt("output_tokens"), true
			if in := u.GetInt("input_tokens"); in > 0 {
				c.usage.InputTokens = in
			}
		}
		if stop := e.GetStringBytes("delta", "stop_reason"); len(stop) > 0 {
			c.stop, c.complete = string(stop), true
		}
	case "message_stop":
		c.complete, c.done = true, true
	case "error":
		c.failWith(e.GetStringBytes("error", "message"))
	}
	return nil
}

// openAIAnswer is the collected answer as a chat completion.
func (c *Collector) openAIAnswer() ([]byte, error) {
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	var msg struct {
		Role             string  `json:"role"`
		Content          *string `json:"content"`
		ReasoningContent string  `json:"reasoning_content,omitempty"`
		ToolCalls        []call  `json:"tool_calls,omitempty"`
	}
	msg.Role = "assistant"
	for _, b := range c.blocks {
		switch b.kind {
		case blockText:
			s := string(b.text)
			msg.Content = &s
		case blockThinking:
			msg.ReasoningContent = string(b.text)
		case blockTool:
			var tc call
			tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments = b.id, "function", b.name, string(b.text)
			msg.ToolCalls = append(msg.ToolCalls, tc)
		}
	}
	type choice struct {
		Index        int    `json:"index"`
		Message      any    `json:"message"`
		FinishReason string `json:"finish_reason"`
	}
	answer := struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Choices []choice     `json:"choices"`
		Usage   *openAIUsage `json:"usage,omitempty"`
	}{ID: c.id, Object: "chat.completion", Choices: []choice{{Message: msg, FinishReason: c.stop}}}
	if c.hasUsage {
		answer.Usage = &openAIUsage{c.usage.InputTokens, c.usage.OutputTokens, c.usage.InputTokens + c.usage.OutputTokens}
	}
	return json.Marshal(answer)
}

// anthropicAnswer is the collected answer as a message.
func (c *Collector) anthropicAnswer() ([]byte, error) {
	content := make([]map[string]any, 0, len(c.blocks))
	for _, b := range c.blocks {
		switch b.kind {
		case blockText:
			content = append(content, map[string]any{"type": "text", "text": string(b.text)})
		case blockThinking:
			content = append(content, map[string]any{"type": "thinking", "thinking": string(b.text)})
		case blockTool:
			// Arguments that are not a JSON object become {}, as in a whole answer's mapping.
			input, _ := toolInput(string(b.text))
			content = append(content, map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": input})
		}
	}
	answer := map[string]any{"id": c.id, "type": "message", "role": "assistant", "content": content,
		"stop_reason": c.stop}
	if c.hasUsage {
		answer["usage"] = anthropicUsage{c.usage.InputTokens, c.usage.OutputTokens}
	}
	return json.Marshal(answer)
}
