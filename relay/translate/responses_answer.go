package translate

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"modelrelay/relay/endpoint"
	"modelrelay/relay/rawjson"
)

// ResponseMeta is what the relay knows of the Responses answer it builds.
type ResponseMeta struct {
	ID               string // NewResponseID()
	Model            string // the model the client asked for
	CreatedAt        int64  // unix seconds
	Request          []byte // the client's Responses body as it sent it: the echo fields come from it
	IncludeEncrypted bool   // reasoning items carry encrypted_content
}

// NewResponseID is a response id: "resp_" and 32 random hex digits.
func NewResponseID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return "resp_" + hex.EncodeToString(b[:])
}

// reasoningPrefix marks the encrypted_content of a reasoning item the relay issued. The token
// is the reasoning text itself (base64url after the prefix): self-contained, so any relay node
// reads it back with no state, and a client that forges one only writes its own prompt.
const reasoningPrefix = "modelrelay.reasoning.1."

// reasoningToken is the encrypted_content of a reasoning item whose text is text.
func reasoningToken(text []byte) string {
	return reasoningPrefix + base64.RawURLEncoding.EncodeToString(text)
}

// readReasoningToken is the reasoning text of the encrypted_content v (a JSON string value),
// when the relay issued it.
func readReasoningToken(v []byte) ([]byte, bool) {
	if kind(v) != '"' {
		return nil, false
	}
	s := inner(v)
	if bytes.IndexByte(s, '\\') >= 0 {
		s = appendUnescaped(nil, v)
	}
	enc, ok := bytes.CutPrefix(s, []byte(reasoningPrefix))
	if !ok {
		return nil, false
	}
	text := make([]byte, base64.RawURLEncoding.DecodedLen(len(enc)))
	n, err := base64.RawURLEncoding.Decode(text, enc)
	if err != nil || !utf8.Valid(text[:n]) {
		return nil, false
	}
	return text[:n], true
}

// outputKind is the type of an output item.
type outputKind uint8

const (
	outMessage outputKind = iota
	outReasoning
	outCall   // function_call
	outCustom // custom_tool_call: a call of a tool the request declared custom
)

// outputItem is one item of a response's output. Its texts are JSON string texts (escaped,
// no quotes), ready to be written.
type outputItem struct {
	kind         outputKind
	id           string
	status       string
	callID, name []byte
	text         []byte // the message's text, the reasoning's summary, the call's arguments or input
}

// responseShape is what every response object of one answer shares: its id, and the members
// echoed from the request, rendered once.
type responseShape struct {
	itemIDs   string          // the id's random part: item ids are <prefix>_<itemIDs>_<output index>
	open      []byte          // {"id":…,"object":"response","created_at":…,"status":
	echoModel []byte          // ,"instructions":…,"max_output_tokens":…,"model":…
	echoTools []byte          // ,"parallel_tool_calls":… through ,"truncation":"disabled"
	echoEnd   []byte          // ,"user":…,"metadata":…}
	custom    map[string]bool // the request's custom tools: their calls are custom_tool_call items
	encrypted bool
}

// echoMember is one member a response echoes from its request, and its value when the
// request had none.
type echoMember struct {
	name, def string
}

var (
	echoModelMembers = []echoMember{{"instructions", "null"}, {"max_output_tokens", "null"}}
	echoToolMembers  = []echoMember{{"parallel_tool_calls", "true"}, {"previous_response_id", "null"},
		{"reasoning", `{"effort":null,"summary":null}`}, {"store", "true"}, {"temperature", "null"},
		{"text", `{"format":{"type":"text"}}`}, {"tool_choice", `"auto"`}, {"tools", "[]"}, {"top_p", "null"}}
	echoEndMembers = []echoMember{{"user", "null"}, {"metadata", "{}"}}
)

func newResponseShape(m ResponseMeta) *responseShape {
	sh := &responseShape{itemIDs: string(escapedText([]byte(strings.TrimPrefix(m.ID, "resp_")))), encrypted: m.IncludeEncrypted}
	request := map[string][]byte{}
	if checkBody(m.Request) == nil {
		var buf [32]byte
		eachMember(m.Request[skipSpace(m.Request, 0):], func(key, v []byte) error {
			if v = present(v); v != nil {
				request[string(fieldName(key, buf[:]))] = v
			}
			return nil
		})
		sh.custom = customTools(request["tools"])
	}
	echo := func(dst []byte, members []echoMember) []byte {
		for _, e := range members {
			dst = append(dst, `,"`...)
			dst = append(dst, e.name...)
			dst = append(dst, `":`...)
			if v := request[e.name]; v != nil {
				dst = appendCompact(dst, v)
			} else {
				dst = append(dst, e.def...)
			}
		}
		return dst
	}
	sh.open = append(sh.open, `{"id":`...)
	sh.open = appendQuoted(sh.open, []byte(m.ID))
	sh.open = append(sh.open, `,"object":"response","created_at":`...)
	sh.open = strconv.AppendInt(sh.open, m.CreatedAt, 10)
	sh.open = append(sh.open, `,"status":`...)
	sh.echoModel = echo(nil, echoModelMembers)
	sh.echoModel = append(sh.echoModel, `,"model":`...)
	sh.echoModel = appendQuoted(sh.echoModel, []byte(m.Model))
	sh.echoTools = echo(nil, echoToolMembers)
	sh.echoTools = append(sh.echoTools, `,"truncation":"disabled"`...)
	sh.echoEnd = append(echo(nil, echoEndMembers), '}')
	return sh
}

