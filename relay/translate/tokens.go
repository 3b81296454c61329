package translate

import (
	"encoding/json"
)

// TokenizeRequest builds the body of POST /tokenize (vLLM, SGLang) for an Anthropic
// count_tokens request: {"model", "messages"} with the prompt translated to OpenAI messages.
func TokenizeRequest(body []byte) ([]byte, error) {
	var in anthropicRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, undecodable(body, err)
	}
	out, err := anthropicToOpenAI(&in)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"model": out.Model, "messages": out.Messages})
}

// TokenizeCount reads a /tokenize answer: "count", else the length of "tokens".
func TokenizeCount(body []byte) (int, bool) {
	var v struct {
		Count  *int              `json:"count"`
		Tokens []json.RawMessage `json:"tokens"`
	}
	if json.Unmarshal(body, &v) != nil {
		return 0, false
	}
	if v.Count != nil {
		return *v.Count, true
	}
	if v.Tokens != nil {
		return len(v.Tokens), true
	}
	return 0, false
}

// EstimateTokens is the marked estimate for a count_tokens request no target can count: the
// UTF-8 length of the translated request's text (system, message texts, tool names,
// descriptions and schemas as JSON) divided by 4, rounded up.
func EstimateTokens(body []byte) (int, error) {
	var in anthropicRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return 0, undecodable(body, err)
	}
	out, err := anthropicToOpenAI(&in)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range out.Messages {
		n += len(textOfContent(m.Content))
		for _, c := range m.ToolCalls {
			n += len(c.Function.Name) + len(c.Function.Arguments)
		}
	}
	for _, t := range out.Tools {
		n += len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters)
	}
	return (n + 3) / 4, nil
}

// textOfContent is the text of OpenAI message content (a string or parts).
func textOfContent(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []openAIPart
	json.Unmarshal(raw, &parts)
	text := ""
	for _, p := range parts {
		text += p.Text
	}
	return text
}

// CountTokensAnswer is the body of a count_tokens answer.
func CountTokensAnswer(n int) []byte {
	b, _ := json.Marshal(map[string]int{"input_tokens": n})
	return b
}
