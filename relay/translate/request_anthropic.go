package translate

import "fmt"

// An Anthropic Messages request, mapped to an OpenAI chat completion request (and, for
// count_tokens, to a /tokenize request) as it is walked: see jsonwalk.go.

// anthropicRequest is the top level of an Anthropic Messages request: the members the
// mapping reads, as values of the body (nil: not given).
type anthropicRequest struct {
	model, system, messages, maxTokens, temperature, topP, topK, stopSequences, stream, tools []byte
	choice                                                                                    anthropicChoice
	userID                                                                                    []byte // metadata.user_id
}

type anthropicChoice struct {
	typ, name, disableParallel []byte
}

// anthropicBlock is one content block: the members the mapping reads.
type anthropicBlock struct {
	typ, text, source, id, name, input, toolUseID, content, isError []byte
}

// imageSource is an image block's source.
type imageSource struct {
	typ, mediaType, data, url []byte
}

func readAnthropicRequest(body []byte) (*anthropicRequest, error) {
	if err := checkBody(body); err != nil {
		return nil, err
	}
	r := &anthropicRequest{}
	var metadata, choice []byte
	var buf [32]byte
	eachMember(body[skipSpace(body, 0):], func(key, v []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "model":
			r.model = v
		case "system":
			r.system = v
		case "messages":
			r.messages = v
		case "max_tokens":
			r.maxTokens = v
		case "temperature":
			r.temperature = v
		case "top_p":
			r.topP = v
		case "top_k":
			r.topK = v
		case "stop_sequences":
			r.stopSequences = v
		case "stream":
			r.stream = v
		case "tools":
			r.tools = v
		case "tool_choice":
			choice = v
		case "metadata":
			metadata = v
		}
		return nil
	})
	var c checks
	c.str(r.model, "model")
	c.want(r.system, "system", "a string or an array of text blocks", `"[`)
	c.array(r.messages, "messages")
	c.integer(r.maxTokens, "max_tokens")
	c.number(r.temperature, "temperature")
	c.number(r.topP, "top_p")
	c.integer(r.topK, "top_k")
	c.array(r.stopSequences, "stop_sequences")
	c.boolean(r.stream, "stream")
	c.array(r.tools, "tools")
	c.object(choice, "tool_choice")
	c.object(metadata, "metadata")
	eachElement(r.stopSequences, func(i int, v []byte) error {
		if k := kind(v); k != '"' && k != 'n' && c.err == nil {
			c.err = &typeError{path: fmt.Sprintf("stop_sequences[%d]", i), want: "a string"}
		}
		return c.err
	})
	eachMember(metadata, func(key, v []byte) error {
		if string(fieldName(key, buf[:])) == "user_id" {
			r.userID = v
		}
		return nil
	})
	c.str(r.userID, "metadata.user_id")
	eachMember(choice, func(key, v []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "type":
			r.choice.typ = v
		case "name":
			r.choice.name = v
		case "disable_parallel_tool_use":
			r.choice.disableParallel = v
		}
		return nil
	})
	c.str(r.choice.typ, "tool_choice.type")
	c.str(r.choice.name, "tool_choice.name")
	c.boolean(r.choice.disableParallel, "tool_choice.disable_parallel_tool_use")
	if c.err != nil {
		return nil, c.err
	}
	r.model, r.system, r.messages = present(r.model), present(r.system), present(r.messages)
	r.maxTokens, r.temperature, r.topP, r.topK = present(r.maxTokens), present(r.temperature), present(r.topP), present(r.topK)
	return r, nil
}