// customTools is the names of the custom tools in a request's tools.
func customTools(tools []byte) map[string]bool {
	var names map[string]bool
	eachElement(tools, func(_ int, v []byte) error {
		var typ, name []byte
		var buf [32]byte
		eachMember(v, func(key, val []byte) error {
			switch string(fieldName(key, buf[:])) {
			case "type":
				typ = val
			case "name":
				name = val
			}
			return nil
		})
		if is(typ, "custom") && kind(name) == '"' {
			if names == nil {
				names = map[string]bool{}
			}
			names[rawjson.String(name)] = true
		}
		return nil
	})
	return names
}

// itemID is the id of the output item at index: prefix msg, rs, fc or ctc.
func (sh *responseShape) itemID(prefix string, index int) string {
	return prefix + "_" + sh.itemIDs + "_" + strconv.Itoa(index)
}

// isCustom reports whether a call of the tool name (a JSON string text) is a custom tool call.
func (sh *responseShape) isCustom(name []byte) bool {
	if len(sh.custom) == 0 {
		return false
	}
	return sh.custom[string(rawjson.AppendUnescaped(nil, name))]
}

// appendResponse appends the response object. errorJSON and incomplete are JSON values ("null"
// for none); output appends the output array; usage is a JSON value.
func (sh *responseShape) appendResponse(dst []byte, status, errorJSON, incomplete string, output func([]byte) []byte, usage []byte) []byte {
	dst = append(dst, sh.open...)
	dst = append(dst, '"')
	dst = append(dst, status...)
	dst = append(dst, `","background":false,"error":`...)
	dst = append(dst, errorJSON...)
	dst = append(dst, `,"incomplete_details":`...)
	dst = append(dst, incomplete...)
	dst = append(dst, sh.echoModel...)
	dst = append(dst, `,"output":`...)
	dst = output(dst)
	dst = append(dst, sh.echoTools...)
	dst = append(dst, `,"usage":`...)
	dst = append(dst, usage...)
	return append(dst, sh.echoEnd...)
}

// appendItem appends an output item, complete.
func (sh *responseShape) appendItem(dst []byte, it *outputItem) []byte {
	dst = append(dst, `{"id":"`...)
	dst = append(dst, it.id...)
	switch it.kind {
	case outMessage:
		dst = append(dst, `","type":"message","status":"`...)
		dst = append(dst, it.status...)
		dst = append(dst, `","content":[`...)
		dst = appendTextPart(dst, it.text)
		dst = append(dst, `],"role":"assistant"}`...)
	case outReasoning:
		dst = append(dst, `","type":"reasoning","summary":[{"type":"summary_text","text":"`...)
		dst = append(dst, it.text...)
		dst = append(dst, `"}]`...)
		if sh.encrypted {
			dst = append(dst, `,"encrypted_content":"`...)
			dst = append(dst, reasoningToken(rawjson.AppendUnescaped(nil, it.text))...)
			dst = append(dst, '"')
		}
		dst = append(dst, '}')
	case outCall:
		dst = append(dst, `","type":"function_call","status":"`...)
		dst = append(dst, it.status...)
		dst = append(dst, `","arguments":"`...)
		dst = append(dst, it.text...)
		dst = appendCallNames(dst, it)
	case outCustom:
		dst = append(dst, `","type":"custom_tool_call","status":"`...)
		dst = append(dst, it.status...)
		dst = append(dst, `","input":"`...)
		dst = append(dst, it.text...)
		dst = appendCallNames(dst, it)
	}
	return dst
}

// appendTextPart appends an output_text content part of text.
func appendTextPart(dst, text []byte) []byte {
	dst = append(dst, `{"type":"output_text","annotations":[],"logprobs":[],"text":"`...)
	dst = append(dst, text...)
	return append(dst, `"}`...)
}

// appendCallNames closes a call item: its call_id and name.
func appendCallNames(dst []byte, it *outputItem) []byte {
	dst = append(dst, `","call_id":"`...)
	dst = append(dst, it.callID...)
	dst = append(dst, `","name":"`...)
	dst = append(dst, it.name...)
	return append(dst, `"}`...)
}

// customInput is the input of a custom tool's call from the arguments of the function it was
// mapped to ({"input": …}); arguments of any other shape are the input themselves.
func customInput(arguments []byte) []byte {
	var v struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal(arguments, &v) == nil && v.Input != nil {
		return []byte(*v.Input)
	}
	return arguments
}

// escapedText is text as a JSON string text: escaped, without its quotes.
func escapedText(text []byte) []byte {
	q := appendQuoted(nil, text)
	return q[1 : len(q)-1]
}

