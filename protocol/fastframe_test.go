package protocol

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// The hand-written codec must be invisible: the same bytes out, the same values (or the same
// error) in, as encoding/json. These tests and the two fuzz targets compare it with the
// reflective code it replaces on the hot frames.

// hotMessages are hot frames with the values that exercise encoding/json's rules: escapes,
// HTML-safe escaping, U+2028/U+2029, invalid UTF-8, omitempty, sorted map keys, zero values.
var hotMessages = []Message{
	ResponseChunk{RequestID: "r-002", Chunk: "data: {\"choices\":[]}\n\n"},
	ResponseChunk{},
	ResponseChunk{RequestID: "<&>", Chunk: "\x00\x01\x1f\x7f \b\f\n\r\t\\\"/ é 😀 \u2028\u2029 \xff\xfe \xed\xa0\x80 \ufffd"},
	Request{RequestID: "req-42", Model: "gpt-oss-120b", EndpointPath: "/v1/chat/completions",
		IsStreaming: true, Body: `{"model":"gpt-oss-120b","stream":true}`,
		Headers: Headers{"x-trace-id": "trace-123", "authorization": "Bearer token", "Z": "", "": "empty name", "é": "<script>"}},
	Request{RequestID: "r-001", Model: "llama3-8b", EndpointPath: "/v1/chat/completions", Body: "{}"},
	Request{Headers: Headers{}},
	Request{},
	ResponseComplete{RequestID: "r-001", StatusCode: 200, Headers: Headers{"content-type": "application/json"},
		Body: Ptr(`{"choices":[]}`), TokenCounts: &TokenCounts{PromptTokens: Ptr[uint32](42),
			CompletionTokens: Ptr[uint32](128), TotalTokens: Ptr[uint32](170)}},
	ResponseComplete{RequestID: "r-002", StatusCode: 65535, Body: Ptr(""), Headers: Headers{}},
	ResponseComplete{TokenCounts: &TokenCounts{}},
	ResponseComplete{TokenCounts: &TokenCounts{TotalTokens: Ptr[uint32](4294967295)}},
	ResponseComplete{TokenCounts: &TokenCounts{PromptTokens: Ptr[uint32](0), TotalTokens: Ptr[uint32](1)}},
	Cancel{RequestID: "r", Reason: CancelClientDisconnect},
	Cancel{RequestID: "r", Reason: CancelServerShutdown},
	Cancel{RequestID: "r", Reason: "stream exceeded size limit <x>"},
	Cancel{},
}

func TestHotFramesEncodeLikeEncodingJSON(t *testing.T) {
	many := Headers{}
	for i := range 3 * maxStackHeaders { // more names than the sort keeps on the stack
		many[strings.Repeat("h", i%7)+string(rune('a'+i))] = "v"
	}
	for _, m := range append(hotMessages, Request{RequestID: "x", Headers: many}) {
		checkEncode(t, m)
	}
}

func checkEncode(t *testing.T, m Message) {
	t.Helper()
	fast, ok := marshalHot(m)
	if !ok {
		t.Fatalf("%T is not encoded by hand", m)
	}
	want, err := marshalReflective(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fast, want) {
		t.Fatalf("%#v\n hand %s\n json %s", m, fast, want)
	}
	if cap(fast) != len(fast) { // sized exactly: allocated once, and never twice a body
		t.Errorf("%T: buffer sized %d for %d bytes", m, cap(fast), len(fast))
	}
	// Appended after bytes already in a buffer, and from bytes instead of strings, the frame
	// is the same.
	prefix := []byte("frames before|")
	appended, err := AppendMarshal(bytes.Clone(prefix), m)
	if err != nil || !bytes.Equal(appended, append(bytes.Clone(prefix), want...)) {
		t.Fatalf("AppendMarshal(%#v) = %s, %v", m, appended, err)
	}
	var fromBytes []byte
	switch v := m.(type) {
	case ResponseChunk:
		fromBytes = AppendResponseChunk(nil, v.RequestID, []byte(v.Chunk))
	case Request:
		fromBytes = AppendRequest(nil, v, []byte(v.Body))
	case ResponseComplete:
		if v.Body == nil {
			return // the bytes form always has a body
		}
		fromBytes = AppendResponseComplete(nil, v, []byte(*v.Body))
	default:
		return
	}
	if !bytes.Equal(fromBytes, want) {
		t.Fatalf("%#v from bytes\n hand %s\n json %s", m, fromBytes, want)
	}
}

func TestColdFramesStayReflective(t *testing.T) {
	for _, m := range []Message{Ping{}, Pong{}, Register{}, Error{}, &ResponseChunk{}} {
		if _, ok := marshalHot(m); ok {
			t.Errorf("%T encoded by hand", m)
		}
	}
}