// readBlock reads one content block (null reads as a block of no type, which is skipped).
func readBlock(v []byte) (anthropicBlock, error) {
	var b anthropicBlock
	var c checks
	if c.value(v); c.err != nil {
		return b, c.err
	}
	var thinking, signature []byte
	var buf [32]byte
	eachMember(v, func(key, val []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "type":
			b.typ = val
		case "text":
			b.text = val
		case "source":
			b.source = val
		case "id":
			b.id = val
		case "name":
			b.name = val
		case "input":
			b.input = val
		case "tool_use_id":
			b.toolUseID = val
		case "content":
			b.content = val
		case "is_error":
			b.isError = val
		case "thinking":
			thinking = val
		case "signature":
			signature = val
		}
		return nil
	})
	c.str(b.typ, "type")
	c.str(b.text, "text")
	c.object(b.source, "source")
	c.str(b.id, "id")
	c.str(b.name, "name")
	c.str(b.toolUseID, "tool_use_id")
	c.boolean(b.isError, "is_error")
	c.str(thinking, "thinking")
	c.str(signature, "signature")
	if c.err == nil {
		_, c.err = readImageSource(b.source)
	}
	return b, c.err
}

func readImageSource(v []byte) (imageSource, error) {
	var s imageSource
	var buf [32]byte
	eachMember(v, func(key, val []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "type":
			s.typ = val
		case "media_type":
			s.mediaType = val
		case "data":
			s.data = val
		case "url":
			s.url = val
		}
		return nil
	})
	var c checks
	c.str(s.typ, "source.type")
	c.str(s.mediaType, "source.media_type")
	c.str(s.data, "source.data")
	c.str(s.url, "source.url")
	return s, c.err
}

// AnthropicToOpenAI maps an Anthropic Messages request to an OpenAI chat completion request.
// thinking and cache_control have no counterpart and are dropped, as are unknown fields. A
// request of more than MaxItems messages, blocks and tools fails with ErrTooLarge.
func AnthropicToOpenAI(body []byte) ([]byte, Request, error) {
	r, err := readAnthropicRequest(body)
	if err != nil {
		return nil, Request{}, err
	}
	b, err := mapBody(r.writeOpenAI)
	if err != nil {
		return nil, Request{}, err
	}
	model, _ := unquote(r.model)
	return b, Request{Model: model, Stream: isTrue(r.stream)}, nil
}

func (r *anthropicRequest) writeOpenAI(o *out) error {
	o.str(`{"model":`)
	o.value(r.model)
	o.str(`,"messages":`)
	if err := r.writeMessages(o); err != nil {
		return err
	}
	for _, p := range []struct {
		name string
		v    []byte
	}{{"max_tokens", r.maxTokens}, {"temperature", r.temperature}, {"top_p", r.topP}, {"top_k", r.topK}} {
		if p.v != nil {
			o.str(`,"`)
			o.str(p.name)
			o.str(`":`)
			o.raw(p.v)
		}
	}
	var stop comma
	eachElement(r.stopSequences, func(_ int, v []byte) error {
		if !stop {
			o.str(`,"stop":[`)
		}
		stop.next(o)
		o.value(v)
		return nil
	})
	if stop {
		o.str("]")
	}
	if isTrue(r.stream) {
		o.str(`,"stream":true,"stream_options":{"include_usage":true}`)
	}
	if err := r.writeTools(o); err != nil {
		return err
	}
	c := r.choice
	switch {
	case is(c.typ, "auto"):
		o.str(`,"tool_choice":"auto"`)
	case is(c.typ, "any"):
		o.str(`,"tool_choice":"required"`)
	case is(c.typ, "none"):
		o.str(`,"tool_choice":"none"`)
	case is(c.typ, "tool"):
		o.str(`,"tool_choice":{"type":"function","function":{"name":`)
		o.value(c.name)
		o.str("}}")
	}
	if isTrue(c.disableParallel) {
		o.str(`,"parallel_tool_calls":false`)
	}
	if !isEmpty(r.userID) {
		o.str(`,"user":`)
		o.raw(r.userID)
	}
	o.str("}")
	return nil
}