// responsesUsage is a Responses usage: chat's usage with the details Codex reads.
type responsesUsage struct {
	input, cached, output, reasoning int
}

func (u responsesUsage) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.input), 10)
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.cached), 10)
	dst = append(dst, `},"output_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.output), 10)
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.reasoning), 10)
	dst = append(dst, `},"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.input+u.output), 10)
	return append(dst, '}')
}

// incompleteReason is the incomplete_details reason of a chat finish_reason, "" for a
// complete answer.
func incompleteReason(finish string) string {
	switch finish {
	case "length":
		return "max_output_tokens"
	case "content_filter":
		return "content_filter"
	}
	return ""
}

// chatAnswer is a chat completion: what a response is made of.
type chatAnswer struct {
	Choices []struct {
		Message struct {
			Content          json.RawMessage  `json:"content"`
			ReasoningContent string           `json:"reasoning_content"`
			Reasoning        string           `json:"reasoning"`
			Refusal          string           `json:"refusal"`
			ToolCalls        []openAIToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails *struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

// ChatResponseToResponses maps a whole chat completion to a Responses response object: status
// completed, or incomplete when the model stopped at its token limit (finish "length") or
// its content filter; output in the order reasoning, message, calls; usage with its details.
func ChatResponseToResponses(chat []byte, m ResponseMeta) ([]byte, Usage, error) {
	var in chatAnswer
	if err := json.Unmarshal(chat, &in); err != nil {
		return nil, Usage{}, err
	}
	sh := newResponseShape(m)
	var items []outputItem
	finish := ""
	add := func(it outputItem, prefix string) {
		it.id = sh.itemID(prefix, len(items))
		items = append(items, it)
	}
	if len(in.Choices) > 0 {
		c := in.Choices[0]
		finish = c.FinishReason
		if r := c.Message.ReasoningContent + c.Message.Reasoning; r != "" {
			add(outputItem{kind: outReasoning, text: escapedText([]byte(r))}, "rs")
		}
		text := contentText(c.Message.Content)
		if text == "" {
			text = c.Message.Refusal
		}
		if text != "" || len(c.Message.ToolCalls) == 0 {
			add(outputItem{kind: outMessage, text: escapedText([]byte(text))}, "msg")
		}
		for _, tc := range c.Message.ToolCalls {
			it := outputItem{kind: outCall, name: escapedText([]byte(tc.Function.Name)), text: escapedText([]byte(tc.Function.Arguments))}
			if it.callID = escapedText([]byte(tc.ID)); tc.ID == "" {
				it.callID = []byte(sh.itemID("call", len(items)))
			}
			prefix := "fc"
			if sh.isCustom(it.name) {
				it.kind, prefix = outCustom, "ctc"
				it.text = escapedText(customInput([]byte(tc.Function.Arguments)))
			}
			add(it, prefix)
		}
	} else {
		add(outputItem{kind: outMessage}, "msg")
	}
	status, incomplete := "completed", "null"
	if reason := incompleteReason(finish); reason != "" {
		status, incomplete = "incomplete", `{"reason":"`+reason+`"}`
	}
	var u responsesUsage
	if in.Usage != nil {
		u.input, u.output = in.Usage.PromptTokens, in.Usage.CompletionTokens
		if d := in.Usage.PromptTokensDetails; d != nil {
			u.cached = d.CachedTokens
		}
		if d := in.Usage.CompletionTokensDetails; d != nil {
			u.reasoning = d.ReasoningTokens
		}
	}
	b := sh.appendResponse(nil, status, "null", incomplete, func(dst []byte) []byte {
		dst = append(dst, '[')
		for i := range items {
			if i > 0 {
				dst = append(dst, ',')
			}
			items[i].status = status
			dst = sh.appendItem(dst, &items[i])
		}
		return append(dst, ']')
	}, u.appendJSON(nil))
	return b, Usage{u.input, u.output}, nil
}

// ResponsesErrorBody re-shapes a target's error answer (any family's, or text) into the
// Responses error shape {"error":{"message","type","code","param"}}, typed as OpenAI types
// the status, its code the target's when it gave one as text. A 429's message says when to
// retry the way Codex reads it: "Please try again in Ns." with N = retryAfter seconds (at
// least 1), and its code is rate_limit_exceeded.
func ResponsesErrorBody(status int, body []byte, retryAfter int) []byte {
	msg := errorMessage(body)
	if msg == "" {
		msg = "the model server answered " + strconv.Itoa(status)
	}
	var code any
	var target struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &target) == nil && target.Error.Code != "" {
		code = target.Error.Code
	}
	if status == http.StatusTooManyRequests {
		code = "rate_limit_exceeded"
		if !strings.Contains(strings.ToLower(msg), "try again in") {
			msg = strings.TrimRight(msg, ". ") + ". Please try again in " + strconv.Itoa(max(retryAfter, 1)) + "s."
		}
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg,
		"type": endpoint.OpenAI.ErrorType(status), "code": code, "param": nil}})
	return b
}
