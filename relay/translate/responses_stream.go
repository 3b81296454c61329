package translate

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/valyala/fastjson"

	"modelrelay/relay/rawjson"
)

// MaxResponseBytes bounds the text a Responses stream keeps: its done events and its final
// response repeat every item whole, so the stream holds the answer (not the events). A stream
// whose answer grows past it fails.
const MaxResponseBytes = 32 << 20

// maxOutputItems bounds the output items of one Responses stream, as maxToolCalls bounds the
// calls of the other translated streams.
const maxOutputItems = maxToolCalls

var (
	errResponseTooLarge = errors.New("answer exceeds 32 MiB")
	errTooManyItems     = errors.New("answer has more than 1024 output items")
)

// ResponsesStream turns chat.completion.chunk events into Responses stream events, in OpenAI's
// order, each with its sequence_number from 0: response.created, response.in_progress, then
// per output item output_item.added, its parts and deltas, output_item.done (the complete
// item), and last response.completed (or response.incomplete) with the whole response. A
// stream that fails ends with response.failed instead, never completed.
//
// Deltas are keyed by item_id and output_index. Text and reasoning items open on their first
// non-empty delta and close when another kind of output starts; a call is announced on its
// first delta that names it or carries arguments, and every call stays open until the model
// finishes, so chat's interleaved parallel calls (tool_calls[].index) each keep their own
// item. Every announced item is closed before the terminal event, a failed one as incomplete.
type ResponsesStream struct {
	sc       sseScanner
	parser   fastjson.Parser // reused: parsing a chunk allocates nothing once warm
	shape    *responseShape
	out      []byte
	val      []byte // one delta's JSON text
	seq      int
	started  bool
	done     bool
	items    []streamItem
	order    []int       // items by output index
	open     int         // the open message or reasoning item (-1 none)
	calls    map[int]int // chat tool call index -> items
	finish   string
	usage    responsesUsage
	kept     int    // bytes of text held in items
	limit    int    // on kept: MaxResponseBytes
	response []byte // the final response object, once completed or incomplete
}

// streamItem is an output item being streamed.
type streamItem struct {
	outputItem
	index  int // output index, -1 until announced
	closed bool
}

// NewResponsesStream translates a chat completion stream into the Responses stream of the
// response m describes.
func NewResponsesStream(m ResponseMeta) *ResponsesStream {
	return &ResponsesStream{shape: newResponseShape(m), open: -1, limit: MaxResponseBytes}
}

// Usage is the token usage the stream reported so far.
func (s *ResponsesStream) Usage() Usage { return Usage{s.usage.input, s.usage.output} }

// Response is the final response object once the stream completed (or ended incomplete), for
// the relay's store; nil otherwise.
func (s *ResponsesStream) Response() []byte { return s.response }

func (s *ResponsesStream) Write(p []byte) ([]byte, error) {
	s.out = s.out[:0]
	if s.done {
		return nil, nil
	}
	err := s.sc.feed(p, s.event)
	return s.out, err
}

func (s *ResponsesStream) Close() []byte {
	s.out = s.out[:0]
	if !s.done {
		if s.finish != "" {
			s.complete() // the target ended without [DONE] after its finish_reason: complete
		} else {
			s.fail("the model server ended the stream before the answer was complete")
		}
	}
	return s.out
}

func (s *ResponsesStream) Fail(message string) []byte {
	s.out = s.out[:0]
	s.fail(message)
	return s.out
}