// writeTools writes the client's tools as functions; server tools (web search, code
// execution) are left out: the model server has none.
func (r *anthropicRequest) writeTools(o *out) error {
	var tools comma
	err := eachElement(r.tools, func(i int, v []byte) error {
		if err := o.count(); err != nil {
			return err
		}
		var c checks
		var typ, name, description, schema []byte
		if c.value(v); c.err != nil {
			return at(c.err, "tools[%d]", i)
		}
		var buf [32]byte
		eachMember(v, func(key, val []byte) error {
			switch string(fieldName(key, buf[:])) {
			case "type":
				typ = val
			case "name":
				name = val
			case "description":
				description = val
			case "input_schema":
				schema = val
			}
			return nil
		})
		c.str(typ, "type")
		c.str(name, "name")
		c.str(description, "description")
		if c.err != nil {
			return at(c.err, "tools[%d]", i)
		}
		if !isEmpty(typ) && !is(typ, "custom") {
			return nil
		}
		if !tools {
			o.str(`,"tools":[`)
		}
		tools.next(o)
		writeTool(o, `{"type":"function","function":`, name, description, `,"parameters":`, schema, "}")
		return nil
	})
	if tools {
		o.str("]")
	}
	return err
}

// writeMessages writes the messages list: the system prompt first, as a system message.
func (r *anthropicRequest) writeMessages(o *out) error {
	o.str("[")
	var msgs comma
	if kind(r.system) == '[' {
		if err := o.countElements(r.system); err != nil {
			return err
		}
	}
	pieces, empty := 0, true
	err := eachSystemText(r.system, func(t []byte) {
		pieces++
		empty = empty && isEmpty(t)
	})
	if err != nil {
		return err
	}
	// The pieces are joined by blank lines: two empty ones still make text.
	if pieces > 1 || !empty {
		msgs.next(o)
		o.str(`{"role":"system","content":"`)
		var sep bool
		eachSystemText(r.system, func(t []byte) {
			if sep {
				o.str(`\n\n`)
			}
			sep = true
			o.text(t)
		})
		o.str(`"}`)
	}
	err = eachElement(r.messages, func(i int, m []byte) error {
		if err := o.count(); err != nil {
			return err
		}
		if err := writeAnthropicMessage(o, m, &msgs); err != nil {
			return at(err, "messages[%d]", i)
		}
		return nil
	})
	o.str("]")
	return err
}

// eachSystemText calls f with each piece of the system prompt's text: the string, or the
// text of each text block.
func eachSystemText(system []byte, f func(text []byte)) error {
	if kind(system) == '"' {
		f(system)
		return nil
	}
	return eachElement(system, func(j int, v []byte) error {
		b, err := readBlock(v)
		if err != nil {
			return at(err, "system[%d]", j)
		}
		if is(b.typ, "text") {
			f(b.text)
		}
		return nil
	})
}

