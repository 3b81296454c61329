package translate

import (
	"bytes"
	"strconv"

	"modelrelay/relay/rawjson"
)

// An OpenAI chat completion request, mapped to an Anthropic Messages request as it is
// walked: see jsonwalk.go.

// openAIRequest is the top level of an OpenAI chat completion request: the members the
// mapping reads, as values of the body (nil: not given).
type openAIRequest struct {
	model, messages, maxTokens, maxCompletionTokens, temperature, topP, topK, stop, stream []byte
	includeUsage, tools, toolChoice, parallelToolCalls, user, n                            []byte
}

// openAIMessage is one message: the members the mapping reads.
type openAIMessage struct {
	role, content, toolCalls, toolCallID []byte
}

// openAIPart is one part of a message's content.
type openAIPart struct {
	typ, text, imageURL, url []byte
}

// openAICall is one of an assistant message's tool calls.
type openAICall struct {
	id, name, arguments []byte
}

func readOpenAIRequest(body []byte) (*openAIRequest, error) {
	if err := checkBody(body); err != nil {
		return nil, err
	}
	r := &openAIRequest{}
	var streamOptions []byte
	var buf [32]byte
	eachMember(body[skipSpace(body, 0):], func(key, v []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "model":
			r.model = v
		case "messages":
			r.messages = v
		case "max_tokens":
			r.maxTokens = v
		case "max_completion_tokens":
			r.maxCompletionTokens = v
		case "temperature":
			r.temperature = v
		case "top_p":
			r.topP = v
		case "top_k":
			r.topK = v
		case "stop":
			r.stop = v
		case "stream":
			r.stream = v
		case "stream_options":
			streamOptions = v
		case "tools":
			r.tools = v
		case "tool_choice":
			r.toolChoice = v
		case "parallel_tool_calls":
			r.parallelToolCalls = v
		case "user":
			r.user = v
		case "n":
			r.n = v
		}
		return nil
	})
	eachMember(streamOptions, func(key, v []byte) error {
		if string(fieldName(key, buf[:])) == "include_usage" {
			r.includeUsage = v
		}
		return nil
	})
	var c checks
	c.str(r.model, "model")
	c.array(r.messages, "messages")
	c.integer(r.maxTokens, "max_tokens")
	c.integer(r.maxCompletionTokens, "max_completion_tokens")
	c.number(r.temperature, "temperature")
	c.number(r.topP, "top_p")
	c.integer(r.topK, "top_k")
	c.boolean(r.stream, "stream")
	c.object(streamOptions, "stream_options")
	c.boolean(r.includeUsage, "stream_options.include_usage")
	c.array(r.tools, "tools")
	c.boolean(r.parallelToolCalls, "parallel_tool_calls")
	c.str(r.user, "user")
	c.integer(r.n, "n")
	if c.err != nil {
		return nil, c.err
	}
	if intValue(r.n, 1) > 1 {
		return nil, invalid("n > 1 is not supported by this model's server")
	}
	r.model, r.maxTokens, r.maxCompletionTokens = present(r.model), present(r.maxTokens), present(r.maxCompletionTokens)
	r.temperature, r.topP, r.topK = present(r.temperature), present(r.topP), present(r.topK)
	return r, nil
}

// readOpenAIMessage reads one message (null reads as a user message with no content) and
// checks its tool calls.
func readOpenAIMessage(v []byte) (openAIMessage, error) {
	var m openAIMessage
	var c checks
	if c.value(v); c.err != nil {
		return m, c.err
	}
	var buf [32]byte
	eachMember(v, func(key, val []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "role":
			m.role = val
		case "content":
			m.content = val
		case "tool_calls":
			m.toolCalls = val
		case "tool_call_id":
			m.toolCallID = val
		}
		return nil
	})
	c.str(m.role, "role")
	c.array(m.toolCalls, "tool_calls")
	c.str(m.toolCallID, "tool_call_id")
	if c.err != nil {
		return m, c.err
	}
	err := eachElement(m.toolCalls, func(j int, v []byte) error {
		if _, err := readCall(v); err != nil {
			return at(err, "tool_calls[%d]", j)
		}
		return nil
	})
	return m, err
}

func readCall(v []byte) (openAICall, error) {
	var call openAICall
	var c checks
	if c.value(v); c.err != nil {
		return call, c.err
	}
	var index, typ, function []byte
	var buf [32]byte
	eachMember(v, func(key, val []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "index":
			index = val
		case "id":
			call.id = val
		case "type":
			typ = val
		case "function":
			function = val
		}
		return nil
	})
	c.integer(index, "index")
	c.str(call.id, "id")
	c.str(typ, "type")
	c.object(function, "function")
	eachMember(function, func(key, val []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "name":
			call.name = val
		case "arguments":
			call.arguments = val
		}
		return nil
	})
	c.str(call.name, "function.name")
	c.str(call.arguments, "function.arguments")
	return call, c.err
}

