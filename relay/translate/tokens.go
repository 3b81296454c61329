package translate

import (
	"encoding/json"
)

// TokenizeRequest builds the body of POST /tokenize (vLLM, SGLang) for an Anthropic
// count_tokens request: {"model", "messages"} with the prompt translated to OpenAI messages.
func TokenizeRequest(body []byte) ([]byte, error) {
	r, err := readAnthropicRequest(body)
	if err != nil {
		return nil, err
	}
	return mapBody(func(o *out) error {
		o.str(`{"model":`)
		o.value(r.model)
		o.str(`,"messages":`)
		if err := r.writeMessages(o); err != nil {
			return err
		}
		o.str("}")
		return nil
	})
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
// UTF-8 length of the translated request's text (system, message texts, tool calls, tool
// names, descriptions and schemas as JSON) divided by 4, rounded up.
func EstimateTokens(body []byte) (int, error) {
	mapped, _, err := AnthropicToOpenAI(body)
	if err != nil {
		return 0, err
	}
	var top struct{ messages, tools []byte }
	var buf [32]byte
	eachMember(mapped, func(key, v []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "messages":
			top.messages = v
		case "tools":
			top.tools = v
		}
		return nil
	})
	n := 0
	// The mapping wrote these members, each once: the first value of a key is its only one.
	member := func(obj []byte, path ...string) []byte {
		for _, name := range path {
			var found []byte
			eachMember(obj, func(key, v []byte) error {
				if found == nil && is(key, name) {
					found = v
				}
				return nil
			})
			obj = found
		}
		return obj
	}
	eachElement(top.messages, func(_ int, m []byte) error {
		content := member(m, "content")
		if kind(content) == '"' {
			n += unescapedLen(content)
		}
		eachElement(content, func(_ int, p []byte) error {
			n += unescapedLen(member(p, "text"))
			return nil
		})
		eachElement(member(m, "tool_calls"), func(_ int, c []byte) error {
			n += unescapedLen(member(c, "function", "name")) + unescapedLen(member(c, "function", "arguments"))
			return nil
		})
		return nil
	})
	eachElement(top.tools, func(_ int, t []byte) error {
		n += unescapedLen(member(t, "function", "name")) + unescapedLen(member(t, "function", "description")) +
			len(member(t, "function", "parameters"))
		return nil
	})
	return (n + 3) / 4, nil
}

// CountTokensAnswer is the body of a count_tokens answer.
func CountTokensAnswer(n int) []byte {
	b, _ := json.Marshal(map[string]int{"input_tokens": n})
	return b
}
