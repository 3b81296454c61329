package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"modelrelay/relay/rawjson"
)

// Request is what a mapped request needs on its way back.
type Request struct {
	Model        string // as the client asked
	Stream       bool
	IncludeUsage bool // OpenAI client asked for the usage chunk (stream_options.include_usage)
}

// ErrInvalid is matched (errors.Is) by every mapping error caused by the client's body:
// answer 400. The error's text is the reason alone, in the API's terms, for the client.
var ErrInvalid = errors.New("invalid request")

type invalidError string

func (e invalidError) Error() string      { return string(e) }
func (invalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return invalidError(fmt.Sprintf(format, args...))
}

// eitherError says what is wrong with a member (name) that takes a string or a list, given
// neither: the list's own error when it is one ("content[1].text must be a string"), else
// that it must be one or the other.
func eitherError(name, list string, raw json.RawMessage, err error) string {
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		return rawjson.ExplainIn(name, raw, err)
	}
	return name + " must be a string or " + list
}

// undecodable is the client's error for a body json.Unmarshal refused: the path of the value
// and the type it must have ("messages must be an array"), never encoding/json's text, which
// names this package's Go types.
func undecodable(body []byte, err error) error {
	return invalidError(rawjson.Explain(body, err))
}

// ---- Anthropic Messages request ----

type anthropicRequest struct {
	Model         string             `json:"model"`
	System        json.RawMessage    `json:"system"`
	Messages      []anthropicMessage `json:"messages"`
	MaxTokens     *int               `json:"max_tokens"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int               `json:"top_k"`
	StopSequences []string           `json:"stop_sequences"`
	Stream        bool               `json:"stream"`
	Tools         []anthropicTool    `json:"tools"`
	ToolChoice    *anthropicChoice   `json:"tool_choice"`
	Metadata      *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or a list of blocks
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *imageSource    `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
}

type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type anthropicTool struct {
	Type        string          `json:"type,omitempty"` // "" or "custom"; others are server tools
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

type anthropicChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// ---- OpenAI Chat request ----

type openAIRequest struct {
	Model               string          `json:"model"`
	Messages            []openAIMessage `json:"messages"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	TopK                *int            `json:"top_k,omitempty"`
	Stop                json.RawMessage `json:"stop,omitempty"` // a string or a list
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *streamOptions  `json:"stream_options,omitempty"`
	Tools               []openAITool    `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	User                string          `json:"user,omitempty"`
	N                   *int            `json:"n,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type openAIMessage struct {
	Role       string           `json:"role"`
	Content    json.RawMessage  `json:"content"` // a string, a list of parts, or null
	ToolCalls  []openAIToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

type openAIPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url,omitempty"`
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

type openAITool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// AnthropicToOpenAI maps an Anthropic Messages request to an OpenAI chat completion request.
// thinking and cache_control have no counterpart and are dropped, as are unknown fields.
func AnthropicToOpenAI(body []byte) ([]byte, Request, error) {
	var in anthropicRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, Request{}, undecodable(body, err)
	}
	out, err := anthropicToOpenAI(&in)
	if err != nil {
		return nil, Request{}, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, Request{}, invalid("%v", err)
	}
	return b, Request{Model: in.Model, Stream: in.Stream}, nil
}

func anthropicToOpenAI(in *anthropicRequest) (*openAIRequest, error) {
	out := &openAIRequest{Model: in.Model, MaxTokens: in.MaxTokens, Temperature: in.Temperature,
		TopP: in.TopP, TopK: in.TopK, Stream: in.Stream}
	if in.Stream {
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if len(in.StopSequences) > 0 {
		out.Stop, _ = json.Marshal(in.StopSequences)
	}
	if in.Metadata != nil {
		out.User = in.Metadata.UserID
	}
	system, err := systemText(in.System)
	if err != nil {
		return nil, err
	}
	if system != "" {
		out.Messages = append(out.Messages, openAIMessage{Role: "system", Content: jsonString(system)})
	}
	for i, m := range in.Messages {
		msgs, err := anthropicMessageToOpenAI(m)
		if err != nil {
			return nil, invalid("messages[%d].%v", i, err)
		}
		out.Messages = append(out.Messages, msgs...)
	}
	for _, t := range in.Tools {
		if t.Type != "" && t.Type != "custom" {
			continue // a server tool (web search, code execution): the model server has none
		}
		var ot openAITool
		ot.Type = "function"
		ot.Function.Name, ot.Function.Description = t.Name, t.Description
		ot.Function.Parameters = t.InputSchema
		if len(ot.Function.Parameters) == 0 {
			ot.Function.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, ot)
	}
	if c := in.ToolChoice; c != nil {
		switch c.Type {
		case "auto":
			out.ToolChoice = json.RawMessage(`"auto"`)
		case "any":
			out.ToolChoice = json.RawMessage(`"required"`)
		case "none":
			out.ToolChoice = json.RawMessage(`"none"`)
		case "tool":
			out.ToolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}})
		}
		if c.DisableParallelToolUse {
			f := false
			out.ParallelToolCalls = &f
		}
	}
	return out, nil
}

