package prefix

import (
	"bytes"
	"errors"
	"math"

	"github.com/cespare/xxhash/v2"
)

// Prompt is what placement reads from a request body.
type Prompt struct {
	Blocks  []uint64 // chained hashes of the full BlockSize blocks of the canonical prompt, at most MaxBlocks
	Session string   // OpenAI prompt_cache_key, else user, else Anthropic metadata.user_id; "" if none
}

// ErrNotObject is returned for a body that is not a JSON object.
var ErrNotObject = errors.New("prompt: body is not a JSON object")

const (
	// defaultSchema is what relay/translate writes for a tool without a schema.
	defaultSchema = `{"type":"object","properties":{}}`
	// maxScratch bounds the scratch buffer a Parser keeps between bodies.
	maxScratch = 64 << 10
)

// Parser reads prompts from request bodies in one pass, decoding only the text it hashes.
// The zero value is ready. It is not safe for concurrent use; reuse one (a sync.Pool of
// them) to parse without allocating.
type Parser struct {
	system  section // Anthropic's system, the responses API's instructions
	leading section // the leading system and developer messages
	tools   section
	msgs    section // messages, input items, a completions prompt

	inLead  bool   // only system messages read so far
	scratch []byte // decoded tool-call arguments; an escaped image URL
	media   xxhash.Digest
	c       chain
}

// Parse fills dst from an OpenAI chat completions, completions or responses body or an
// Anthropic messages body, telling them apart by their fields. It reuses dst.Blocks'
// capacity; dst.Session is a new string (the only allocation once the Parser is warm). A
// body that is not a JSON object is an error (dst is then empty); missing or mistyped
// fields only give fewer blocks. Parse walks the body without validating every literal (the
// relay has validated it): it refuses what is not an object or cannot be walked, such as an
// unterminated string or unbalanced brackets.
func (p *Parser) Parse(body []byte, dst *Prompt) error {
	p.start(dst)
	defer p.trim()
	var keys sessionKeys
	r := reader{b: body}
	if !r.enter('{') {
		return ErrNotObject
	}
	for r.next('}') {
		if f := fieldOf(r.key()); f != fieldNone {
			p.member(&r, f, &keys)
		} else {
			r.skip()
		}
	}
	r.ws()
	if r.bad || r.i != len(body) {
		return ErrNotObject
	}
	p.finish(dst, &keys)
	return nil
}

// ParseTop is Parse for a body whose top level was read already (into top, by whoever read it
// first): it reads the members placement needs where they lie, without walking the top level
// again. The body must have been checked: it is read as Parse reads a JSON object.
func (p *Parser) ParseTop(body []byte, top *Top, dst *Prompt) {
	if top.over {
		if p.Parse(body, dst) != nil {
			dst.Blocks, dst.Session = dst.Blocks[:0], ""
		}
		return
	}
	p.start(dst)
	defer p.trim()
	var keys sessionKeys
	for _, m := range top.members[:top.n] {
		r := reader{b: body[:m.end], i: m.value}
		p.member(&r, m.field, &keys)
	}
	p.finish(dst, &keys)
}

func (p *Parser) start(dst *Prompt) {
	dst.Blocks = dst.Blocks[:0]
	dst.Session = ""
	p.system.reset()
	p.leading.reset()
	p.tools.reset()
	p.msgs.reset()
	p.inLead = true
}

func (p *Parser) finish(dst *Prompt, keys *sessionKeys) {
	dst.Session = sessionKey(keys.cacheKey, keys.user, keys.userID)
	dst.Blocks = p.assemble(dst.Blocks)
}

// sessionKeys are the members a session key may come from, as sent.
type sessionKeys struct{ cacheKey, user, userID []byte }

// member reads the value at r of the top-level member f.
func (p *Parser) member(r *reader, f field, keys *sessionKeys) {
	switch f {
	case fieldSystem:
		p.content(r, &p.system, roleSystem)
	case fieldTools:
		p.toolList(r)
	case fieldMessages:
		p.messages(r)
	case fieldPrompt:
		p.completion(r)
	case fieldCacheKey:
		keys.cacheKey = str(r.skip())
	case fieldUser:
		keys.user = str(r.skip())
	case fieldMetadata:
		keys.userID = str(fieldValue(r.skip(), "user_id"))
	}
}

// trim drops a scratch buffer grown by one huge value, so a pooled Parser does not pin it.
func (p *Parser) trim() {
	if cap(p.scratch) > maxScratch {
		p.scratch = nil
	}
}

