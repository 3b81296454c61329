package protocol

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// The hand-written encoder of the hot frames. Every chunk of every streamed answer is one frame,
// so reflection, the intermediate buffer and the copy in marshalReflective showed in profiles.
// The bytes must be exactly encoding/json's (FuzzHotFrameEncode compares them): fields in
// declaration order, omitempty as the tags say, map keys sorted bytewise, and strings escaped
// as encoding/json escapes them by default (HTML-safe, U+2028/U+2029, invalid UTF-8 as \ufffd).

// marshalHot encodes request, cancel, response_chunk and response_complete; ok is false for
// every other message, which then goes through encoding/json.
func marshalHot(m Message) (b []byte, ok bool) {
	return appendHot(nil, m)
}

// appendHot is marshalHot appending to b.
func appendHot(b []byte, m Message) ([]byte, bool) {
	switch v := m.(type) {
	case ResponseChunk:
		return appendChunk(b, v.RequestID, v.Chunk), true
	case Request:
		return appendRequest(b, v, v.Body), true
	case ResponseComplete:
		return appendComplete(b, v, v.Body), true
	case Cancel:
		return appendCancel(b, v), true
	}
	return b, false
}

// AppendResponseChunk appends the frame of a response_chunk whose chunk is bytes: the worker
// daemon reads a stream into a reused buffer and encodes straight from it.
func AppendResponseChunk(b []byte, requestID string, chunk []byte) []byte {
	return appendChunk(b, requestID, chunk)
}

// AppendResponseComplete appends the frame of c with body as its body (c.Body is not read), so
// an answer read into a reused buffer is encoded without a copy of it as a string.
func AppendResponseComplete(b []byte, c ResponseComplete, body []byte) []byte {
	return appendComplete(b, c, &body)
}

// AppendRequest appends the frame of r with body as its body (r.Body is not read), so the
// server encodes a client's body as it read it.
func AppendRequest(b []byte, r Request, body []byte) []byte {
	return appendRequest(b, r, body)
}

// grow makes room for n more bytes in b; a new frame is allocated at exactly n, so a large
// body is never followed by a rounded-up or doubled buffer.
func grow(b []byte, n int) []byte {
	if b == nil {
		return make([]byte, 0, n)
	}
	return slices.Grow(b, n)
}

// text is what the encoder reads a JSON string from: a string, or bytes.
type text interface{ ~string | ~[]byte }

func appendChunk[T text](b []byte, requestID string, chunk T) []byte {
	const head, mid = `{"type":"response_chunk","request_id":`, `,"chunk":`
	b = grow(b, len(head)+len(mid)+quotedLen(requestID)+quotedLen(chunk)+1)
	b = append(b, head...)
	b = appendQuoted(b, requestID)
	b = append(b, mid...)
	b = appendQuoted(b, chunk)
	return append(b, '}')
}

func appendRequest[T text](b []byte, v Request, body T) []byte {
	const head = `{"type":"request","request_id":`
	n := len(head) + quotedLen(v.RequestID) + len(`,"model":`) + quotedLen(v.Model) +
		len(`,"endpoint_path":`) + quotedLen(v.EndpointPath) + len(`,"is_streaming":`) + boolLen(v.IsStreaming) +
		len(`,"body":`) + quotedLen(body) + headersLen(v.Headers) + 1
	b = grow(b, n)
	b = append(b, head...)
	b = appendQuoted(b, v.RequestID)
	b = append(b, `,"model":`...)
	b = appendQuoted(b, v.Model)
	b = append(b, `,"endpoint_path":`...)
	b = appendQuoted(b, v.EndpointPath)
	b = append(b, `,"is_streaming":`...)
	b = strconv.AppendBool(b, v.IsStreaming)
	b = append(b, `,"body":`...)
	b = appendQuoted(b, body)
	b = appendHeaders(b, v.Headers)
	return append(b, '}')
}

// appendComplete encodes v with *body as its body (nil: none, omitted).
func appendComplete[T text](b []byte, v ResponseComplete, body *T) []byte {
	const head = `{"type":"response_complete","request_id":`
	n := len(head) + quotedLen(v.RequestID) + len(`,"status_code":`) + uintLen(uint64(v.StatusCode)) +
		headersLen(v.Headers) + 1
	if body != nil {
		n += len(`,"body":`) + quotedLen(*body)
	}
	if v.TokenCounts != nil {
		n += len(`,"token_counts":`) + tokenCountsLen(v.TokenCounts)
	}
	b = grow(b, n)
	b = append(b, head...)
	b = appendQuoted(b, v.RequestID)
	b = append(b, `,"status_code":`...)
	b = strconv.AppendUint(b, uint64(v.StatusCode), 10)
	b = appendHeaders(b, v.Headers)
	if body != nil {
		b = append(b, `,"body":`...)
		b = appendQuoted(b, *body)
	}
	if v.TokenCounts != nil {
		b = append(b, `,"token_counts":`...)
		b = appendTokenCounts(b, v.TokenCounts)
	}
	return append(b, '}')
}