// canonicalHotFrames must take the fast path: they are what Go and Rust peers send.
var canonicalHotFrames = []struct {
	dir   direction
	frame string
}{
	{workerDirection, `{"type":"response_chunk","request_id":"r-002","chunk":"data: {\"choices\":[]}\n\n"}`},
	{workerDirection, `{"type":"response_chunk","request_id":"x","chunk":"\u00e9\ud83d\ude00 \u003c\u2028"}`},
	{workerDirection, `{"type":"response_chunk","request_id":"x","chunk":""}`},
	{workerDirection, `{"type":"response_complete","request_id":"r-001","status_code":200,"headers":{"content-type":"application/json"},"body":"{\"choices\":[]}","token_counts":{"prompt_tokens":42,"completion_tokens":128,"total_tokens":170}}`},
	{workerDirection, `{"type":"response_complete","request_id":"r-002","status_code":200}`},
	{workerDirection, `{"type":"response_complete","request_id":"r-003","status_code":499,"body":"","headers":{},"token_counts":{}}`},
	{workerDirection, " {\n\t\"request_id\" : \"r\" ,\r\"status_code\":999, \"type\":\"response_complete\" } \n"},
	{serverDirection, `{"type":"request","request_id":"req-42","model":"gpt-oss-120b","endpoint_path":"/v1/chat/completions","is_streaming":true,"body":"{\"model\":\"gpt-oss-120b\",\"stream\":true}","headers":{"authorization":"Bearer token","x-trace-id":"trace-123"}}`},
	{serverDirection, `{"type":"request","request_id":"r-001","model":"llama3-8b","endpoint_path":"/v1/chat/completions","is_streaming":false,"body":"{}"}`},
	{serverDirection, `{"type":"request","request_id":"r","headers":{"a":"1","a":"2"}}`},
	{serverDirection, `{"type":"cancel","request_id":"r-002","reason":"client_disconnect"}`},
	{serverDirection, `{"type":"cancel","request_id":"r","reason":{"other":"stream exceeded size limit"}}`},
	{serverDirection, `{"type":"cancel","request_id":"r"}`},
}

func TestCanonicalHotFramesTakeTheFastPath(t *testing.T) {
	for _, c := range canonicalHotFrames {
		if _, ok := decodeHot([]byte(c.frame), c.dir); !ok {
			t.Errorf("declined: %s", c.frame)
		}
		checkDecode(t, []byte(c.frame))
	}
	for _, m := range hotMessages {
		b, _ := Marshal(m)
		checkDecode(t, b)
	}
}