// systemText joins a system prompt given as a string or as text blocks.
func systemText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", invalidError(eitherError("system", "an array of text blocks", raw, err))
	}
	texts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n\n"), nil
}

// blocksOf reads message content given as a string or a list of blocks.
func blocksOf(raw json.RawMessage) ([]anthropicBlock, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, errors.New(eitherError("content", "an array", raw, err)) // messages[i]. goes before it
	}
	return blocks, nil
}

// anthropicMessageToOpenAI maps one message; a user message holding tool results becomes one
// tool message per result, before the user's other content.
func anthropicMessageToOpenAI(m anthropicMessage) ([]openAIMessage, error) {
	blocks, err := blocksOf(m.Content)
	if err != nil {
		return nil, err
	}
	var out []openAIMessage
	var parts []openAIPart
	var calls []openAIToolCall
	for _, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, openAIPart{Type: "text", Text: b.Text})
		case "image":
			if url := imageURL(b.Source); url != "" {
				p := openAIPart{Type: "image_url"}
				p.ImageURL = &struct {
					URL string `json:"url"`
				}{url}
				parts = append(parts, p)
			}
		case "tool_use":
			var c openAIToolCall
			c.ID, c.Type = b.ID, "function"
			c.Function.Name = b.Name
			c.Function.Arguments = string(compactOr(b.Input, "{}"))
			calls = append(calls, c)
		case "tool_result":
			text := toolResultText(b.Content)
			if b.IsError {
				text = "Error: " + text
			}
			out = append(out, openAIMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: jsonString(text)})
		}
		// thinking, redacted_thinking, documents and server tools have no chat counterpart.
	}
	role := m.Role
	if role != "assistant" && role != "system" {
		role = "user"
	}
	if len(parts) == 0 && len(calls) == 0 {
		return out, nil
	}
	msg := openAIMessage{Role: role, ToolCalls: calls, Content: partsContent(parts, role)}
	return append(out, msg), nil
}

// partsContent is a plain string when the parts are text only (one part, or a role that takes
// no list, such as system), else the list; an assistant turn of tool calls alone has null.
func partsContent(parts []openAIPart, role string) json.RawMessage {
	if len(parts) == 0 {
		return json.RawMessage("null")
	}
	textOnly := true
	for _, p := range parts {
		textOnly = textOnly && p.Type == "text"
	}
	if textOnly && (len(parts) == 1 || role != "user") {
		texts := make([]string, len(parts))
		for i, p := range parts {
			texts[i] = p.Text
		}
		return jsonString(strings.Join(texts, "\n\n"))
	}
	b, _ := json.Marshal(parts)
	return b
}

func imageURL(src *imageSource) string {
	if src == nil {
		return ""
	}
	switch src.Type {
	case "base64":
		return "data:" + src.MediaType + ";base64," + src.Data
	case "url":
		return src.URL
	}
	return ""
}

// toolResultText flattens a tool result's content (a string or text blocks) to text.
func toolResultText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []anthropicBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return string(raw)
	}
	texts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// OpenAIToAnthropic maps an OpenAI chat completion request to an Anthropic Messages request.
// A missing max_tokens becomes defaultMaxTokens (Anthropic requires one); n > 1 is refused.
func OpenAIToAnthropic(body []byte, defaultMaxTokens int) ([]byte, Request, error) {
	var in openAIRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, Request{}, undecodable(body, err)
	}
	if in.N != nil && *in.N > 1 {
		return nil, Request{}, invalid("n > 1 is not supported by this model's server")
	}
	out := map[string]any{"model": in.Model}
	maxTokens := defaultMaxTokens
	switch {
	case in.MaxCompletionTokens != nil:
		maxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil:
		maxTokens = *in.MaxTokens
	}
	out["max_tokens"] = maxTokens
	var system []string
	var messages []map[string]any
	for i, m := range in.Messages {
		if m.Role == "system" || m.Role == "developer" {
			text, err := contentText(m.Content)
			if err != nil {
				return nil, Request{}, invalid("messages[%d].%v", i, err)
			}
			system = append(system, text)
			continue
		}
		role, blocks, err := openAIMessageToAnthropic(m)
		if err != nil {
			return nil, Request{}, invalid("messages[%d].%v", i, err)
		}
		if len(blocks) == 0 {
			continue
		}
		// Anthropic wants user and assistant turns to alternate: merge neighbours.
		if n := len(messages); n > 0 && messages[n-1]["role"] == role {
			messages[n-1]["content"] = append(messages[n-1]["content"].([]map[string]any), blocks...)
			continue
		}
		messages = append(messages, map[string]any{"role": role, "content": blocks})
	}
	if messages == nil {
		messages = []map[string]any{}
	}
	out["messages"] = messages
	if len(system) > 0 {
		out["system"] = strings.Join(system, "\n\n")
	}
	if in.Temperature != nil {
		out["temperature"] = *in.Temperature
	}
	if in.TopP != nil {
		out["top_p"] = *in.TopP
	}
	if in.TopK != nil {
		out["top_k"] = *in.TopK
	}
	if stops := stopList(in.Stop); len(stops) > 0 {
		out["stop_sequences"] = stops
	}
	if in.Stream {
		out["stream"] = true
	}
	if in.User != "" {
		out["metadata"] = map[string]string{"user_id": in.User}
	}
	if len(in.Tools) > 0 {
		tools := make([]map[string]any, 0, len(in.Tools))
		for _, t := range in.Tools {
			tool := map[string]any{"name": t.Function.Name, "input_schema": compactOr(t.Function.Parameters, `{"type":"object","properties":{}}`)}
			if t.Function.Description != "" {
				tool["description"] = t.Function.Description
			}
			tools = append(tools, tool)
		}
		out["tools"] = tools
	}
	if choice := toolChoice(in.ToolChoice, in.ParallelToolCalls); choice != nil {
		out["tool_choice"] = choice
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, Request{}, invalid("%v", err)
	}
	include := in.StreamOptions != nil && in.StreamOptions.IncludeUsage
	return b, Request{Model: in.Model, Stream: in.Stream, IncludeUsage: include}, nil
}

