package protocol

// The messages of the hand-written decoder. Each mirrors its case in decodeWorkerReflective
// or decodeServerReflective; where that case would return an error, ok is false and the
// reflective decoder returns it, so the error text has one source.

// message builds the frame's message from the fields one pass found.
func (f *hotFields) message(d []byte) (Message, bool) {
	if f.requestID.n == 0 { // absent or empty: every hot frame needs one
		return nil, false
	}
	a := arena{d: d}
	switch f.kind {
	case kindChunk:
		return f.chunkMessage(&a)
	case kindComplete:
		return f.completeMessage(&a)
	case kindRequest:
		return f.requestMessage(&a)
	case kindCancel:
		return f.cancelMessage(&a)
	}
	return nil, false
}

func (f *hotFields) chunkMessage(a *arena) (Message, bool) {
	if f.seen&seenChunk == 0 {
		return nil, false
	}
	a.reserve(f.requestID)
	a.reserve(f.chunk)
	return ResponseChunk{RequestID: a.take(f.requestID), Chunk: a.take(f.chunk)}, true
}

func (f *hotFields) completeMessage(a *arena) (Message, bool) {
	if f.statusCode < 100 || f.statusCode > 999 {
		return nil, false
	}
	a.reserve(f.requestID)
	a.reserve(f.body)
	f.reserveHeaders(a)
	m := ResponseComplete{RequestID: a.take(f.requestID), StatusCode: f.statusCode}
	m.Headers = f.headerMap(a)
	if f.seen&seenBody != 0 {
		body := a.take(f.body)
		m.Body = &body
	}
	if f.seen&seenTokenCounts != 0 {
		m.TokenCounts = f.tokenCounts()
	}
	return m, true
}

func (f *hotFields) requestMessage(a *arena) (Message, bool) {
	for _, s := range [...]span{f.requestID, f.model, f.endpoint, f.body} {
		a.reserve(s)
	}
	f.reserveHeaders(a)
	return Request{RequestID: a.take(f.requestID), Model: a.take(f.model),
		EndpointPath: a.take(f.endpoint), IsStreaming: f.isStreaming, Body: a.take(f.body),
		Headers: f.headerMap(a)}, true
}

func (f *hotFields) cancelMessage(a *arena) (Message, bool) {
	a.reserve(f.requestID)
	a.reserve(f.reason)
	return Cancel{RequestID: a.take(f.requestID), Reason: CancelReason(a.take(f.reason))}, true
}

func (f *hotFields) reserveHeaders(a *arena) {
	first, rest := f.headerSpans()
	for _, part := range [...][]span{first, rest} {
		for _, s := range part {
			a.reserve(s)
		}
	}
}

// headerMap is nil when the frame has no headers and a map, empty or not, when it has, as
// encoding/json leaves it. A repeated name keeps its last value.
func (f *hotFields) headerMap(a *arena) Headers {
	if f.seen&seenHeaders == 0 {
		return nil
	}
	first, rest := f.headerSpans()
	h := make(Headers, (len(first)+len(rest))/2)
	for _, part := range [...][]span{first, rest} {
		for i := 0; i+1 < len(part); i += 2 {
			h[a.take(part[i])] = a.take(part[i+1])
		}
	}
	return h
}

// tokenCounts allocates the counts and the numbers they point to together.
func (f *hotFields) tokenCounts() *TokenCounts {
	box := &struct {
		tc TokenCounts
		v  [3]uint32
	}{v: f.tokens}
	ptrs := [3]**uint32{&box.tc.PromptTokens, &box.tc.CompletionTokens, &box.tc.TotalTokens}
	for i, set := range f.tokensSet {
		if set {
			*ptrs[i] = &box.v[i]
		}
	}
	return &box.tc
}
