package translate

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"modelrelay/relay/endpoint"
)

// Usage is what a translated answer reported, for accounting.
type Usage struct {
	InputTokens, OutputTokens int
}

type openAIResponse struct {
	ID      string `json:"id"`
	Choices []struct {
		Message struct {
			Content          json.RawMessage  `json:"content"`
			ReasoningContent string           `json:"reasoning_content"`
			Reasoning        string           `json:"reasoning"`
			ToolCalls        []openAIToolCall `json:"tool_calls"`
			Refusal          string           `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *openAIUsage `json:"usage"`
}

type openAIUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// responseBlock is one content block of an Anthropic answer.
type responseBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
	Thinking string          `json:"thinking"`
}

type openAIToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// contentText flattens OpenAI message content (a string, or parts whose text parts count)
// to text.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// compactOr is raw without insignificant space, or def when raw is empty or not JSON.
func compactOr(raw json.RawMessage, def string) json.RawMessage {
	var buf bytes.Buffer
	if len(raw) == 0 || json.Compact(&buf, raw) != nil || buf.String() == "null" {
		return json.RawMessage(def)
	}
	return buf.Bytes()
}

// Unparseable is returned beside a translated answer when a tool call's arguments were not
// JSON: the block got {} and the raw text is here, for the caller's log.
type Unparseable struct {
	Tool, Arguments string
}

// OpenAIResponseToAnthropic maps a chat completion to an Anthropic message. model is the model
// the client asked for.
func OpenAIResponseToAnthropic(body []byte, model string) ([]byte, Usage, []Unparseable, error) {
	var in openAIResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, Usage{}, nil, err
	}
	content := []any{}
	stop := "end_turn"
	var bad []Unparseable
	if len(in.Choices) > 0 {
		c := in.Choices[0]
		if r := c.Message.ReasoningContent + c.Message.Reasoning; r != "" {
			content = append(content, map[string]string{"type": "thinking", "thinking": r, "signature": ""})
		}
		text := contentText(c.Message.Content)
		if text == "" {
			text = c.Message.Refusal
		}
		if text != "" {
			content = append(content, map[string]string{"type": "text", "text": text})
		}
		for _, tc := range c.Message.ToolCalls {
			input, ok := toolInput(tc.Function.Arguments)
			if !ok {
				bad = append(bad, Unparseable{tc.Function.Name, tc.Function.Arguments})
			}
			content = append(content, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Function.Name, "input": input})
		}
		stop = stopReason(c.FinishReason)
	}
	if len(content) == 0 {
		content = append(content, map[string]string{"type": "text", "text": ""})
	}
	var u Usage
	if in.Usage != nil {
		u = Usage{in.Usage.PromptTokens, in.Usage.CompletionTokens}
	}
	out := map[string]any{"id": "msg_" + in.ID, "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens}}
	b, err := json.Marshal(out)
	return b, u, bad, err
}

// toolInput parses a tool call's arguments; anything but a JSON object becomes {}.
func toolInput(args string) (json.RawMessage, bool) {
	trimmed := strings.TrimSpace(args)
	if trimmed == "" {
		return json.RawMessage("{}"), true
	}
	if trimmed[0] != '{' || !json.Valid([]byte(trimmed)) {
		return json.RawMessage("{}"), false
	}
	return compactOr(json.RawMessage(trimmed), "{}"), true
}

// stopReason maps an OpenAI finish_reason to an Anthropic stop_reason.
func stopReason(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// finishReason maps an Anthropic stop_reason to an OpenAI finish_reason.
func finishReason(stop string) string {
	switch stop {
	case "max_tokens":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop"
}

type anthropicResponse struct {
	ID         string          `json:"id"`
	Content    []responseBlock `json:"content"`
	StopReason string          `json:"stop_reason"`
	Usage      *anthropicUsage `json:"usage"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// AnthropicResponseToOpenAI maps an Anthropic message to a chat completion.
func AnthropicResponseToOpenAI(body []byte, model string) ([]byte, Usage, error) {
	var in anthropicResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, Usage{}, err
	}
	var text, thinking strings.Builder
	var calls []map[string]any
	for _, b := range in.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			thinking.WriteString(b.Thinking)
		case "tool_use":
			calls = append(calls, map[string]any{"id": b.ID, "type": "function",
				"function": map[string]string{"name": b.Name, "arguments": string(compactOr(b.Input, "{}"))}})
		}
	}
	msg := map[string]any{"role": "assistant", "content": nil}
	if text.Len() > 0 || len(calls) == 0 {
		msg["content"] = text.String()
	}
	if thinking.Len() > 0 {
		msg["reasoning_content"] = thinking.String()
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	var u Usage
	if in.Usage != nil {
		u = Usage{in.Usage.InputTokens, in.Usage.OutputTokens}
	}
	out := map[string]any{"id": "chatcmpl-" + strings.TrimPrefix(in.ID, "msg_"), "object": "chat.completion",
		"created": time.Now().Unix(), "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finishReason(in.StopReason)}},
		"usage":   openAIUsage{u.InputTokens, u.OutputTokens, u.InputTokens + u.OutputTokens}}
	b, err := json.Marshal(out)
	return b, u, err
}

// ErrorBody re-shapes a target's error answer (status kept by the caller) into the client's
// family: toAnthropic picks {"type":"error","error":{type,message}}, else OpenAI's
// {"error":{message,type,code}}. The message is the target's, whatever shape it came in; the
// type is the family's for the status, as the relay types its own errors.
func ErrorBody(status int, body []byte, toAnthropic bool) []byte {
	msg := errorMessage(body)
	if msg == "" {
		msg = "the model server answered " + itoa(status)
	}
	var v any
	if toAnthropic {
		v = map[string]any{"type": "error", "error": map[string]string{"type": endpoint.Anthropic.ErrorType(status), "message": msg}}
	} else {
		v = map[string]any{"error": map[string]any{"message": msg, "type": endpoint.OpenAI.ErrorType(status), "code": nil}}
	}
	b, _ := json.Marshal(v)
	return b
}

// errorMessage finds the human message in an error body of either family (or FastAPI's
// {"detail"}, or plain text).
func errorMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) != nil {
		s := strings.TrimSpace(string(body))
		if len(s) > 512 {
			s = s[:512]
		}
		return s
	}
	var inner struct {
		Message string `json:"message"`
	}
	var s string
	switch {
	case json.Unmarshal(v.Error, &inner) == nil && inner.Message != "":
		return inner.Message
	case json.Unmarshal(v.Error, &s) == nil && s != "":
		return s
	case v.Message != "":
		return v.Message
	case json.Unmarshal(v.Detail, &s) == nil && s != "":
		return s
	case len(v.Detail) > 0:
		return string(v.Detail)
	}
	return ""
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
