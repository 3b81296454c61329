package translate

import (
	"errors"
)

// A Responses API request (POST /v1/responses), mapped to a chat completion request as it is
// walked: see jsonwalk.go.

// ResponsesRequest is what a Responses request mapped to chat completions needs on its way
// back.
type ResponsesRequest struct {
	Request                 // Model (as asked), Stream; IncludeUsage is false (the relay always asks for usage on a stream)
	SessionKey       string // prompt_cache_key ("" none): the relay places by it; it is not sent
	Store            bool   // store (absent = true, as OpenAI's default)
	IncludeEncrypted bool   // include[] holds "reasoning.encrypted_content"
}

// ErrPreviousResponse is ResponsesToChat's error for a body that still carries
// previous_response_id: the relay expands the ids it holds (WithHistory) before mapping, and
// any other is the client's 404 previous_response_not_found. A chat target has no
// conversation state to resolve it against.
var ErrPreviousResponse = errors.New("previous_response_id is not known")

// responsesRequest is the top level of a Responses request: the members the mapping reads,
// as values of the body (nil: not given).
type responsesRequest struct {
	model, instructions, input, tools, toolChoice, parallelToolCalls, temperature, topP []byte
	user, maxOutputTokens, stream, store, include, promptCacheKey, background, previous []byte
	effort, format                                                                      []byte // reasoning.effort, text.format
}

// responsesItem is one item of input: the members the mapping reads.
type responsesItem struct {
	typ, role, content, callID, name, arguments, input, output, encrypted []byte
}

// itemKind sorts input items by what they become.
type itemKind uint8

const (
	itemDropped    itemKind = iota // built-in tool calls, unknown items, reasoning the relay did not issue
	itemMessage                    // a user, system or developer message
	itemAssistant                  // part of an assistant turn: its text, its reasoning, its calls
	itemToolOutput                 // a tool message
)

func readResponsesRequest(body []byte) (*responsesRequest, error) {
	if err := checkBody(body); err != nil {
		return nil, err
	}
	r := &responsesRequest{}
	var reasoning, text []byte
	var buf [32]byte
	eachMember(body[skipSpace(body, 0):], func(key, v []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "model":
			r.model = v
		case "instructions":
			r.instructions = v
		case "input":
			r.input = v
		case "tools":
			r.tools = v
		case "tool_choice":
			r.toolChoice = v
		case "parallel_tool_calls":
			r.parallelToolCalls = v
		case "temperature":
			r.temperature = v
		case "top_p":
			r.topP = v
		case "user":
			r.user = v
		case "max_output_tokens":
			r.maxOutputTokens = v
		case "stream":
			r.stream = v
		case "store":
			r.store = v
		case "include":
			r.include = v
		case "prompt_cache_key":
			r.promptCacheKey = v
		case "background":
			r.background = v
		case "previous_response_id":
			r.previous = v
		case "reasoning":
			reasoning = v
		case "text":
			text = v
		}
		return nil
	})
	eachMember(reasoning, func(key, v []byte) error {
		if string(fieldName(key, buf[:])) == "effort" {
			r.effort = v
		}
		return nil
	})
	eachMember(text, func(key, v []byte) error {
		if string(fieldName(key, buf[:])) == "format" {
			r.format = v
		}
		return nil
	})
	var c checks
	c.str(r.model, "model")
	c.str(r.instructions, "instructions")
	c.want(r.input, "input", "a string or an array", `"[`)
	c.array(r.tools, "tools")
	c.want(r.toolChoice, "tool_choice", "a string or an object", `"{`)
	c.boolean(r.parallelToolCalls, "parallel_tool_calls")
	c.number(r.temperature, "temperature")
	c.number(r.topP, "top_p")
	c.str(r.user, "user")
	c.integer(r.maxOutputTokens, "max_output_tokens")
	c.boolean(r.stream, "stream")
	c.boolean(r.store, "store")
	c.array(r.include, "include")
	c.str(r.promptCacheKey, "prompt_cache_key")
	c.boolean(r.background, "background")
	c.str(r.previous, "previous_response_id")
	c.object(reasoning, "reasoning")
	c.str(r.effort, "reasoning.effort")
	c.object(text, "text")
	c.object(r.format, "text.format")
	if c.err != nil {
		return nil, c.err
	}
	if isTrue(r.background) {
		return nil, invalid("background mode is not supported by this model's server")
	}
	if !isEmpty(r.previous) {
		return nil, ErrPreviousResponse
	}
	r.model, r.temperature, r.topP, r.maxOutputTokens = present(r.model), present(r.temperature), present(r.topP), present(r.maxOutputTokens)
	return r, nil
}