// sessionKey returns the first key given, unescaped.
func sessionKey(keys ...[]byte) string {
	for _, k := range keys {
		if len(k) == 0 {
			continue
		}
		if bytes.IndexByte(k, '\\') < 0 {
			return string(k)
		}
		return string(appendUnescaped(nil, k, false, math.MaxInt))
	}
	return ""
}

// assemble hashes the sections in canonical order. A section was built as if it opened the
// text; where the text before it ends in a run of the role its first record opens, that
// record continues the run instead, as one stream would have written it.
func (p *Parser) assemble(blocks []uint64) []uint64 {
	c := &p.c
	c.reset(blocks)
	var last byte
	for _, s := range [...]*section{&p.system, &p.leading, &p.tools, &p.msgs} {
		b := s.buf
		if len(b) == 0 {
			continue
		}
		if len(b) >= 2 && b[0] == recordStart && b[1] == last && isRole(last) {
			c.writeString("\n\n")
			b = b[2:]
		}
		c.write(b)
		last = s.last
	}
	blocks, c.blocks = c.blocks, nil
	return blocks
}

func isRole(tag byte) bool { return tag == roleSystem || tag == roleUser || tag == roleAssistant }

// content writes message content: a string, or a list of parts (OpenAI) or blocks
// (Anthropic).
func (p *Parser) content(r *reader, s *section, role byte) {
	switch r.peek() {
	case '"':
		p.text(s, role, r.rawString())
	case '[':
		r.i++
		for r.next(']') {
			if s.full() {
				r.skip()
				continue
			}
			p.part(r, s, role)
		}
	default:
		r.skip()
	}
}

// text writes a JSON string's raw content as a piece of a run of text of role; role 0 is
// inside a tool result, where pieces are not runs. An empty string writes nothing.
func (p *Parser) text(s *section, role byte, raw []byte) {
	if len(raw) == 0 || s.full() {
		return
	}
	if role != 0 {
		s.item(role)
	}
	s.text(raw)
}

// messages reads a list of messages or input items, or the responses API's input string.
func (p *Parser) messages(r *reader) {
	switch r.peek() {
	case '"':
		p.inLead = false
		p.text(&p.msgs, roleUser, r.rawString())
	case '[':
		r.i++
		for r.next(']') {
			if p.msgs.full() {
				r.skip()
				continue
			}
			p.message(r)
		}
	default:
		r.skip()
	}
}

// roleSection says where a message of role goes and with which tag (tagResult for a tool
// message), and ends the leading system messages at the first other one.
func (p *Parser) roleSection(role []byte) (*section, byte) {
	tag := byte(roleUser)
	switch string(role) {
	case "system", "developer":
		if p.inLead {
			return &p.leading, roleSystem
		}
		return &p.msgs, roleSystem
	case "assistant":
		tag = roleAssistant
	case "tool", "function":
		tag = tagResult
	}
	p.inLead = false
	return &p.msgs, tag
}

func isMessage(typ []byte) bool { return len(typ) == 0 || string(typ) == "message" }

// message writes one chat message, Anthropic message or responses input item. Its content
// is written as it is read when its role came first (as SDKs send it); members that arrive
// before what they depend on are kept as spans of the body and written at the end.
func (p *Parser) message(r *reader) {
	if r.peek() != '{' {
		r.skip()
		return
	}
	start := r.i
	r.i++
	undoLeading, undoMsgs, wasLead := p.leading.mark(), p.msgs.mark(), p.inLead
	var typ, role, content, calls, fcall, name, args, output []byte
	haveRole, contentDone := false, false
	for r.next('}') {
		switch string(r.key()) {
		case "type":
			typ = str(r.skip())
		case "role":
			role, haveRole = str(r.skip()), true
		case "content":
			if haveRole && isMessage(typ) && !contentDone && content == nil {
				p.messageContent(r, role)
				contentDone = true
			} else {
				content = r.skip()
			}
		case "tool_calls":
			if contentDone && calls == nil {
				p.toolCalls(r)
			} else {
				calls = r.skip()
			}
		case "function_call":
			fcall = r.skip()
		case "name":
			name = r.skip()
		case "arguments":
			args = r.skip()
		case "output":
			output = r.skip()
		default:
			r.skip()
		}
	}
	if r.bad {
		return
	}
	if !isMessage(typ) {
		// Content written as read belonged to no message after all.
		p.leading.rewind(undoLeading)
		p.msgs.rewind(undoMsgs)
		p.inLead = wasLead
		p.item(typ, r.b[start:r.i], name, args, output)
		return
	}
	switch {
	case content != nil && content[0] == '"':
		s, tag := p.roleSection(role)
		if tag == tagResult {
			p.resultOf(s, content, false)
		} else {
			p.text(s, tag, str(content))
		}
	case content != nil:
		cr := reader{b: content}
		p.messageContent(&cr, role)
	case !contentDone:
		p.roleSection(role) // no content: the role still ends the leading system messages
	}
	if calls != nil {
		cr := reader{b: calls}
		p.toolCalls(&cr)
	}
	if fcall != nil {
		ar := reader{b: fieldValue(fcall, "arguments")}
		p.call(&p.msgs, fieldValue(fcall, "name"), &ar)
	}
}