// readPart reads one part of a message's content.
func readPart(v []byte) (openAIPart, error) {
	var p openAIPart
	var c checks
	if c.value(v); c.err != nil {
		return p, c.err
	}
	var buf [32]byte
	eachMember(v, func(key, val []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "type":
			p.typ = val
		case "text":
			p.text = val
		case "image_url":
			p.imageURL = present(val)
		}
		return nil
	})
	c.str(p.typ, "type")
	c.str(p.text, "text")
	c.object(p.imageURL, "image_url")
	eachMember(p.imageURL, func(key, val []byte) error {
		if string(fieldName(key, buf[:])) == "url" {
			p.url = val
		}
		return nil
	})
	c.str(p.url, "image_url.url")
	return p, c.err
}

// checkContent checks a message's content: a string, a list of parts, or null.
func checkContent(content []byte) error {
	switch kind(content) {
	case 0, 'n', '"':
		return nil
	case '[':
		return eachElement(content, func(j int, v []byte) error {
			if _, err := readPart(v); err != nil {
				return at(err, "content[%d]", j)
			}
			return nil
		})
	}
	return &typeError{path: "content", want: "a string or an array"}
}

// eachPart calls f with each part of content, checked already.
func eachPart(content []byte, f func(p openAIPart)) {
	eachElement(content, func(_ int, v []byte) error {
		p, _ := readPart(v)
		f(p)
		return nil
	})
}

// blocksOf is how many Anthropic blocks a message makes: text parts (an empty string makes
// none), images, tool calls; a tool message one tool result.
func blocksOf(m openAIMessage) int {
	if is(m.role, "tool") {
		return 1
	}
	n := 0
	switch kind(m.content) {
	case '"':
		if !isEmpty(m.content) {
			n++
		}
	case '[':
		eachPart(m.content, func(p openAIPart) {
			if is(p.typ, "text") || is(p.typ, "image_url") && p.imageURL != nil {
				n++
			}
		})
	}
	eachElement(m.toolCalls, func(int, []byte) error { n++; return nil })
	return n
}

// OpenAIToAnthropic maps an OpenAI chat completion request to an Anthropic Messages request.
// A missing max_tokens becomes defaultMaxTokens (Anthropic requires one); n > 1 is refused.
// A request of more than MaxItems messages, parts, tool calls and tools fails with
// ErrTooLarge.
func OpenAIToAnthropic(body []byte, defaultMaxTokens int) ([]byte, Request, error) {
	r, err := readOpenAIRequest(body)
	if err != nil {
		return nil, Request{}, err
	}
	b, err := mapBody(func(o *out) error { return r.writeAnthropic(o, defaultMaxTokens) })
	if err != nil {
		return nil, Request{}, err
	}
	model, _ := unquote(r.model)
	return b, Request{Model: model, Stream: isTrue(r.stream), IncludeUsage: isTrue(r.includeUsage)}, nil
}

func (r *openAIRequest) writeAnthropic(o *out, defaultMaxTokens int) error {
	o.str(`{"model":`)
	o.value(r.model)
	o.str(`,"max_tokens":`)
	switch {
	case r.maxCompletionTokens != nil:
		o.raw(r.maxCompletionTokens)
	case r.maxTokens != nil:
		o.raw(r.maxTokens)
	default:
		o.str(strconv.Itoa(defaultMaxTokens))
	}
	o.str(`,"messages":`)
	if err := r.writeMessages(o); err != nil {
		return err
	}
	r.writeSystem(o)
	for _, p := range []struct {
		name string
		v    []byte
	}{{"temperature", r.temperature}, {"top_p", r.topP}, {"top_k", r.topK}} {
		if p.v != nil {
			o.str(`,"`)
			o.str(p.name)
			o.str(`":`)
			o.raw(p.v)
		}
	}
	r.writeStop(o)
	if isTrue(r.stream) {
		o.str(`,"stream":true`)
	}
	if !isEmpty(r.user) {
		o.str(`,"metadata":{"user_id":`)
		o.raw(r.user)
		o.str("}")
	}
	if err := r.writeTools(o); err != nil {
		return err
	}
	r.writeToolChoice(o)
	o.str("}")
	return nil
}