func (s *ResponsesStream) event(_, data []byte) error {
	if s.done {
		return nil
	}
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		s.complete()
		return nil
	}
	c, err := s.parser.ParseBytes(data)
	if err != nil || c.Type() != fastjson.TypeObject {
		return nil // not a chunk (a stray line); nothing to relay
	}
	if e := c.Get("error"); e != nil && e.Type() != fastjson.TypeNull || string(c.GetStringBytes("object")) == "error" {
		// {"error":{…}} or {"error":"…"}; older vLLM sends the error object itself.
		msg := c.GetStringBytes("message")
		if e != nil {
			msg = e.GetStringBytes("message")
			if e.Type() == fastjson.TypeString {
				msg, _ = e.StringBytes()
			}
		}
		if len(msg) == 0 {
			msg = []byte("the model server reported an error")
		}
		s.fail(string(msg))
		return nil
	}
	s.start()
	if u := c.Get("usage"); u != nil && u.Type() == fastjson.TypeObject {
		s.usage = responsesUsage{input: u.GetInt("prompt_tokens"), cached: u.GetInt("prompt_tokens_details", "cached_tokens"),
			output: u.GetInt("completion_tokens"), reasoning: u.GetInt("completion_tokens_details", "reasoning_tokens")}
	}
	for _, ch := range c.GetArray("choices") {
		if ch.GetInt("index") != 0 {
			continue // n > 1 is not asked for: only the first choice is the answer
		}
		if d := ch.Get("delta"); d != nil {
			for _, f := range [...]struct {
				kind  outputKind
				field string
			}{{outReasoning, "reasoning_content"}, {outReasoning, "reasoning"}, {outMessage, "content"}, {outMessage, "refusal"}} {
				if err := s.text(f.kind, d.Get(f.field)); err != nil {
					return err
				}
			}
			for _, tc := range d.GetArray("tool_calls") {
				if err := s.call(tc); err != nil {
					return err
				}
			}
		}
		if finish := ch.GetStringBytes("finish_reason"); len(finish) > 0 {
			s.finish = string(finish)
			s.closeAll(itemStatus(s.finish))
		}
	}
	return nil
}

// itemStatus is the status of the items of an answer that finished for the reason finish.
func itemStatus(finish string) string {
	if incompleteReason(finish) != "" {
		return "incomplete"
	}
	return "completed"
}

// escape sets s.val to the string v as JSON string text (nil when v is not a non-empty
// string), counting it against MaxResponseBytes.
func (s *ResponsesStream) escape(v *fastjson.Value) ([]byte, error) {
	if v == nil || v.Type() != fastjson.TypeString {
		return nil, nil
	}
	text, _ := v.StringBytes()
	if len(text) == 0 {
		return nil, nil // an empty delta says nothing
	}
	s.val = appendQuoted(s.val[:0], text)
	if s.kept += len(s.val) - 2; s.kept > s.limit {
		return nil, errResponseTooLarge
	}
	return s.val[1 : len(s.val)-1], nil
}

// text adds a message or reasoning delta, opening its item first (and closing an open one
// of the other kind).
func (s *ResponsesStream) text(kind outputKind, v *fastjson.Value) error {
	t, err := s.escape(v)
	if t == nil {
		return err
	}
	if s.open >= 0 && s.items[s.open].kind != kind {
		s.closeItem(s.open, "completed")
	}
	if s.open < 0 {
		i, err := s.newItem(kind)
		if err != nil {
			return err
		}
		s.open = i
		s.announce(i)
	}
	it := &s.items[s.open]
	it.text = append(it.text, t...)
	if kind == outMessage {
		s.itemEvent("response.output_text.delta", it)
		s.out = append(s.out, `,"content_index":0,"delta":"`...)
		s.out = append(s.out, t...)
		s.out = append(s.out, `","logprobs":[]`...)
	} else {
		s.itemEvent("response.reasoning_summary_text.delta", it)
		s.out = append(s.out, `,"summary_index":0,"delta":"`...)
		s.out = append(s.out, t...)
		s.out = append(s.out, '"')
	}
	s.end()
	return nil
}

// call adds one tool_calls[] delta to the call it names by index.
func (s *ResponsesStream) call(tc *fastjson.Value) error {
	n := tc.GetInt("index")
	i, ok := s.calls[n]
	if !ok {
		var err error
		if i, err = s.newItem(outCall); err != nil {
			return err
		}
		if s.calls == nil {
			s.calls = map[int]int{}
		}
		s.calls[n] = i
	}
	if s.open >= 0 {
		s.closeItem(s.open, "completed") // a turn's text comes before its calls
	}
	if s.items[i].closed {
		return nil // the model finished; a late fragment changes nothing
	}
	if id, err := s.escape(tc.Get("id")); err != nil {
		return err
	} else if id != nil && s.items[i].callID == nil {
		s.items[i].callID = append([]byte(nil), id...)
	}
	name, err := s.escape(tc.Get("function", "name"))
	if err != nil {
		return err
	}
	if name != nil && s.items[i].index < 0 {
		s.items[i].name = append(s.items[i].name, name...)
	}
	args, err := s.escape(tc.Get("function", "arguments"))
	if err != nil {
		return err
	}
	if s.items[i].index < 0 && (s.items[i].name != nil || args != nil) {
		s.announce(i)
	}
	if args != nil {
		s.items[i].text = append(s.items[i].text, args...)
		s.argumentsDelta(&s.items[i], args)
	}
	return nil
}