func (p *Parser) messageContent(r *reader, role []byte) {
	s, tag := p.roleSection(role)
	if tag == tagResult {
		p.result(r, s, false)
		return
	}
	p.content(r, s, tag)
}

// item writes a responses input item that is not a message.
func (p *Parser) item(typ, obj, name, args, output []byte) {
	p.inLead = false
	switch string(typ) {
	case "function_call":
		ar := reader{b: args}
		p.call(&p.msgs, name, &ar)
	case "function_call_output":
		p.resultOf(&p.msgs, output, false)
	case "reasoning":
	default:
		p.other(&p.msgs, roleUser, obj, nil)
	}
}

// toolCalls writes OpenAI's tool_calls: [{"function":{"name":…,"arguments":…}}, …].
func (p *Parser) toolCalls(r *reader) {
	if !r.enter('[') {
		r.skip()
		return
	}
	for r.next(']') {
		if !r.enter('{') {
			r.skip()
			continue
		}
		var name, args []byte
		for r.next('}') {
			if string(r.key()) != "function" || !r.enter('{') {
				r.skip()
				continue
			}
			for r.next('}') {
				switch string(r.key()) {
				case "name":
					name = r.skip()
				case "arguments":
					args = r.skip()
				default:
					r.skip()
				}
			}
		}
		ar := reader{b: args}
		p.call(&p.msgs, name, &ar)
	}
}

// part writes one content part or block; role 0 is a part of a tool result's content.
func (p *Parser) part(r *reader, s *section, role byte) {
	switch r.peek() {
	case '"':
		p.text(s, role, r.rawString())
		return
	case '{':
	default:
		r.skip()
		return
	}
	start := r.i
	r.i++
	var typ, text, refusal, imageURL, source, fileID, name, input, content []byte
	haveType, isError, done := false, false, false
	errorAt := -1 // where "Error: " goes if is_error follows a result written as read
	for r.next('}') {
		switch string(r.key()) {
		case "type":
			typ, haveType = str(r.skip()), true
		case "text":
			text = r.skip()
		case "refusal":
			refusal = r.skip()
		case "image_url":
			imageURL = r.skip()
		case "source":
			source = r.skip()
		case "file_id":
			fileID = r.skip()
		case "name":
			name = r.skip()
		case "is_error":
			isError = string(r.skip()) == "true"
			if isError && errorAt >= 0 {
				s.insert(errorAt, "Error: ")
				errorAt = -1
			}
		case "input":
			if role != 0 && haveType && string(typ) == "tool_use" && name != nil && !done {
				p.call(s, name, r)
				done = true
			} else {
				input = r.skip()
			}
		case "content":
			if role != 0 && haveType && string(typ) == "tool_result" && !done {
				if at := p.result(r, s, isError); !isError {
					errorAt = at
				}
				done = true
			} else {
				content = r.skip()
			}
		default:
			r.skip()
		}
	}
	if done || r.bad {
		return
	}
	switch string(typ) {
	case "text", "input_text", "output_text":
		p.text(s, role, str(text))
		return
	case "image_url", "input_image", "image":
		if h, ok := p.image(imageURL, source, fileID); ok {
			if role != 0 {
				s.item(role)
			}
			s.marker(markImage, h)
			return
		}
	}
	if role != 0 {
		switch string(typ) {
		case "refusal":
			p.text(s, role, str(refusal))
			return
		case "tool_use":
			ir := reader{b: input}
			p.call(s, name, &ir)
			return
		case "tool_result":
			p.resultOf(s, content, isError)
			return
		case "thinking", "redacted_thinking":
			return
		}
	}
	p.other(s, role, r.b[start:r.i], source)
}

