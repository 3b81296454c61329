package demo

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// request is the union of the members the demo reads from both families' requests; the
// rest of a request is accepted and ignored, as a model server ignores sampling settings
// it does not support.
type request struct {
	Model               string          `json:"model"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Messages            []message       `json:"messages"`
	System              json.RawMessage `json:"system"` // Anthropic: a string or text blocks
	Prompt              json.RawMessage `json:"prompt"` // completions: a string or a list of them
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// prompt is what the answer depends on: how many tokens the prompt holds and how long the
// last user message is.
type prompt struct {
	tokens  int
	lastLen int // characters in the last user message (or the completion prompt)
}

// chatPrompt reads a chat or messages request. system is Anthropic's top-level system
// prompt (OpenAI's travels as a message).
func chatPrompt(msgs []message, system json.RawMessage) (prompt, *apiError) {
	if len(msgs) == 0 {
		return prompt{}, badRequest("messages: at least one message is required")
	}
	var p prompt
	if len(system) > 0 {
		text, ok := contentText(system)
		if !ok {
			return prompt{}, badRequest("system: must be a string or a list of text blocks")
		}
		p.tokens += countTokens(text)
	}
	for i, m := range msgs {
		text, ok := contentText(m.Content)
		if !ok {
			return prompt{}, badRequest(fmt.Sprintf("messages[%d].content: must be a string or a list of content blocks", i))
		}
		p.tokens += countTokens(text)
		if m.Role == "user" {
			p.lastLen = utf8.RuneCountInString(text)
		}
	}
	return p, nil
}

// completionPrompt reads a legacy completions prompt: a string or a list of strings (one
// answer is given for the list, to the last of them).
func completionPrompt(raw json.RawMessage) (prompt, *apiError) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return prompt{tokens: countTokens(one), lastLen: utf8.RuneCountInString(one)}, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) != nil || len(many) == 0 {
		return prompt{}, badRequest("prompt: must be a string or a list of strings")
	}
	var p prompt
	for _, s := range many {
		p.tokens += countTokens(s)
	}
	p.lastLen = utf8.RuneCountInString(many[len(many)-1])
	return p, nil
}

// contentText is the text of a message's content: a string, or the text of its blocks
// (OpenAI content parts, Anthropic blocks; a tool result's own content counts too). Blocks
// without text (images) add nothing. null is an empty content (an assistant turn that only
// called tools).
func contentText(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var blocks []struct {
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return "", false
	}
	var parts []string
	for _, b := range blocks {
		if b.Text != "" {
			parts = append(parts, b.Text)
		}
		if inner, ok := contentText(b.Content); ok && inner != "" {
			parts = append(parts, inner)
		}
	}
	return strings.Join(parts, " "), true
}

// countTokens is the demo's tokenizer: one token per word. Real tokenizers differ; this
// one is deterministic and needs no vocabulary.
func countTokens(text string) int { return len(strings.Fields(text)) }

// answer is what the demo says: the same tokens for the same prompt, every time.
type answer struct {
	tokens    []string // joined, the text; each after the first starts with its space
	input     int      // prompt tokens
	truncated bool     // max_tokens cut it short
}

// compose writes the answer to p, cut to limit tokens when limit > 0.
func compose(p prompt, limit int) answer {
	unit := "characters"
	if p.lastLen == 1 {
		unit = "character"
	}
	text := fmt.Sprintf("Hello from the demo model behind modelrelay. Your last message was %d %s long. "+
		"Add a backend or a worker for a real model, and the same request will reach it.", p.lastLen, unit)
	words := strings.Fields(text)
	a := answer{input: p.tokens, tokens: make([]string, len(words))}
	for i, w := range words {
		if i > 0 {
			w = " " + w
		}
		a.tokens[i] = w
	}
	if limit > 0 && limit < len(a.tokens) {
		a.tokens, a.truncated = a.tokens[:limit], true
	}
	return a
}

func (a answer) text() string { return strings.Join(a.tokens, "") }

func (a answer) output() int { return len(a.tokens) }

// maxTokens reads an optional token limit; a limit must be at least 1.
func maxTokens(name string, v *int) (int, *apiError) {
	if v == nil {
		return 0, nil
	}
	if *v < 1 {
		return 0, badRequest(fmt.Sprintf("%s: must be at least 1, got %d", name, *v))
	}
	return *v, nil
}