// argumentsDelta sends a function call's arguments fragment. A custom tool's input is the
// string inside its arguments ({"input": …}): it is sent whole when the call closes.
func (s *ResponsesStream) argumentsDelta(it *streamItem, args []byte) {
	if it.kind != outCall {
		return
	}
	s.itemEvent("response.function_call_arguments.delta", it)
	s.out = append(s.out, `,"delta":"`...)
	s.out = append(s.out, args...)
	s.out = append(s.out, '"')
	s.end()
}

func (s *ResponsesStream) newItem(kind outputKind) (int, error) {
	if len(s.items) >= maxOutputItems {
		return 0, errTooManyItems
	}
	s.items = append(s.items, streamItem{outputItem: outputItem{kind: kind}, index: -1})
	return len(s.items) - 1, nil
}

// announce gives item i its output index and id and sends output_item.added (and the empty
// part a message or reasoning item opens with).
func (s *ResponsesStream) announce(i int) {
	it := &s.items[i]
	it.index, it.status = len(s.order), "in_progress"
	s.order = append(s.order, i)
	prefix := "msg"
	switch it.kind {
	case outReasoning:
		prefix = "rs"
	case outCall:
		prefix = "fc"
		if s.shape.isCustom(it.name) {
			it.kind, prefix = outCustom, "ctc"
		}
		if it.callID == nil {
			it.callID = []byte(s.shape.itemID("call", it.index))
		}
	}
	it.id = s.shape.itemID(prefix, it.index)
	s.begin("response.output_item.added")
	s.out = append(s.out, `,"output_index":`...)
	s.out = strconv.AppendInt(s.out, int64(it.index), 10)
	s.out = append(s.out, `,"item":`...)
	switch it.kind {
	case outMessage:
		s.out = append(s.out, `{"id":"`...)
		s.out = append(s.out, it.id...)
		s.out = append(s.out, `","type":"message","status":"in_progress","content":[],"role":"assistant"}`...)
	case outReasoning:
		s.out = append(s.out, `{"id":"`...)
		s.out = append(s.out, it.id...)
		s.out = append(s.out, `","type":"reasoning","summary":[]}`...)
	default:
		empty := *it
		empty.text = nil
		s.out = s.shape.appendItem(s.out, &empty.outputItem)
	}
	s.end()
	switch it.kind {
	case outMessage:
		s.itemEvent("response.content_part.added", it)
		s.out = append(s.out, `,"content_index":0,"part":`...)
		s.out = appendTextPart(s.out, nil)
		s.end()
	case outReasoning:
		s.itemEvent("response.reasoning_summary_part.added", it)
		s.out = append(s.out, `,"summary_index":0,"part":{"type":"summary_text","text":""}`...)
		s.end()
	}
}

// closeItem sends the done events of item i, whose status becomes status.
func (s *ResponsesStream) closeItem(i int, status string) {
	it := &s.items[i]
	if it.closed {
		return
	}
	if it.index < 0 {
		s.announce(i) // a call that never carried a name or arguments is still announced
	}
	it.closed, it.status = true, status
	if i == s.open {
		s.open = -1
	}
	switch it.kind {
	case outMessage:
		s.itemEvent("response.output_text.done", it)
		s.out = append(s.out, `,"content_index":0,"text":"`...)
		s.out = append(s.out, it.text...)
		s.out = append(s.out, `","logprobs":[]`...)
		s.end()
		s.itemEvent("response.content_part.done", it)
		s.out = append(s.out, `,"content_index":0,"part":`...)
		s.out = appendTextPart(s.out, it.text)
		s.end()
	case outReasoning:
		s.itemEvent("response.reasoning_summary_text.done", it)
		s.out = append(s.out, `,"summary_index":0,"text":"`...)
		s.out = append(s.out, it.text...)
		s.out = append(s.out, '"')
		s.end()
		s.itemEvent("response.reasoning_summary_part.done", it)
		s.out = append(s.out, `,"summary_index":0,"part":{"type":"summary_text","text":"`...)
		s.out = append(s.out, it.text...)
		s.out = append(s.out, `"}`...)
		s.end()
	case outCall:
		if len(it.text) == 0 {
			// A call without arguments takes none: "{}", what a client parses.
			it.text = []byte("{}")
			s.argumentsDelta(it, it.text)
		}
		s.itemEvent("response.function_call_arguments.done", it)
		s.out = append(s.out, `,"name":"`...)
		s.out = append(s.out, it.name...)
		s.out = append(s.out, `","arguments":"`...)
		s.out = append(s.out, it.text...)
		s.out = append(s.out, '"')
		s.end()
	case outCustom:
		it.text = escapedText(customInput(rawjson.AppendUnescaped(nil, it.text)))
		if len(it.text) > 0 {
			s.itemEvent("response.custom_tool_call_input.delta", it)
			s.out = append(s.out, `,"delta":"`...)
			s.out = append(s.out, it.text...)
			s.out = append(s.out, '"')
			s.end()
		}
		s.itemEvent("response.custom_tool_call_input.done", it)
		s.out = append(s.out, `,"input":"`...)
		s.out = append(s.out, it.text...)
		s.out = append(s.out, '"')
		s.end()
	}
	s.begin("response.output_item.done")
	s.out = append(s.out, `,"output_index":`...)
	s.out = strconv.AppendInt(s.out, int64(it.index), 10)
	s.out = append(s.out, `,"item":`...)
	s.out = s.shape.appendItem(s.out, &it.outputItem)
	s.end()
}