// readItem reads one input item and says what it becomes. A message without a type is a
// message (the API's "easy input message").
func readItem(v []byte) (responsesItem, itemKind, error) {
	var it responsesItem
	var c checks
	if c.value(v); c.err != nil {
		return it, itemDropped, c.err
	}
	var buf [32]byte
	eachMember(v, func(key, val []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "type":
			it.typ = val
		case "role":
			it.role = val
		case "content":
			it.content = val
		case "call_id":
			it.callID = val
		case "name":
			it.name = val
		case "arguments":
			it.arguments = val
		case "input":
			it.input = val
		case "output":
			it.output = val
		case "encrypted_content":
			it.encrypted = val
		}
		return nil
	})
	c.str(it.typ, "type")
	c.str(it.role, "role")
	c.want(it.content, "content", "a string or an array", `"[`)
	c.str(it.callID, "call_id")
	c.str(it.name, "name")
	c.str(it.arguments, "arguments")
	c.str(it.input, "input")
	c.want(it.output, "output", "a string or an array", `"[`)
	c.str(it.encrypted, "encrypted_content")
	if c.err != nil {
		return it, itemDropped, c.err
	}
	switch {
	case is(it.typ, "message") || isEmpty(it.typ) && present(it.role) != nil:
		switch {
		case is(it.role, "assistant"):
			return it, itemAssistant, checkParts(it.content, "content")
		case is(it.role, "user"), is(it.role, "system"), is(it.role, "developer"):
			return it, itemMessage, checkParts(it.content, "content")
		}
		return it, itemDropped, &typeError{path: "role", want: "one of user, assistant, system or developer"}
	case is(it.typ, "function_call"), is(it.typ, "custom_tool_call"):
		if isEmpty(it.callID) {
			return it, itemDropped, &typeError{path: "call_id", want: "a non-empty string"}
		}
		if isEmpty(it.name) {
			return it, itemDropped, &typeError{path: "name", want: "a non-empty string"}
		}
		return it, itemAssistant, nil
	case is(it.typ, "function_call_output"), is(it.typ, "custom_tool_call_output"):
		if isEmpty(it.callID) {
			return it, itemDropped, &typeError{path: "call_id", want: "a non-empty string"}
		}
		return it, itemToolOutput, checkParts(it.output, "output")
	case is(it.typ, "reasoning"):
		if text, ok := readReasoningToken(it.encrypted); ok && len(text) > 0 {
			return it, itemAssistant, nil
		}
	case is(it.typ, "item_reference"):
		return it, itemDropped, invalid("item_reference is not supported: send the item itself")
	}
	return it, itemDropped, nil
}

// responsesPart is one part of a message's content (or of a tool output). Its type is
// partText for every kind of text, the input_image type for an image, nil for a part not sent.
type responsesPart struct {
	typ, text, imageURL, detail, fileID []byte
}

var partText = []byte(`"text"`)