// tokenCountKeys are the keys of TokenCounts in declaration order, quoted, with the colon.
var tokenCountKeys = [3]string{`"prompt_tokens":`, `"completion_tokens":`, `"total_tokens":`}

// tokenCountValues lists the counts in the order of tokenCountKeys.
func tokenCountValues(tc *TokenCounts) [3]*uint32 {
	return [3]*uint32{tc.PromptTokens, tc.CompletionTokens, tc.TotalTokens}
}

// tokenCountsLen is the exact length of appendTokenCounts' output.
func tokenCountsLen(tc *TokenCounts) int {
	n := len(`{}`)
	for i, v := range tokenCountValues(tc) {
		if v != nil {
			n += len(`,`) + len(tokenCountKeys[i]) + uintLen(uint64(*v))
		}
	}
	if n > len(`{}`) {
		n-- // no comma before the first
	}
	return n
}

// appendTokenCounts writes the object with only the counts that are set, `{}` when none is.
func appendTokenCounts(b []byte, tc *TokenCounts) []byte {
	b = append(b, '{')
	sep := false
	for i, v := range tokenCountValues(tc) {
		if v == nil {
			continue
		}
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = append(b, tokenCountKeys[i]...)
		b = strconv.AppendUint(b, uint64(*v), 10)
	}
	return append(b, '}')
}

// uintLen is the number of decimal digits of v.
func uintLen(v uint64) int {
	n := 1
	for ; v >= 10; v /= 10 {
		n++
	}
	return n
}

func boolLen(v bool) int {
	if v {
		return len("true")
	}
	return len("false")
}

func appendCancel(b []byte, v Cancel) []byte {
	const head, mid = `{"type":"cancel","request_id":`, `,"reason":`
	n := len(head) + len(mid) + quotedLen(v.RequestID) + quotedLen(string(v.Reason)) + 1
	if !v.Reason.named() {
		n += len(`{"other":}`)
	}
	b = grow(b, n)
	b = append(b, head...)
	b = appendQuoted(b, v.RequestID)
	b = append(b, mid...)
	if v.Reason.named() {
		b = appendQuoted(b, string(v.Reason))
	} else {
		b = append(b, `{"other":`...)
		b = appendQuoted(b, string(v.Reason))
		b = append(b, '}')
	}
	return append(b, '}')
}

// maxStackHeaders is how many header names are sorted without a heap allocation.
const maxStackHeaders = 16

// headersLen is the exact length of appendHeaders' output.
func headersLen(h Headers) int {
	if len(h) == 0 {
		return 0
	}
	n := len(`,"headers":{}`) + len(h) - 1
	for k, v := range h {
		n += quotedLen(k) + 1 + quotedLen(v)
	}
	return n
}

// appendHeaders writes `,"headers":{…}` with the names sorted bytewise, as encoding/json sorts
// map keys; nothing for an empty map (omitempty).
func appendHeaders(b []byte, h Headers) []byte {
	if len(h) == 0 {
		return b
	}
	var stack [maxStackHeaders]string
	names := stack[:0]
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	b = append(b, `,"headers":{`...)
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, k)
		b = append(b, ':')
		b = appendQuoted(b, h[k])
	}
	return append(b, '}')
}

// quotedWidth[c] is how many bytes the byte c takes inside a JSON string when c is ASCII: 1
// when written as is, 2 for the short escapes, 6 for \u00XX (control bytes and, HTML-safe,
// < > &). It is 0 for the bytes of multi-byte UTF-8, which are decoded as runes.
var quotedWidth = func() (t [256]uint8) {
	for c := range utf8.RuneSelf {
		switch {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			t[c] = 2
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			t[c] = 6
		default:
			t[c] = 1
		}
	}
	return t
}()

// quotedLen is the exact length of appendQuoted(nil, s), so each frame is allocated once and
// a 64 MiB body is not followed by a doubled buffer.
func quotedLen[T text](s T) int {
	n := 2
	for i := 0; i < len(s); {
		if w := quotedWidth[s[i]]; w != 0 {
			n += int(w)
			i++
			continue
		}
		r, size := decodeRune(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			n += 6
		} else {
			n += size
		}
		i += size
	}
	return n
}

const hexDigits = "0123456789abcdef"

// decodeRune is utf8.DecodeRune for either kind of text.
func decodeRune[T text](s T) (rune, int) {
	var head [utf8.UTFMax]byte
	return utf8.DecodeRune(head[:copy(head[:], s)])
}

// appendQuoted appends s as a JSON string exactly as encoding/json writes it by default.
func appendQuoted[T text](b []byte, s T) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if w := quotedWidth[c]; w != 0 {
			if w == 1 {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			b = appendASCIIEscape(b, c)
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendASCIIEscape writes the escape of one ASCII byte that cannot go into a string as is.
func appendASCIIEscape(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
}
