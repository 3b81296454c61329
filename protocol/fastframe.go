package protocol

import (
	"bytes"
	"math"
)

// The hand-written decoder of the hot frames. The reflective decode of every response_chunk
// was 13-20% of the server's CPU, so frames of the shape peers actually send are decoded here
// in one pass, and the rest keeps going through encoding/json.
//
// The rule that keeps the two decoders equal on every input (FuzzHotFrameDecode checks it):
// the fast path only ever answers with a message, never with an error, and it answers only
// when it is certain encoding/json would give the same message. Whatever it is not sure of it
// declines, and decodeWorkerReflective / decodeServerReflective decide. It declines on
//   - a type that is not hot for the direction, or a type written with escapes;
//   - any key other than the exact, unescaped names of the hot fields (unknown fields, keys
//     differing in case, which encoding/json would still match, escaped keys);
//   - a key given twice (encoding/json merges maps and objects across duplicates);
//   - null anywhere, and a value of another JSON type than the field's;
//   - a number that is not plain digits or does not fit the field;
//   - a frame the reflective path would reject: invalid JSON, trailing bytes, a missing or
//     empty request_id, a chunk without chunk, a status outside 100-999, an unusual reason.
// Strings are unescaped exactly as encoding/json does (\uXXXX and surrogate pairs, a lone
// surrogate or an invalid UTF-8 byte becoming U+FFFD).

// direction says which decoder is asking, since each accepts only its peer's frames.
type direction uint8

const (
	workerDirection direction = iota // frames a worker sends
	serverDirection                  // frames a server sends
)

// hotKind is the decoded frame's type, zero until a hot "type" is read.
type hotKind uint8

const (
	kindNone hotKind = iota
	kindChunk
	kindComplete
	kindRequest
	kindCancel
)

// hotKindOf maps the raw (unescaped) type name to a kind this direction decodes by hand.
func hotKindOf(name []byte, dir direction) hotKind {
	switch dir {
	case workerDirection:
		switch string(name) {
		case "response_chunk":
			return kindChunk
		case "response_complete":
			return kindComplete
		}
	case serverDirection:
		switch string(name) {
		case "request":
			return kindRequest
		case "cancel":
			return kindCancel
		}
	}
	return kindNone
}

// Bits of hotFields.seen, one per accepted key, to decline duplicates.
const (
	seenType uint16 = 1 << iota
	seenRequestID
	seenModel
	seenEndpointPath
	seenIsStreaming
	seenBody
	seenChunk
	seenHeaders
	seenStatusCode
	seenTokenCounts
	seenReason
)

// hotFields is what one pass over a frame finds: the values of the hot fields, strings still
// as spans of the input, so only the strings the message keeps are ever copied.
type hotFields struct {
	kind        hotKind
	seen        uint16
	requestID   span
	model       span
	endpoint    span
	body        span
	chunk       span
	reason      span
	reasonOther bool // reason was {"other":"…"}
	isStreaming bool
	statusCode  uint16
	tokens      [3]uint32
	tokensSet   [3]bool

	// The headers' name and value spans in input order: the first maxStackHeaders pairs in
	// hdr, so a typical frame needs no allocation for them, the rest in moreHdr.
	hdr     [2 * maxStackHeaders]span
	nHdr    int
	moreHdr []span
}

// addHeader keeps one name and its value.
func (f *hotFields) addHeader(name, value span) {
	if f.nHdr+2 <= len(f.hdr) {
		f.hdr[f.nHdr], f.hdr[f.nHdr+1] = name, value
		f.nHdr += 2
		return
	}
	f.moreHdr = append(f.moreHdr, name, value)
}

// headerSpans returns the kept names and values, name first, in input order, in two parts.
func (f *hotFields) headerSpans() (first, rest []span) {
	return f.hdr[:f.nHdr], f.moreHdr
}

// decodeHot decodes a hot frame by hand; ok is false whenever the reflective decoder must
// decide (see the rules above). It never panics and allocates only what the message keeps.
func decodeHot(data []byte, dir direction) (Message, bool) {
	p := hotParser{d: data, dir: dir}
	if !p.frame() {
		return nil, false
	}
	return p.f.message(data)
}

// hotParser reads one frame strictly; every method returns false on anything it declines.
type hotParser struct {
	d   []byte
	i   int
	dir direction
	f   hotFields
}

// frame reads the top-level object and checks only whitespace follows it.
func (p *hotParser) frame() bool {
	if !p.eat('{') {
		return false
	}
	for {
		key, ok := p.str()
		if !ok || !key.plain || !p.eat(':') || !p.field(p.d[key.start:key.end]) {
			return false
		}
		switch p.next() {
		case ',':
			continue
		case '}':
			p.ws()
			return p.i == len(p.d) && p.f.kind != kindNone
		}
		return false
	}
}

// field reads the value of one top-level key into p.f.
func (p *hotParser) field(key []byte) bool {
	bit, ok := fieldBit(key)
	if !ok || p.f.seen&bit != 0 {
		return false
	}
	p.f.seen |= bit
	switch bit {
	case seenType:
		t, ok := p.str()
		if !ok || !t.plain {
			return false
		}
		p.f.kind = hotKindOf(p.d[t.start:t.end], p.dir)
		return p.f.kind != kindNone // a cold frame: stop reading at once
	case seenRequestID:
		p.f.requestID, ok = p.str()
	case seenModel:
		p.f.model, ok = p.str()
	case seenEndpointPath:
		p.f.endpoint, ok = p.str()
	case seenBody:
		p.f.body, ok = p.str()
	case seenChunk:
		p.f.chunk, ok = p.str()
	case seenIsStreaming:
		p.f.isStreaming, ok = p.bool()
	case seenStatusCode:
		var v uint64
		v, ok = p.uint(math.MaxUint16)
		p.f.statusCode = uint16(v)
	case seenHeaders:
		ok = p.headers()
	case seenTokenCounts:
		ok = p.tokenCounts()
	case seenReason:
		ok = p.reason()
	}
	return ok
}