// writeMessages writes the messages that are not system ones. Anthropic wants user and
// assistant turns to alternate: neighbours of one role become one message.
func (r *openAIRequest) writeMessages(o *out) error {
	o.str("[")
	open := "" // the role of the message being written
	err := eachElement(r.messages, func(i int, v []byte) error {
		if err := o.count(); err != nil {
			return err
		}
		m, err := readOpenAIMessage(v)
		if err == nil {
			err = checkContent(m.content)
		}
		if err == nil && kind(m.content) == '[' {
			err = o.countElements(m.content)
		}
		if err == nil {
			err = o.countElements(m.toolCalls)
		}
		if err != nil {
			return at(err, "messages[%d]", i)
		}
		if is(m.role, "system") || is(m.role, "developer") || blocksOf(m) == 0 {
			return nil
		}
		role := "user"
		if is(m.role, "assistant") {
			role = "assistant"
		}
		switch {
		case role == open:
			o.str(",")
		case open != "":
			o.str("]},")
			fallthrough
		default:
			o.str(`{"role":"`)
			o.str(role)
			o.str(`","content":[`)
			open = role
		}
		writeBlocks(o, m)
		return nil
	})
	if open != "" {
		o.str("]}")
	}
	o.str("]")
	return err
}

// writeBlocks writes a message's blocks: a tool message is a tool result; any other its
// text and images, then its tool calls.
func writeBlocks(o *out, m openAIMessage) {
	if is(m.role, "tool") {
		o.str(`{"type":"tool_result","tool_use_id":`)
		o.value(m.toolCallID)
		o.str(`,"content":"`)
		writeContentText(o, m.content)
		o.str(`"}`)
		return
	}
	var blocks comma
	switch kind(m.content) {
	case '"':
		if !isEmpty(m.content) {
			blocks.next(o)
			o.str(`{"type":"text","text":`)
			o.raw(m.content)
			o.str("}")
		}
	case '[':
		eachPart(m.content, func(p openAIPart) {
			switch {
			case is(p.typ, "text"):
				blocks.next(o)
				o.str(`{"type":"text","text":`)
				o.value(p.text)
				o.str("}")
			case is(p.typ, "image_url") && p.imageURL != nil:
				blocks.next(o)
				o.str(`{"type":"image","source":`)
				writeImageSource(o, p.url)
				o.str("}")
			}
		})
	}
	eachElement(m.toolCalls, func(_ int, v []byte) error {
		call, _ := readCall(v)
		blocks.next(o)
		o.str(`{"type":"tool_use","id":`)
		o.value(call.id)
		o.str(`,"name":`)
		o.value(call.name)
		o.str(`,"input":`)
		writeToolInput(o, call.arguments)
		o.str("}")
		return nil
	})
}

// writeToolInput writes a tool call's arguments (JSON in a string) as the tool_use input:
// the JSON object they hold, or {} for anything else.
func writeToolInput(o *out, args []byte) {
	if o.dry {
		o.n += max(len(inner(args)), 2) // decoding and compacting only shrink
		return
	}
	start := len(o.b)
	o.b = appendUnescaped(o.b, args)
	got := o.b[start:]
	if t := bytes.TrimSpace(got); len(t) == 0 || t[0] != '{' || !rawjson.Valid(t) {
		o.b = append(o.b[:start], "{}"...)
		return
	}
	o.b = appendCompact(o.b[:start], got) // in place: compacting only shrinks
}

// writeContentText writes the text of a message's content: a string as it is, the text
// parts joined by newlines.
func writeContentText(o *out, content []byte) {
	if kind(content) == '"' {
		o.text(content)
		return
	}
	var sep bool
	eachPart(content, func(p openAIPart) {
		if is(p.typ, "text") {
			if sep {
				o.str(`\n`)
			}
			sep = true
			o.text(p.text)
		}
	})
}

// writeSystem writes the system and developer messages, joined by blank lines, as the
// system prompt.
func (r *openAIRequest) writeSystem(o *out) {
	var sep bool
	eachElement(r.messages, func(_ int, v []byte) error {
		m, _ := readOpenAIMessage(v)
		if !is(m.role, "system") && !is(m.role, "developer") {
			return nil
		}
		if sep {
			o.str(`\n\n`)
		} else {
			o.str(`,"system":"`)
		}
		sep = true
		writeContentText(o, m.content)
		return nil
	})
	if sep {
		o.str(`"`)
	}
}

// writeStop writes stop (a string or a list of them) as stop_sequences.
func (r *openAIRequest) writeStop(o *out) {
	var stops comma
	add := func(v []byte) {
		if !stops {
			o.str(`,"stop_sequences":[`)
		}
		stops.next(o)
		o.raw(v)
	}
	switch kind(r.stop) {
	case '"':
		if !isEmpty(r.stop) {
			add(r.stop)
		}
	case '[':
		eachElement(r.stop, func(_ int, v []byte) error {
			if kind(v) == '"' {
				add(v)
			}
			return nil
		})
	}
	if stops {
		o.str("]")
	}
}