// image hashes an image's URL: OpenAI's image_url ({"url":…} or a string), the responses
// API's image_url or file_id, Anthropic's source (base64 as the data: URL relay/translate
// makes of it, or a url).
func (p *Parser) image(imageURL, source, fileID []byte) (uint64, bool) {
	p.media.Reset()
	if source != nil {
		var typ, media, data, url []byte
		sr := reader{b: source}
		if !sr.enter('{') {
			return 0, false
		}
		for sr.next('}') {
			switch string(sr.key()) {
			case "type":
				typ = str(sr.skip())
			case "media_type":
				media = str(sr.skip())
			case "data":
				data = str(sr.skip())
			case "url":
				url = str(sr.skip())
			default:
				sr.skip()
			}
		}
		switch string(typ) {
		case "base64":
			p.media.WriteString("data:")
			p.digest(media)
			p.media.WriteString(";base64,")
			p.digest(data)
		case "url":
			p.digest(url)
		default:
			return 0, false
		}
		return p.media.Sum64(), true
	}
	u := imageURL
	if len(u) > 0 && u[0] == '{' {
		u = fieldValue(u, "url")
	}
	if u == nil {
		u = fileID
	}
	if len(u) == 0 || u[0] != '"' {
		return 0, false
	}
	p.digest(str(u))
	return p.media.Sum64(), true
}

// digest feeds the media hash a JSON string's raw content, unescaped.
func (p *Parser) digest(raw []byte) {
	if bytes.IndexByte(raw, '\\') < 0 {
		p.media.Write(raw)
		return
	}
	p.scratch = appendUnescaped(p.scratch[:0], raw, false, math.MaxInt)
	p.media.Write(p.scratch)
}

// other marks a part with no text of its own (a document, audio, a file, an unknown item)
// by a hash of its JSON as sent: of its source when it has one, so that Anthropic's
// cache_control moving from turn to turn does not change it.
func (p *Parser) other(s *section, role byte, obj, source []byte) {
	if source != nil {
		obj = source
	}
	if role != 0 {
		s.item(role)
	}
	s.marker(markOther, xxhash.Sum64(obj))
}

// call writes a tool call. args is at a JSON string holding the arguments (OpenAI) or at the
// input object itself (Anthropic); both are written as canonical JSON.
func (p *Parser) call(s *section, name []byte, args *reader) {
	if s.full() {
		args.skip()
		return
	}
	s.record(tagCall)
	s.text(str(name))
	s.buf = append(s.buf, fieldSep)
	switch args.peek() {
	case '"':
		p.arguments(s, args.rawString())
	case '{', '[':
		canonJSON(args, s)
	default:
		args.skip()
		s.buf = append(s.buf, "{}"...)
	}
}

// arguments writes the arguments string of an OpenAI tool call: the JSON a model wrote,
// usually valid and then canonical like an Anthropic input, else as sent.
func (p *Parser) arguments(s *section, raw []byte) {
	p.scratch = appendUnescaped(p.scratch[:0], raw, false, maxText)
	if len(bytes.TrimSpace(p.scratch)) == 0 {
		s.buf = append(s.buf, "{}"...)
		return
	}
	m := s.mark()
	ar := reader{b: p.scratch}
	canonJSON(&ar, s)
	if ar.ws(); ar.bad || ar.i != len(ar.b) {
		s.rewind(m)
		s.raw(p.scratch)
	}
}

// result writes a tool result read from r: a string, or parts whose texts are joined by
// "\n". It returns where the result's text starts, for an "Error: " that comes later.
func (p *Parser) result(r *reader, s *section, isError bool) int {
	if s.full() {
		r.skip()
		return -1
	}
	s.record(tagResult)
	at := len(s.buf)
	if isError {
		s.buf = append(s.buf, "Error: "...)
	}
	switch r.peek() {
	case '"':
		s.text(r.rawString())
	case '[':
		r.i++
		for first := true; r.next(']'); first = false {
			if !first {
				s.buf = append(s.buf, '\n')
			}
			if s.full() {
				r.skip()
				continue
			}
			p.part(r, s, 0)
		}
	default:
		r.skip()
	}
	return at
}

// resultOf writes a tool result from its content's span (nil when there was none).
func (p *Parser) resultOf(s *section, content []byte, isError bool) {
	if len(content) > 0 && content[0] == '"' {
		if s.full() {
			return
		}
		s.record(tagResult)
		if isError {
			s.buf = append(s.buf, "Error: "...)
		}
		s.text(str(content))
		return
	}
	cr := reader{b: content}
	p.result(&cr, s, isError)
}