// fieldBit names the keys the fast path reads: the fields of the hot frames as the union
// struct frame declares them. Every other key is declined.
func fieldBit(key []byte) (uint16, bool) {
	switch string(key) {
	case "type":
		return seenType, true
	case "request_id":
		return seenRequestID, true
	case "model":
		return seenModel, true
	case "endpoint_path":
		return seenEndpointPath, true
	case "is_streaming":
		return seenIsStreaming, true
	case "body":
		return seenBody, true
	case "chunk":
		return seenChunk, true
	case "headers":
		return seenHeaders, true
	case "status_code":
		return seenStatusCode, true
	case "token_counts":
		return seenTokenCounts, true
	case "reason":
		return seenReason, true
	}
	return 0, false
}

// headers reads a string-to-string object. Repeated names are kept in order: the map then
// holds the last, as encoding/json's does. (frame, headers and tokenCounts each write out the
// object loop: one helper taking a per-member closure measured 8% slower on request frames.)
func (p *hotParser) headers() bool {
	if !p.eat('{') {
		return false
	}
	if p.peekAfterSpace() == '}' {
		p.i++
		return true
	}
	for {
		name, ok := p.str()
		if !ok || !p.eat(':') {
			return false
		}
		value, ok := p.str()
		if !ok {
			return false
		}
		p.f.addHeader(name, value)
		switch p.next() {
		case ',':
			continue
		case '}':
			return true
		}
		return false
	}
}

// tokenCountIndex is the index in hotFields.tokens of a token_counts key, -1 for another key.
func tokenCountIndex(key []byte) int {
	switch string(key) {
	case "prompt_tokens":
		return 0
	case "completion_tokens":
		return 1
	case "total_tokens":
		return 2
	}
	return -1
}

// tokenCounts reads {prompt_tokens?, completion_tokens?, total_tokens?} with uint32 values.
func (p *hotParser) tokenCounts() bool {
	if !p.eat('{') {
		return false
	}
	if p.peekAfterSpace() == '}' {
		p.i++
		return true
	}
	for {
		key, ok := p.str()
		if !ok || !key.plain || !p.eat(':') {
			return false
		}
		idx := tokenCountIndex(p.d[key.start:key.end])
		if idx < 0 || p.f.tokensSet[idx] {
			return false
		}
		v, ok := p.uint(math.MaxUint32)
		if !ok {
			return false
		}
		p.f.tokens[idx], p.f.tokensSet[idx] = uint32(v), true
		switch p.next() {
		case ',':
			continue
		case '}':
			return true
		}
		return false
	}
}

// reason reads a cancel reason: a string, or exactly {"other":"…"}.
func (p *hotParser) reason() bool {
	if p.peekAfterSpace() == '"' {
		var ok bool
		p.f.reason, ok = p.str()
		return ok
	}
	if !p.eat('{') {
		return false
	}
	key, ok := p.str()
	if !ok || !key.plain || string(p.d[key.start:key.end]) != "other" || !p.eat(':') {
		return false
	}
	p.f.reason, ok = p.str()
	p.f.reasonOther = true
	return ok && p.eat('}')
}

// ws skips JSON whitespace.
func (p *hotParser) ws() {
	for p.i < len(p.d) {
		switch p.d[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// peekAfterSpace skips whitespace and returns the next byte without reading it, 0 at the end.
func (p *hotParser) peekAfterSpace() byte {
	p.ws()
	if p.i < len(p.d) {
		return p.d[p.i]
	}
	return 0
}

// next skips whitespace and reads one byte, 0 at the end.
func (p *hotParser) next() byte {
	c := p.peekAfterSpace()
	if c != 0 {
		p.i++
	}
	return c
}

// eat reads c after optional whitespace.
func (p *hotParser) eat(c byte) bool {
	if p.peekAfterSpace() != c {
		return false
	}
	p.i++
	return true
}

// bool reads true or false (null is declined: encoding/json would leave the field alone).
func (p *hotParser) bool() (v, ok bool) {
	p.ws()
	rest := p.d[p.i:]
	switch {
	case bytes.HasPrefix(rest, []byte("true")):
		p.i += 4
		return true, true
	case bytes.HasPrefix(rest, []byte("false")):
		p.i += 5
		return false, true
	}
	return false, false
}

// uint reads a number of plain digits no greater than max. Signs, fractions, exponents and
// leading zeros are declined: encoding/json rejects them for an unsigned field (or, for a
// leading zero, the JSON itself), and so will the fallback.
func (p *hotParser) uint(max uint64) (uint64, bool) {
	p.ws()
	start := p.i
	var v uint64
	for p.i < len(p.d) && p.d[p.i] >= '0' && p.d[p.i] <= '9' {
		if p.i-start == 10 { // more digits than any uint32 has
			return 0, false
		}
		v = v*10 + uint64(p.d[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || (digits > 1 && p.d[start] == '0') || v > max {
		return 0, false
	}
	if p.i < len(p.d) && (p.d[p.i] == '.' || p.d[p.i] == 'e' || p.d[p.i] == 'E') {
		return 0, false
	}
	return v, true
}