func (r *openAIRequest) writeTools(o *out) error {
	var tools comma
	err := eachElement(r.tools, func(i int, v []byte) error {
		if err := o.count(); err != nil {
			return err
		}
		var c checks
		var typ, function, name, description, parameters []byte
		if c.value(v); c.err != nil {
			return at(c.err, "tools[%d]", i)
		}
		var buf [32]byte
		eachMember(v, func(key, val []byte) error {
			switch string(fieldName(key, buf[:])) {
			case "type":
				typ = val
			case "function":
				function = val
			}
			return nil
		})
		c.str(typ, "type")
		c.object(function, "function")
		eachMember(function, func(key, val []byte) error {
			switch string(fieldName(key, buf[:])) {
			case "name":
				name = val
			case "description":
				description = val
			case "parameters":
				parameters = val
			}
			return nil
		})
		c.str(name, "function.name")
		c.str(description, "function.description")
		if c.err != nil {
			return at(c.err, "tools[%d]", i)
		}
		if !tools {
			o.str(`,"tools":[`)
		}
		tools.next(o)
		writeTool(o, "", name, description, `,"input_schema":`, parameters, "")
		return nil
	})
	if tools {
		o.str("]")
	}
	return err
}

// writeToolChoice maps tool_choice ("auto", "required", "none" or a named function) and
// parallel_tool_calls: false.
func (r *openAIRequest) writeToolChoice(o *out) {
	typ := ""
	var name []byte
	switch kind(r.toolChoice) {
	case '"':
		switch {
		case is(r.toolChoice, "auto"):
			typ = "auto"
		case is(r.toolChoice, "required"):
			typ = "any"
		case is(r.toolChoice, "none"):
			typ = "none"
		}
	case '{':
		var buf [32]byte
		eachMember(r.toolChoice, func(key, val []byte) error {
			if string(fieldName(key, buf[:])) == "function" {
				name = nil
				eachMember(val, func(key, val []byte) error {
					if string(fieldName(key, buf[:])) == "name" && kind(val) == '"' {
						name = val
					}
					return nil
				})
			}
			return nil
		})
		if !isEmpty(name) {
			typ = "tool"
		}
	}
	disable := kind(r.parallelToolCalls) == 'f'
	if disable && typ == "" {
		typ = "auto"
	}
	if typ == "" {
		return
	}
	o.str(`,"tool_choice":{"type":"`)
	o.str(typ)
	o.str(`"`)
	if typ == "tool" {
		o.str(`,"name":`)
		o.raw(name)
	}
	if disable && typ != "none" {
		o.str(`,"disable_parallel_tool_use":true`)
	}
	o.str("}")
}

// writeImageSource writes an image URL as an Anthropic image source: base64 data from a
// data: URL, else the URL.
func writeImageSource(o *out, url []byte) {
	in := inner(url)
	semi := bytes.Index(in, []byte(";base64,"))
	escaped := bytes.IndexByte(in, '\\')
	switch {
	case bytes.HasPrefix(in, []byte("data:")) && semi >= 0 && (escaped < 0 || escaped > semi):
		writeSource(o, "base64", in[len("data:"):semi], in[semi+len(";base64,"):], nil)
	case escaped < 0 || (escaped >= len("data:") && !bytes.HasPrefix(in, []byte("data:"))):
		// No escape could spell data: or ;base64, here.
		writeSource(o, "url", nil, nil, in)
	default:
		// Escapes where the URL is split: decode it first (a client that escapes "/").
		text := appendUnescaped(nil, url)
		var media, data, link []byte
		if rest, ok := bytes.CutPrefix(text, []byte("data:")); ok {
			if m, d, ok := bytes.Cut(rest, []byte(";base64,")); ok {
				media, data = m, d
			}
		}
		if data == nil && media == nil {
			link = text
		}
		esc := func(p []byte) []byte { return appendEscaped(nil, p) }
		if link != nil {
			writeSource(o, "url", nil, nil, esc(link))
		} else {
			writeSource(o, "base64", esc(media), esc(data), nil)
		}
	}
}

// writeSource writes an image source; its texts are escaped already, empty ones left out.
func writeSource(o *out, typ string, media, data, url []byte) {
	o.str(`{"type":"`)
	o.str(typ)
	o.str(`"`)
	for _, f := range []struct {
		name string
		v    []byte
	}{{"media_type", media}, {"data", data}, {"url", url}} {
		if len(f.v) > 0 {
			o.str(`,"`)
			o.str(f.name)
			o.str(`":"`)
			o.raw(f.v)
			o.str(`"`)
		}
	}
	o.str("}")
}