func readResponsesPart(v []byte) (responsesPart, error) {
	var p responsesPart
	var c checks
	if c.value(v); c.err != nil {
		return p, c.err
	}
	var refusal []byte
	var buf [32]byte
	eachMember(v, func(key, val []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "type":
			p.typ = val
		case "text":
			p.text = val
		case "refusal":
			refusal = val
		case "image_url":
			p.imageURL = val
		case "detail":
			p.detail = val
		case "file_id":
			p.fileID = val
		}
		return nil
	})
	c.str(p.typ, "type")
	c.str(p.text, "text")
	c.str(refusal, "refusal")
	c.str(p.imageURL, "image_url")
	c.str(p.detail, "detail")
	c.str(p.fileID, "file_id")
	if c.err != nil {
		return p, c.err
	}
	switch {
	case is(p.typ, "input_text"), is(p.typ, "output_text"), is(p.typ, "text"):
		p.typ = partText
	case is(p.typ, "refusal"):
		p.typ, p.text = partText, refusal
	case is(p.typ, "input_image"):
		if isEmpty(p.imageURL) {
			if !isEmpty(p.fileID) {
				return p, invalid("input_image with a file_id is not supported by this model's server: send image_url")
			}
			p.typ = nil // no image to send
		}
	case is(p.typ, "input_file"):
		return p, invalid("input_file is not supported by this model's server")
	default:
		p.typ = nil
	}
	return p, nil
}

// checkParts checks a content (or tool output, by its name) that is a list of parts.
func checkParts(content []byte, name string) error {
	return eachElement(content, func(j int, v []byte) error {
		if _, err := readResponsesPart(v); err != nil {
			return at(err, "%s[%d]", name, j)
		}
		return nil
	})
}

// eachResponsesPart calls f with each part of content that is sent: text and images.
func eachResponsesPart(content []byte, f func(p responsesPart)) {
	eachElement(content, func(_ int, v []byte) error {
		if p, _ := readResponsesPart(v); p.typ != nil {
			f(p)
		}
		return nil
	})
}

// ResponsesToChat maps a /v1/responses body to a /v1/chat/completions body. reasoning says
// the target's model is configured as a reasoning model: reasoning.effort becomes
// reasoning_effort (else it is dropped). A stream asks for the usage chunk. Errors: ErrInvalid
// (the reason in the API's terms: a 400), ErrTooLarge (413), ErrPreviousResponse.
func ResponsesToChat(body []byte, reasoning bool) ([]byte, ResponsesRequest, error) {
	r, err := readResponsesRequest(body)
	if err != nil {
		return nil, ResponsesRequest{}, err
	}
	b, err := mapBody(func(o *out) error { return r.writeChat(o, reasoning) })
	if err != nil {
		return nil, ResponsesRequest{}, err
	}
	model, _ := unquote(r.model)
	info := ResponsesRequest{Request: Request{Model: model, Stream: isTrue(r.stream)}, Store: kind(r.store) != 'f'}
	if kind(r.promptCacheKey) == '"' {
		info.SessionKey, _ = unquote(r.promptCacheKey)
	}
	eachElement(r.include, func(_ int, v []byte) error {
		info.IncludeEncrypted = info.IncludeEncrypted || is(v, "reasoning.encrypted_content")
		return nil
	})
	return b, info, nil
}

func (r *responsesRequest) writeChat(o *out, reasoning bool) error {
	o.str(`{"model":`)
	o.value(r.model)
	o.str(`,"messages":`)
	if err := r.writeMessages(o); err != nil {
		return err
	}
	for _, p := range []struct {
		name string
		v    []byte
	}{{"max_tokens", r.maxOutputTokens}, {"temperature", r.temperature}, {"top_p", r.topP}} {
		if p.v != nil {
			o.str(`,"`)
			o.str(p.name)
			o.str(`":`)
			o.raw(p.v)
		}
	}
	if isTrue(r.stream) {
		o.str(`,"stream":true,"stream_options":{"include_usage":true}`)
	}
	if err := r.writeTools(o); err != nil {
		return err
	}
	r.writeFormat(o)
	if reasoning && !isEmpty(r.effort) {
		o.str(`,"reasoning_effort":`)
		o.raw(r.effort)
	}
	if !isEmpty(r.user) {
		o.str(`,"user":`)
		o.raw(r.user)
	}
	o.str("}")
	return nil
}