// writeAnthropicMessage writes one message as OpenAI messages: a tool message per tool
// result, then one with the rest (text and images, tool calls), if there is any. Text alone
// becomes a string; a role that takes no list (system, assistant) gets its texts joined.
func writeAnthropicMessage(o *out, m []byte, msgs *comma) error {
	var c checks
	if c.value(m); c.err != nil {
		return c.err
	}
	var role, content []byte
	var buf [32]byte
	eachMember(m, func(key, v []byte) error {
		switch string(fieldName(key, buf[:])) {
		case "role":
			role = v
		case "content":
			content = v
		}
		return nil
	})
	if c.str(role, "role"); c.err != nil {
		return c.err
	}
	as := "user"
	switch {
	case is(role, "assistant"):
		as = "assistant"
	case is(role, "system"):
		as = "system"
	}
	switch kind(content) {
	case 'n', '"': // null reads as the empty string
		msgs.next(o)
		o.str(`{"role":"`)
		o.str(as)
		o.str(`","content":`)
		o.value(content)
		o.str("}")
		return nil
	case '[':
	default:
		return &typeError{path: "content", want: "a string or an array"}
	}
	parts, calls, textOnly := 0, 0, true
	err := eachElement(content, func(j int, v []byte) error {
		if err := o.count(); err != nil {
			return err
		}
		b, err := readBlock(v)
		if err != nil {
			return at(err, "content[%d]", j)
		}
		switch {
		case is(b.typ, "text"):
			parts++
		case is(b.typ, "image"):
			if hasImage(b.source) {
				parts++
				textOnly = false
			}
		case is(b.typ, "tool_use"):
			calls++
		case is(b.typ, "tool_result"):
			return writeToolMessage(o, b, msgs)
		}
		// thinking, redacted_thinking, documents and server tools have no chat counterpart.
		return nil
	})
	if err != nil || parts+calls == 0 {
		return err
	}
	msgs.next(o)
	o.str(`{"role":"`)
	o.str(as)
	o.str(`","content":`)
	switch {
	case parts == 0:
		o.str("null")
	case textOnly && (parts == 1 || as != "user"):
		o.str(`"`)
		var sep bool
		eachBlock(content, func(b anthropicBlock) {
			if is(b.typ, "text") {
				if sep {
					o.str(`\n\n`)
				}
				sep = true
				o.text(b.text)
			}
		})
		o.str(`"`)
	default:
		o.str("[")
		var ps comma
		eachBlock(content, func(b anthropicBlock) {
			switch {
			case is(b.typ, "text"):
				ps.next(o)
				o.str(`{"type":"text","text":`)
				o.value(b.text)
				o.str("}")
			case is(b.typ, "image") && hasImage(b.source):
				ps.next(o)
				o.str(`{"type":"image_url","image_url":{"url":"`)
				writeImageURL(o, b.source)
				o.str(`"}}`)
			}
		})
		o.str("]")
	}
	if calls > 0 {
		o.str(`,"tool_calls":[`)
		var cs comma
		eachBlock(content, func(b anthropicBlock) {
			if !is(b.typ, "tool_use") {
				return
			}
			cs.next(o)
			o.str("{")
			if !isEmpty(b.id) {
				o.str(`"id":`)
				o.raw(b.id)
				o.str(",")
			}
			o.str(`"type":"function","function":{`)
			if !isEmpty(b.name) {
				o.str(`"name":`)
				o.raw(b.name)
				o.str(",")
			}
			o.str(`"arguments":"`)
			if present(b.input) == nil {
				o.str("{}")
			} else {
				o.escaped(b.input, true)
			}
			o.str(`"}}`)
		})
		o.str("]")
	}
	o.str("}")
	return nil
}

// eachBlock calls f with each block of content, read already once without error.
func eachBlock(content []byte, f func(b anthropicBlock)) {
	eachElement(content, func(_ int, v []byte) error {
		b, _ := readBlock(v)
		f(b)
		return nil
	})
}

// writeToolMessage writes a tool result as a tool message: its content flattened to text.
func writeToolMessage(o *out, b anthropicBlock, msgs *comma) error {
	if err := o.countElements(b.content); err != nil {
		return err
	}
	msgs.next(o)
	o.str(`{"role":"tool","content":"`)
	if isTrue(b.isError) {
		o.str("Error: ")
	}
	writeToolResultText(o, b.content)
	o.str(`"`)
	if !isEmpty(b.toolUseID) {
		o.str(`,"tool_call_id":`)
		o.raw(b.toolUseID)
	}
	o.str("}")
	return nil
}

// writeToolResultText writes a tool result's content as text: a string as it is, text
// blocks joined by newlines, anything else (a list that is not of blocks, an object) as its
// JSON.
func writeToolResultText(o *out, content []byte) {
	switch kind(content) {
	case 0, 'n':
		return
	case '"':
		o.text(content)
		return
	case '[':
		blocks := eachElement(content, func(_ int, v []byte) error {
			_, err := readBlock(v)
			return err
		}) == nil
		if blocks {
			var sep bool
			eachBlock(content, func(b anthropicBlock) {
				if is(b.typ, "text") {
					if sep {
						o.str(`\n`)
					}
					sep = true
					o.text(b.text)
				}
			})
			return
		}
	}
	o.escaped(content, false)
}

// hasImage reports whether an image block's source makes an image URL.
func hasImage(v []byte) bool {
	s, _ := readImageSource(v)
	return is(s.typ, "base64") || is(s.typ, "url") && !isEmpty(s.url)
}

// writeImageURL writes the text of an image source's URL: a data: URL for base64 data.
func writeImageURL(o *out, v []byte) {
	s, _ := readImageSource(v)
	if is(s.typ, "url") {
		o.text(s.url)
		return
	}
	o.str("data:")
	o.text(s.mediaType)
	o.str(";base64,")
	o.text(s.data)
}