// unusualFrames are the inputs the fast path must decline or get exactly right.
var unusualFrames = []string{
	``, ` `, `null`, `{}`, `[]`, `"x"`, `{"type":"response_chunk"`, `{"type":"response_chunk",}`,
	`{"type":"response_chunk","request_id":"x","chunk":"y"}x`,
	`{"type":"response_chunk","request_id":"x","chunk":"y"}{}`,
	`{"type":"response_chunk","request_id":"x","chunk":"y","future":1}`,
	`{"type":"response_chunk","request_id":"x","chunk":"y","model":7}`,
	`{"type":"response_chunk","request_id":"x","chunk":"y","model":"m","is_streaming":true}`,
	`{"type":"response_chunk","request_id":"x","chunk":"y","status_code":70000}`,
	`{"type":"response_chunk","request_id":"x","chunk":"y","status_code":-1}`,
	`{"type":"response_chunk","Request_ID":"x","chunk":"y"}`,
	`{"TYPE":"response_chunk","request_id":"x","chunk":"y"}`,
	`{"type":"response_chunk","request_\u0069d":"x","chunk":"y"}`,
	`{"type":"response\u005fchunk","request_id":"x","chunk":"y"}`,
	`{"type":"response_chunk","request_id":"x","request_id":"z","chunk":"y"}`,
	`{"type":"response_chunk","request_id":"x","chunk":"y","type":"response_complete"}`,
	`{"type":"response_chunk","request_id":"x","chunk":null}`,
	`{"type":"response_chunk","request_id":null,"chunk":"y"}`,
	`{"type":"response_chunk","request_id":"","chunk":"y"}`,
	`{"type":"response_chunk","request_id":"x"}`,
	`{"type":"response_chunk","request_id":"x","chunk":"\ud800"}`,
	`{"type":"response_chunk","request_id":"x","chunk":"\ud800\u0041\udc00\ud83d\ude00\ude00\ud83d"}`,
	`{"type":"response_chunk","request_id":"x","chunk":"\ud83d\u"}`,
	`{"type":"response_chunk","request_id":"x","chunk":"\'"}`,
	`{"type":"response_chunk","request_id":"x","chunk":"\x"}`,
	"{\"type\":\"response_chunk\",\"request_id\":\"x\",\"chunk\":\"\x01\"}",
	"{\"type\":\"response_chunk\",\"request_id\":\"x\",\"chunk\":\"\xff\xc3\xed\xa0\x80\x7f\"}",
	"{\"type\":\"response_chunk\",\"request_id\":\"\xff\",\"chunk\":\"\"}",
	"\xef\xbb\xbf{\"type\":\"response_chunk\",\"request_id\":\"x\",\"chunk\":\"\"}",
	`{"type":"response_complete","request_id":"x","status_code":200.0}`,
	`{"type":"response_complete","request_id":"x","status_code":2e2}`,
	`{"type":"response_complete","request_id":"x","status_code":0200}`,
	`{"type":"response_complete","request_id":"x","status_code":99}`,
	`{"type":"response_complete","request_id":"x","status_code":1000}`,
	`{"type":"response_complete","request_id":"x","status_code":"200"}`,
	`{"type":"response_complete","request_id":"x","status_code":00}`,
	`{"type":"response_complete","request_id":"x","status_code":200,"headers":null}`,
	`{"type":"response_complete","request_id":"x","status_code":200,"headers":{"a":null}}`,
	`{"type":"response_complete","request_id":"x","status_code":200,"headers":{"a":1}}`,
	`{"type":"response_complete","request_id":"x","status_code":200,"headers":{"a":"1",}}`,
	`{"type":"response_complete","request_id":"x","status_code":200,"headers":{"a":"1"},"headers":{"b":"2"}}`,
	`{"type":"response_complete","request_id":"x","status_code":200,"body":null}`,
	`{"type":"response_complete","request_id":"x","status_code":200,"token_counts":null}`,
	`{"type":"response_complete","request_id":"x","status_code":200,"token_counts":{"prompt_tokens":4294967296}}`,
	`{"type":"response_complete","request_id":"x","status_code":200,"token_counts":{"prompt_tokens":99999999999}}`,
	`{"type":"response_complete","request_id":"x","status_code":200,"token_counts":{"Prompt_Tokens":1}}`,
	`{"type":"response_complete","request_id":"x","status_code":200,"token_counts":{"prompt_tokens":1,"prompt_tokens":2}}`,
	`{"type":"response_complete","request_id":"x","status_code":200,"token_counts":{"future":1}}`,
	`{"type":"response_complete","request_id":"x","status_code":200,"token_counts":[]}`,
	`{"type":"request","request_id":"x"}`,
	`{"type":"request","request_id":"x","is_streaming":null}`,
	`{"type":"request","request_id":"x","is_streaming":"true"}`,
	`{"type":"request","request_id":"x","is_streaming":tru}`,
	`{"type":"request","request_id":"x","is_streaming":true1}`,
	`{"type":"request","request_id":"x","body":null}`,
	`{"type":"request","request_id":"x","chunk":"y","status_code":5}`,
	`{"type":"request","request_id":"x","warnings":["w"]}`,
	`{"type":"cancel","request_id":"x","reason":null}`,
	`{"type":"cancel","request_id":"x","reason":7}`,
	`{"type":"cancel","request_id":"x","reason":{}}`,
	`{"type":"cancel","request_id":"x","reason":{"other":null}}`,
	`{"type":"cancel","request_id":"x","reason":{"Other":"y"}}`,
	`{"type":"cancel","request_id":"x","reason":{"other":"y","other":"z"}}`,
	`{"type":"cancel","request_id":"x","reason":{"other":"y","x":1}}`,
	`{"type":"cancel","request_id":"x","reason":{ "other" : "y" } }`,
	`{"type":"cancel","request_id":"x","reason":"\u0074imeout"}`,
	`{"type":"ping"}`, `{"type":"pong","current_load":1}`, `{"type":7}`, `{"type":null}`,
}

func TestUnusualFramesDecodeLikeEncodingJSON(t *testing.T) {
	for _, s := range unusualFrames {
		checkDecode(t, []byte(s))
	}
}