// writeMessages writes instructions as the first system message, then the input. The
// assistant's side of a turn — its text, the reasoning the relay issued, and a run of calls —
// arrives as separate items and becomes one assistant message: chat templates expect a turn's
// calls together, and a message per call makes the model see several turns.
func (r *responsesRequest) writeMessages(o *out) error {
	o.str("[")
	var msgs comma
	if !isEmpty(r.instructions) {
		msgs.next(o)
		o.str(`{"role":"system","content":`)
		o.raw(r.instructions)
		o.str("}")
	}
	if kind(r.input) == '"' {
		msgs.next(o)
		o.str(`{"role":"user","content":`)
		o.raw(r.input)
		o.str("}")
		o.str("]")
		return nil
	}
	var turn []responsesItem // the items of the assistant turn being gathered
	err := eachElement(r.input, func(i int, v []byte) error {
		if err := o.count(); err != nil {
			return err
		}
		it, k, err := readItem(v)
		if err == nil {
			err = o.countElements(it.content)
		}
		if err == nil {
			err = o.countElements(it.output)
		}
		if err != nil {
			return at(err, "input[%d]", i)
		}
		if k == itemAssistant {
			turn = append(turn, it)
			return nil
		}
		if k == itemDropped {
			return nil
		}
		writeTurn(o, &msgs, turn)
		turn = turn[:0]
		msgs.next(o)
		if k == itemToolOutput {
			o.str(`{"role":"tool","tool_call_id":`)
			o.raw(it.callID)
			o.str(`,"content":`)
			writeToolOutput(o, it.output)
			o.str("}")
			return nil
		}
		role := "user"
		if !is(it.role, "user") {
			role = "system"
		}
		o.str(`{"role":"`)
		o.str(role)
		o.str(`","content":`)
		writeResponsesContent(o, it.content)
		o.str("}")
		return nil
	})
	if err != nil {
		return err
	}
	writeTurn(o, &msgs, turn)
	o.str("]")
	return nil
}

// writeResponsesContent writes a message's content: a string as it is; parts as one string
// when they are one text, else as chat parts.
func writeResponsesContent(o *out, content []byte) {
	if kind(content) != '[' {
		o.value(content)
		return
	}
	texts, images := 0, 0
	var only []byte
	eachResponsesPart(content, func(p responsesPart) {
		if is(p.typ, "text") {
			texts++
			only = p.text
		} else {
			images++
		}
	})
	switch {
	case texts+images == 0:
		o.str(`""`)
		return
	case texts == 1 && images == 0:
		o.value(only)
		return
	}
	o.str("[")
	var parts comma
	eachResponsesPart(content, func(p responsesPart) { writeChatPart(o, &parts, p) })
	o.str("]")
}

func writeChatPart(o *out, parts *comma, p responsesPart) {
	parts.next(o)
	if is(p.typ, "text") {
		o.str(`{"type":"text","text":`)
		o.value(p.text)
		o.str("}")
		return
	}
	o.str(`{"type":"image_url","image_url":{"url":`)
	o.raw(p.imageURL)
	if !isEmpty(p.detail) {
		o.str(`,"detail":`)
		o.raw(p.detail)
	}
	o.str("}}")
}

// writeToolOutput writes a tool output as a tool message's content: a string as it is, the
// text parts of a list joined by newlines (a chat tool message holds text).
func writeToolOutput(o *out, output []byte) {
	if kind(output) != '[' {
		o.value(output)
		return
	}
	o.str(`"`)
	var sep bool
	eachResponsesPart(output, func(p responsesPart) {
		if is(p.typ, "text") {
			if sep {
				o.str(`\n`)
			}
			sep = true
			o.text(p.text)
		}
	})
	o.str(`"`)
}