// closeAll closes every open item: the open text first, then the calls (those never
// announced after the rest), in output order.
func (s *ResponsesStream) closeAll(status string) {
	if s.open >= 0 {
		s.closeItem(s.open, status)
	}
	for i := range s.items {
		if s.items[i].index < 0 {
			s.announce(i)
		}
	}
	for _, i := range s.order {
		s.closeItem(i, status)
	}
}

// start sends response.created and response.in_progress before anything else.
func (s *ResponsesStream) start() {
	if s.started {
		return
	}
	s.started = true
	for _, typ := range [...]string{"response.created", "response.in_progress"} {
		s.begin(typ)
		s.out = append(s.out, `,"response":`...)
		s.out = s.shape.appendResponse(s.out, "in_progress", "null", "null", func(dst []byte) []byte { return append(dst, "[]"...) }, []byte("null"))
		s.end()
	}
}

// complete ends the stream with response.completed, or response.incomplete when the model
// stopped at its token limit or content filter.
func (s *ResponsesStream) complete() {
	s.start()
	status := itemStatus(s.finish)
	s.closeAll(status)
	incomplete := "null"
	if reason := incompleteReason(s.finish); reason != "" {
		incomplete = `{"reason":"` + reason + `"}`
	}
	s.begin("response." + status)
	s.out = append(s.out, `,"response":`...)
	start := len(s.out)
	s.out = s.shape.appendResponse(s.out, status, "null", incomplete, s.appendOutput, s.usage.appendJSON(nil))
	s.response = append([]byte(nil), s.out[start:]...)
	s.end()
	s.done = true
}

// fail ends the stream with response.failed, typed as a server error (a client may retry).
func (s *ResponsesStream) fail(message string) {
	if s.done {
		return
	}
	s.start()
	s.closeAll("incomplete")
	e := append([]byte(`{"code":"server_error","message":`), appendQuoted(nil, []byte(message))...)
	e = append(e, '}')
	s.begin("response.failed")
	s.out = append(s.out, `,"response":`...)
	s.out = s.shape.appendResponse(s.out, "failed", string(e), "null", s.appendOutput, s.usage.appendJSON(nil))
	s.end()
	s.done = true
}

// appendOutput appends the output array: every item, in output order.
func (s *ResponsesStream) appendOutput(dst []byte) []byte {
	dst = append(dst, '[')
	for n, i := range s.order {
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = s.shape.appendItem(dst, &s.items[i].outputItem)
	}
	return append(dst, ']')
}

// begin starts an event of type typ: its name, then its data up to its sequence number.
func (s *ResponsesStream) begin(typ string) {
	s.out = append(s.out, "event: "...)
	s.out = append(s.out, typ...)
	s.out = append(s.out, "\ndata: {\"type\":\""...)
	s.out = append(s.out, typ...)
	s.out = append(s.out, `","sequence_number":`...)
	s.out = strconv.AppendInt(s.out, int64(s.seq), 10)
	s.seq++
}

// itemEvent begins an event about item it: item_id and output_index follow the number.
func (s *ResponsesStream) itemEvent(typ string, it *streamItem) {
	s.begin(typ)
	s.out = append(s.out, `,"item_id":"`...)
	s.out = append(s.out, it.id...)
	s.out = append(s.out, `","output_index":`...)
	s.out = strconv.AppendInt(s.out, int64(it.index), 10)
}

func (s *ResponsesStream) end() { s.out = append(s.out, "}\n\n"...) }