// checkDecode fails unless both public decoders give on data exactly what the reflective ones
// give, and unless the fast path, when it answers, answers with that.
func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	for _, d := range [...]struct {
		dir       direction
		pub, refl func([]byte) (Message, error)
		name      string
	}{
		{workerDirection, DecodeWorkerMessage, decodeWorkerReflective, "worker"},
		{serverDirection, DecodeServerMessage, decodeServerReflective, "server"},
	} {
		want, wantErr := d.refl(data)
		got, err := d.pub(data)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("%s %q: error %v, reflective %v", d.name, data, err, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s %q:\n hand %#v\n json %#v", d.name, data, got, want)
		}
		if m, ok := decodeHot(data, d.dir); ok && (wantErr != nil || !reflect.DeepEqual(m, want)) {
			t.Fatalf("%s %q: fast path gave %#v, reflective %#v, %v", d.name, data, m, want, wantErr)
		}
	}
}

func TestFastDecodeBigStrings(t *testing.T) {
	body := strings.Repeat("x", bigString)
	b, _ := Marshal(ResponseComplete{RequestID: "r", StatusCode: 200, Body: &body,
		Headers: Headers{"a": strings.Repeat("é\n", bigString)}})
	checkDecode(t, b)
	m, ok := decodeHot(b, workerDirection)
	if !ok || *m.(ResponseComplete).Body != body {
		t.Fatal("big body not decoded by hand")
	}
}

func TestFastDecodeAllocations(t *testing.T) {
	chunk := []byte(`{"type":"response_chunk","request_id":"0b4e2f8c-3d1a-4c55-9a7e-2f1d0c9b8a76","chunk":"data: {\"delta\":{\"content\":\" hi\"}}\n\n"}`)
	// One allocation for both strings, one for the interface value.
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeWorkerMessage(chunk) }); n > 2 {
		t.Errorf("chunk decode: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Marshal(ResponseChunk{RequestID: "r", Chunk: "data: x\n\n"}) }); n > 1 {
		t.Errorf("chunk encode: %v allocations", n)
	}
}

// FuzzHotFrameDecode: on every input, DecodeWorkerMessage and DecodeServerMessage give the
// reflective decoders' value or error, and the fast path never answers otherwise.
func FuzzHotFrameDecode(f *testing.F) {
	for _, c := range canonicalHotFrames {
		f.Add([]byte(c.frame))
	}
	for _, s := range unusualFrames {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
	})
}

// FuzzHotFrameEncode: for arbitrary field values, the hand-written encoder writes exactly
// json.Marshal's bytes, and those bytes decode alike both ways.
func FuzzHotFrameEncode(f *testing.F) {
	f.Add("r-1", "llama3-8b", "/v1/chat/completions", `{"model":"x"}`, "data: {}\n\n",
		"content-type", "application/json", "x-trace-id", "t", "timeout", true, uint16(200), uint8(0xff),
		uint32(42), uint32(128), uint32(170))
	f.Fuzz(func(t *testing.T, id, model, path, body, chunk, k1, v1, k2, v2, reason string,
		streaming bool, status uint16, flags uint8, prompt, completion, total uint32) {
		for _, m := range fuzzMessages(id, model, path, body, chunk, k1, v1, k2, v2, reason,
			streaming, status, flags, [3]uint32{prompt, completion, total}) {
			checkEncode(t, m)
			b, _ := Marshal(m)
			checkDecode(t, b)
		}
	})
}

// fuzzMessages builds one message of each hot type; flags chooses which optional parts are set.
func fuzzMessages(id, model, path, body, chunk, k1, v1, k2, v2, reason string, streaming bool,
	status uint16, flags uint8, counts [3]uint32) []Message {
	var h Headers
	switch flags & 3 {
	case 1:
		h = Headers{}
	case 2:
		h = Headers{k1: v1}
	case 3:
		h = Headers{k1: v1, k2: v2, v1: k1}
	}
	var bodyPtr *string
	if flags&4 != 0 {
		bodyPtr = &body
	}
	var tc *TokenCounts
	if flags&8 != 0 {
		tc = &TokenCounts{}
		for i, p := range [...]**uint32{&tc.PromptTokens, &tc.CompletionTokens, &tc.TotalTokens} {
			if flags&(16<<i) != 0 {
				*p = &counts[i]
			}
		}
	}
	if flags&128 != 0 {
		named := [...]CancelReason{CancelClientDisconnect, CancelTimeout, CancelGracefulShutdown,
			CancelWorkerDisconnect, CancelRequeueExhausted, CancelServerShutdown}
		reason = string(named[int(status)%len(named)])
	}
	return []Message{
		ResponseChunk{RequestID: id, Chunk: chunk},
		Request{RequestID: id, Model: model, EndpointPath: path, IsStreaming: streaming, Body: body, Headers: h},
		ResponseComplete{RequestID: id, StatusCode: status, Headers: h, Body: bodyPtr, TokenCounts: tc},
		Cancel{RequestID: id, Reason: CancelReason(reason)},
	}
}