// writeTurn writes an assistant turn's items as one message: the texts of its messages as
// content (null when it only calls), the reasoning the relay issued as reasoning_content,
// its calls as tool_calls. A turn of reasoning alone is dropped: it answered nothing.
func writeTurn(o *out, msgs *comma, turn []responsesItem) {
	texts, calls := 0, 0
	var only []byte
	for _, it := range turn {
		switch {
		case is(it.typ, "function_call"), is(it.typ, "custom_tool_call"):
			calls++
		case is(it.typ, "reasoning"):
		case kind(it.content) == '"':
			texts++
			only = it.content
		default:
			eachResponsesPart(it.content, func(p responsesPart) {
				if is(p.typ, "text") {
					texts++
					only = p.text
				}
			})
		}
	}
	if texts == 0 && calls == 0 {
		return
	}
	msgs.next(o)
	o.str(`{"role":"assistant","content":`)
	switch {
	case texts == 0:
		o.str("null")
	case texts == 1:
		o.value(only)
	default:
		o.str("[")
		var parts comma
		for _, it := range turn {
			if is(it.typ, "function_call") || is(it.typ, "custom_tool_call") || is(it.typ, "reasoning") {
				continue
			}
			if kind(it.content) == '"' {
				writeChatPart(o, &parts, responsesPart{typ: partText, text: it.content})
				continue
			}
			eachResponsesPart(it.content, func(p responsesPart) {
				if is(p.typ, "text") {
					writeChatPart(o, &parts, p)
				}
			})
		}
		o.str("]")
	}
	var reasoning comma
	for _, it := range turn {
		if !is(it.typ, "reasoning") {
			continue
		}
		text, _ := readReasoningToken(it.encrypted)
		if !reasoning {
			o.str(`,"reasoning_content":"`)
		} else {
			o.str(`\n\n`)
		}
		reasoning = true
		o.escaped(text, false)
	}
	if reasoning {
		o.str(`"`)
	}
	if calls > 0 {
		o.str(`,"tool_calls":[`)
		var list comma
		for _, it := range turn {
			if !is(it.typ, "function_call") && !is(it.typ, "custom_tool_call") {
				continue
			}
			list.next(o)
			o.str(`{"id":`)
			o.raw(it.callID)
			o.str(`,"type":"function","function":{"name":`)
			o.raw(it.name)
			o.str(`,"arguments":`)
			switch {
			case is(it.typ, "custom_tool_call"):
				// A custom tool is a function of one string parameter, input (see writeTools).
				o.str(`"{\"input\":`)
				if present(it.input) == nil {
					o.str(`\"\"`)
				} else {
					o.escaped(it.input, false)
				}
				o.str(`}"`)
			case isEmpty(it.arguments):
				o.str(`"{}"`)
			default:
				o.raw(it.arguments)
			}
			o.str("}}")
		}
		o.str("]")
	}
	o.str("}")
}

// writeTools writes function and custom tools as chat functions. Built-in tools (web search,
// file search, code interpreter, computer use, image generation, MCP, local shell) and any
// other type (Codex's namespace) are dropped: the model server runs none of them. Without a
// tool, tool_choice and parallel_tool_calls are left out too (servers refuse them alone).
func (r *responsesRequest) writeTools(o *out) error {
	var tools comma
	err := eachElement(r.tools, func(i int, v []byte) error {
		if err := o.count(); err != nil {
			return err
		}
		var c checks
		if c.value(v); c.err != nil {
			return at(c.err, "tools[%d]", i)
		}
		var typ, name, description, parameters, strict, format []byte
		var buf [32]byte
		eachMember(v, func(key, val []byte) error {
			switch string(fieldName(key, buf[:])) {
			case "type":
				typ = val
			case "name":
				name = val
			case "description":
				description = val
			case "parameters":
				parameters = val
			case "strict":
				strict = val
			case "format":
				format = val
			}
			return nil
		})
		c.str(typ, "type")
		c.str(name, "name")
		c.str(description, "description")
		c.object(parameters, "parameters")
		c.boolean(strict, "strict")
		c.object(format, "format")
		if c.err != nil {
			return at(c.err, "tools[%d]", i)
		}
		if !is(typ, "function") && !is(typ, "custom") {
			return nil
		}
		if isEmpty(name) {
			return invalid("tools[%d].name is missing", i)
		}
		if !tools {
			o.str(`,"tools":[`)
		}
		tools.next(o)
		schemaMember := `,"parameters":`
		switch kind(strict) {
		case 't':
			schemaMember = `,"strict":true,"parameters":`
		case 'f':
			schemaMember = `,"strict":false,"parameters":`
		}
		if is(typ, "custom") {
			parameters = customSchema(format)
		}
		writeTool(o, `{"type":"function","function":`, name, description, schemaMember, parameters, "}")
		return nil
	})
	if tools {
		o.str("]")
	}
	if err == nil {
		err = r.writeToolChoice(o, bool(tools))
	}
	if tools && (kind(r.parallelToolCalls) == 't' || kind(r.parallelToolCalls) == 'f') {
		o.str(`,"parallel_tool_calls":`)
		o.raw(r.parallelToolCalls)
	}
	return err
}