// toolList writes one record per tool: OpenAI chat's {"type":"function","function":{…}},
// the responses API's flat {"type":"function","name":…}, Anthropic's
// {"name":…,"input_schema":…}, and the legacy functions list.
func (p *Parser) toolList(r *reader) {
	if !r.enter('[') {
		r.skip()
		return
	}
	for r.next(']') {
		if p.tools.full() || r.peek() != '{' {
			r.skip()
			continue
		}
		s := &p.tools
		m := s.mark()
		typ, t := p.toolObject(r, s, true)
		switch string(typ) {
		case "", "function", "custom":
		default:
			s.rewind(m) // a server tool (web search, code execution): no model server runs it
			continue
		}
		if !t.written {
			s.record(tagTool)
			s.text(str(t.name))
			s.buf = append(s.buf, fieldSep)
			s.text(str(t.desc))
			s.buf = append(s.buf, fieldSep)
			sr := reader{b: t.schema}
			schema(&sr, s)
		}
	}
}

type toolFields struct {
	name, desc, schema []byte
	written            bool // the record went out as the tool was read
	nested             bool // the fields are those of a "function" object
}

// toolObject reads a tool object's members. When its name and description come before its
// schema (as SDKs send them) it writes the record as it reads the schema; a "function"
// object (OpenAI chat) holds the fields instead, replacing whatever the outer one wrote.
func (p *Parser) toolObject(r *reader, s *section, outer bool) (typ []byte, t toolFields) {
	m := s.mark()
	r.enter('{')
	for r.next('}') {
		switch string(r.key()) {
		case "type":
			typ = str(r.skip())
		case "name":
			if t.nested {
				r.skip()
				continue
			}
			t.name = r.skip()
		case "description":
			if t.nested {
				r.skip()
				continue
			}
			t.desc = r.skip()
		case "parameters", "input_schema":
			if t.nested || t.written || t.schema != nil {
				r.skip()
				continue
			}
			if t.name == nil || t.desc == nil {
				t.schema = r.skip()
				continue
			}
			s.record(tagTool)
			s.text(str(t.name))
			s.buf = append(s.buf, fieldSep)
			s.text(str(t.desc))
			s.buf = append(s.buf, fieldSep)
			schema(r, s)
			t.written = true
		case "function":
			if !outer || t.nested || r.peek() != '{' {
				r.skip()
				continue
			}
			s.rewind(m)
			_, t = p.toolObject(r, s, false)
			t.nested = true
		default:
			r.skip()
		}
	}
	return typ, t
}

// schema writes a tool's parameter schema as canonical JSON, or the default one.
func schema(r *reader, s *section) {
	switch r.peek() {
	case 0, 'n':
		r.skip()
		s.buf = append(s.buf, defaultSchema...)
	default:
		canonJSON(r, s)
	}
}

// completion writes a completions prompt: a string, a list of strings, or token ids (as
// their JSON, which keeps a longer token list's text an extension of a shorter one's).
func (p *Parser) completion(r *reader) {
	s := &p.msgs
	switch r.peek() {
	case '"':
		p.text(s, roleUser, r.rawString())
	case '[':
		start := r.i
		r.i++
		if c := r.peek(); c == '-' || ('0' <= c && c <= '9') {
			r.i = start
			s.item(roleUser)
			canonJSON(r, s)
			return
		}
		for r.next(']') {
			switch {
			case s.full():
				r.skip()
			case r.peek() == '"':
				p.text(s, roleUser, r.rawString())
			case r.peek() == '[':
				s.item(roleUser)
				canonJSON(r, s)
			default:
				r.skip()
			}
		}
	default:
		r.skip()
	}
}

// canonJSON writes the value at r as canonical JSON: compact, members in the order sent,
// numbers as sent, strings unescaped and escaped again only where '"' and '\' need it. So
// `{"a": "\u00fc"}` and `{"a":"ü"}` give the same text, as do an OpenAI arguments string and
// the Anthropic input object it stands for. It is one flat pass that drops the whitespace
// between tokens (no recursion, so no depth to bound); it checks only that brackets balance,
// and once the section is full it reads on without writing.
func canonJSON(r *reader, s *section) {
	if r.peek() == 0 {
		r.bad = true
		return
	}
	depth := 0
	for r.i < len(r.b) && !r.bad {
		switch c := r.b[r.i]; c {
		case ' ', '\t', '\n', '\r':
			r.i++
			continue
		case '"':
			raw := r.rawString()
			if !s.full() {
				s.quoted(raw)
			}
		case '{', '[', '}', ']', ',', ':':
			switch c {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			r.i++
			if !s.full() {
				s.buf = append(s.buf, c)
			}
		default: // a number or a literal
			s.raw(r.skip())
		}
		if depth <= 0 {
			r.bad = r.bad || depth < 0
			return
		}
	}
	r.bad = true
}