func openAIMessageToAnthropic(m openAIMessage) (role string, blocks []map[string]any, err error) {
	switch m.Role {
	case "tool":
		text, err := contentText(m.Content)
		if err != nil {
			return "", nil, err
		}
		return "user", []map[string]any{{"type": "tool_result", "tool_use_id": m.ToolCallID, "content": text}}, nil
	case "assistant":
		role = "assistant"
	default:
		role = "user"
	}
	blocks, err = contentBlocks(m.Content)
	if err != nil {
		return "", nil, err
	}
	for _, c := range m.ToolCalls {
		input := json.RawMessage(c.Function.Arguments)
		if !json.Valid(input) || len(bytes.TrimSpace(input)) == 0 || bytes.TrimSpace(input)[0] != '{' {
			input = json.RawMessage("{}")
		}
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Function.Name, "input": input})
	}
	return role, blocks, nil
}

// contentBlocks maps OpenAI message content (string or parts) to Anthropic blocks.
func contentBlocks(raw json.RawMessage) ([]map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []map[string]any{{"type": "text", "text": s}}, nil
	}
	var parts []openAIPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, errors.New(eitherError("content", "an array", raw, err)) // messages[i]. goes before it
	}
	var blocks []map[string]any
	for _, p := range parts {
		switch p.Type {
		case "text":
			blocks = append(blocks, map[string]any{"type": "text", "text": p.Text})
		case "image_url":
			if p.ImageURL != nil {
				blocks = append(blocks, map[string]any{"type": "image", "source": imageSourceOf(p.ImageURL.URL)})
			}
		}
	}
	return blocks, nil
}

// imageSourceOf turns an image URL (a data: URL or a plain one) into an Anthropic source.
func imageSourceOf(url string) imageSource {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		if media, data, ok := strings.Cut(rest, ";base64,"); ok {
			return imageSource{Type: "base64", MediaType: media, Data: data}
		}
	}
	return imageSource{Type: "url", URL: url}
}

// contentText flattens OpenAI content (a string or parts) to text.
func contentText(raw json.RawMessage) (string, error) {
	blocks, err := contentBlocks(raw)
	if err != nil {
		return "", err
	}
	var texts []string
	for _, b := range blocks {
		if t, ok := b["text"].(string); ok {
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, "\n"), nil
}

func stopList(raw json.RawMessage) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil
		}
		return []string{one}
	}
	var list []string
	json.Unmarshal(raw, &list)
	return list
}

func toolChoice(raw json.RawMessage, parallel *bool) map[string]any {
	var c map[string]any
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto":
			c = map[string]any{"type": "auto"}
		case "required":
			c = map[string]any{"type": "any"}
		case "none":
			c = map[string]any{"type": "none"}
		}
	} else {
		var named struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &named) == nil && named.Function.Name != "" {
			c = map[string]any{"type": "tool", "name": named.Function.Name}
		}
	}
	if parallel != nil && !*parallel {
		if c == nil {
			c = map[string]any{"type": "auto"}
		}
		if c["type"] != "none" {
			c["disable_parallel_tool_use"] = true
		}
	}
	return c
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// compactOr is raw without insignificant space, or def when raw is empty or not JSON.
func compactOr(raw json.RawMessage, def string) json.RawMessage {
	var buf bytes.Buffer
	if len(raw) == 0 || json.Compact(&buf, raw) != nil || buf.String() == "null" {
		return json.RawMessage(def)
	}
	return buf.Bytes()
}