// customSchema is the parameters of a custom tool mapped to a function: one string, input. A
// grammar format is told to the model in the parameter's description.
func customSchema(format []byte) []byte {
	var typ, syntax, definition []byte
	var buf [32]byte
	eachMember(format, func(key, val []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "type":
			typ = val
		case "syntax":
			syntax = val
		case "definition":
			definition = val
		}
		return nil
	})
	b := []byte(`{"type":"object","properties":{"input":{"type":"string"`)
	if is(typ, "grammar") && kind(definition) == '"' && !isEmpty(definition) {
		b = append(b, `,"description":"The input, written in this `...)
		if kind(syntax) == '"' {
			b = append(b, inner(syntax)...)
			b = append(b, ' ')
		}
		b = append(b, `grammar:\n`...)
		b = append(b, inner(definition)...)
		b = append(b, '"')
	}
	return append(b, `}},"required":["input"]}`...)
}

// writeToolChoice maps tool_choice, written only when a tool was (write): a string as it is;
// a named function or custom tool to chat's {"type":"function","function":{"name"}};
// allowed_tools to its mode. Forcing a built-in tool is refused: the model server has none.
func (r *responsesRequest) writeToolChoice(o *out, write bool) error {
	switch kind(r.toolChoice) {
	case '"':
		if write {
			o.str(`,"tool_choice":`)
			o.raw(r.toolChoice)
		}
	case '{':
		var typ, name, mode []byte
		var buf [32]byte
		eachMember(r.toolChoice, func(key, val []byte) error {
			switch string(fieldName(key, buf[:])) {
			case "type":
				typ = val
			case "name":
				name = val
			case "mode":
				mode = val
			}
			return nil
		})
		var c checks
		c.str(typ, "tool_choice.type")
		c.str(name, "tool_choice.name")
		c.str(mode, "tool_choice.mode")
		if c.err != nil {
			return c.err
		}
		switch {
		case (is(typ, "function") || is(typ, "custom")) && !isEmpty(name):
			if write {
				o.str(`,"tool_choice":{"type":"function","function":{"name":`)
				o.raw(name)
				o.str("}}")
			}
		case is(typ, "allowed_tools"):
			if write && !isEmpty(mode) {
				o.str(`,"tool_choice":`)
				o.raw(mode)
			}
		case is(typ, "function"), is(typ, "custom"):
			return invalid("tool_choice.name is missing")
		default:
			return invalid("tool_choice forces the built-in tool %s, which this model's server does not have", inner(typ))
		}
	}
	return nil
}

// writeFormat maps text.format (json_schema, json_object) to response_format.
func (r *responsesRequest) writeFormat(o *out) {
	var typ, name, schema, description, strict []byte
	var buf [32]byte
	eachMember(r.format, func(key, val []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "type":
			typ = val
		case "name":
			name = val
		case "schema":
			schema = present(val)
		case "description":
			description = val
		case "strict":
			strict = val
		}
		return nil
	})
	switch {
	case is(typ, "json_object"):
		o.str(`,"response_format":{"type":"json_object"}`)
	case is(typ, "json_schema"):
		o.str(`,"response_format":{"type":"json_schema","json_schema":{"name":`)
		if kind(name) == '"' && !isEmpty(name) {
			o.raw(name)
		} else {
			o.str(`"response"`)
		}
		if kind(description) == '"' {
			o.str(`,"description":`)
			o.raw(description)
		}
		if schema != nil {
			o.str(`,"schema":`)
			o.compact(schema)
		}
		if kind(strict) == 't' || kind(strict) == 'f' {
			o.str(`,"strict":`)
			o.raw(strict)
		}
		o.str("}}")
	}
}
