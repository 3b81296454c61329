package translate

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fastjson"

	"modelrelay/relay/endpoint"
)

// openAIStream turns Anthropic message events into OpenAI chat.completion.chunk events: a
// first delta with the role, content and tool_calls deltas (index, and id/name on each call's
// first delta), a chunk with finish_reason, a usage chunk when the client asked for one, then
// data: [DONE].
type openAIStream struct {
	sc           sseScanner
	model        string
	includeUsage bool
	head         []byte // `data: {"id":…,"object":…,"created":…,"model":…,` of every chunk
	out          []byte
	started      bool
	done         bool
	tools        map[int]int // Anthropic block index -> OpenAI tool call index
	finish       string
	usage        Usage
	parser       fastjson.Parser // reused: parsing an event allocates nothing once warm
	val          textBuf         // one delta's JSON text
}

// NewOpenAIStream translates an Anthropic message stream for an OpenAI client that asked for
// model; includeUsage adds the usage chunk (stream_options.include_usage).
func NewOpenAIStream(model string, includeUsage bool) Stream {
	return &openAIStream{model: model, includeUsage: includeUsage}
}

// maxToolCalls bounds the tool calls one translated stream tracks; later ones are dropped.
const maxToolCalls = 1024

func (s *openAIStream) Usage() Usage { return s.usage }

func (s *openAIStream) Write(p []byte) ([]byte, error) {
	s.out = s.out[:0]
	if s.done {
		return nil, nil
	}
	err := s.sc.feed(p, s.event)
	return s.out, err
}

func (s *openAIStream) event(_, data []byte) error {
	if s.done {
		return nil
	}
	e, err := s.parser.ParseBytes(bytes.TrimSpace(data))
	if err != nil || e.Type() != fastjson.TypeObject {
		return nil
	}
	index := e.GetInt("index")
	switch string(e.GetStringBytes("type")) {
	case "message_start":
		if u := e.Get("message", "usage"); u != nil {
			s.usage = Usage{u.GetInt("input_tokens"), u.GetInt("output_tokens")}
		}
		s.start(string(e.GetStringBytes("message", "id")))
	case "content_block_start":
		s.start("")
		b := e.Get("content_block")
		switch string(b.GetStringBytes("type")) {
		case "tool_use":
			if len(s.tools) >= maxToolCalls {
				return nil
			}
			if s.tools == nil {
				s.tools = map[int]int{}
			}
			n := len(s.tools)
			s.tools[index] = n
			id, _ := json.Marshal(string(b.GetStringBytes("id")))
			name, _ := json.Marshal(string(b.GetStringBytes("name")))
			s.chunk(`{"tool_calls":[{"index":` + strconv.Itoa(n) + `,"id":` + string(id) +
				`,"type":"function","function":{"name":` + string(name) + `,"arguments":""}}]}`)
		case "text":
			if t := s.val.text(b.Get("text")); t != nil {
				s.deltaChunk(`{"content":`, t, `}`)
			}
		}
	case "content_block_delta":
		s.start("")
		d := e.Get("delta")
		switch string(d.GetStringBytes("type")) {
		case "text_delta":
			if t := s.val.text(d.Get("text")); t != nil {
				s.deltaChunk(`{"content":`, t, `}`)
			}
		case "thinking_delta":
			if t := s.val.text(d.Get("thinking")); t != nil {
				s.deltaChunk(`{"reasoning_content":`, t, `}`)
			}
		case "input_json_delta":
			if n, ok := s.tools[index]; ok {
				if t := s.val.text(d.Get("partial_json")); t != nil {
					s.deltaChunk(`{"tool_calls":[{"index":`+strconv.Itoa(n)+`,"function":{"arguments":`, t, `}}]}`)
				}
			}
		}
	case "message_delta":
		s.start("")
		if u := e.Get("usage"); u != nil {
			s.usage.OutputTokens = u.GetInt("output_tokens")
			if in := u.GetInt("input_tokens"); in > 0 {
				s.usage.InputTokens = in
			}
		}
		if stop := e.GetStringBytes("delta", "stop_reason"); len(stop) > 0 && s.finish == "" {
			s.finish = finishReason(string(stop))
			s.out = append(s.out, s.head...)
			s.out = append(s.out, `"choices":[{"index":0,"delta":{},"finish_reason":"`...)
			s.out = append(s.out, s.finish...)
			s.out = append(s.out, "\"}]}\n\n"...)
		}
	case "message_stop":
		s.end()
	case "error":
		msg := string(e.GetStringBytes("error", "message"))
		if msg == "" {
			msg = "the model server reported an error"
		}
		s.fail(msg)
	}
	return nil
}

func (s *openAIStream) start(id string) {
	if s.started {
		return
	}
	s.started = true
	id = "chatcmpl-" + strings.TrimPrefix(id, "msg_")
	idJSON, _ := json.Marshal(id)
	model, _ := json.Marshal(s.model)
	s.head = append(s.head[:0], `data: {"id":`...)
	s.head = append(s.head, idJSON...)
	s.head = append(s.head, `,"object":"chat.completion.chunk","created":`...)
	s.head = strconv.AppendInt(s.head, time.Now().Unix(), 10)
	s.head = append(s.head, `,"model":`...)
	s.head = append(s.head, model...)
	s.head = append(s.head, ',')
	s.chunk(`{"role":"assistant","content":""}`)
}

// chunk appends a chunk whose choice carries delta (a JSON object).
func (s *openAIStream) chunk(delta string) {
	s.out = append(s.out, s.head...)
	s.out = append(s.out, `"choices":[{"index":0,"delta":`...)
	s.out = append(s.out, delta...)
	s.out = append(s.out, ",\"finish_reason\":null}]}\n\n"...)
}

// deltaChunk is chunk with the delta spliced from pre, a raw JSON string value, and post.
func (s *openAIStream) deltaChunk(pre string, value json.RawMessage, post string) {
	s.out = append(s.out, s.head...)
	s.out = append(s.out, `"choices":[{"index":0,"delta":`...)
	s.out = append(s.out, pre...)
	s.out = append(s.out, value...)
	s.out = append(s.out, post...)
	s.out = append(s.out, ",\"finish_reason\":null}]}\n\n"...)
}

// end sends the usage chunk (when asked for) and [DONE].
func (s *openAIStream) end() {
	s.start("")
	if s.finish == "" {
		s.finish = "stop"
		s.out = append(s.out, s.head...)
		s.out = append(s.out, "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"...)
	}
	if s.includeUsage {
		s.out = append(s.out, s.head...)
		s.out = append(s.out, `"choices":[],"usage":{"prompt_tokens":`...)
		s.out = strconv.AppendInt(s.out, int64(s.usage.InputTokens), 10)
		s.out = append(s.out, `,"completion_tokens":`...)
		s.out = strconv.AppendInt(s.out, int64(s.usage.OutputTokens), 10)
		s.out = append(s.out, `,"total_tokens":`...)
		s.out = strconv.AppendInt(s.out, int64(s.usage.InputTokens+s.usage.OutputTokens), 10)
		s.out = append(s.out, "}}\n\n"...)
	}
	s.out = append(s.out, "data: [DONE]\n\n"...)
	s.done = true
}

// fail ends the stream with an error chunk, typed as an upstream failure (a 502).
func (s *openAIStream) fail(message string) {
	if s.done {
		return
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message,
		"type": endpoint.OpenAI.ErrorType(http.StatusBadGateway), "code": "upstream_error"}})
	s.out = append(s.out, "data: "...)
	s.out = append(s.out, b...)
	s.out = append(s.out, "\n\n"...)
	s.done = true
}

func (s *openAIStream) Close() []byte {
	s.out = s.out[:0]
	if !s.done {
		if s.finish != "" {
			s.end()
		} else {
			s.fail("the model server ended the stream before the answer was complete")
		}
	}
	return s.out
}

func (s *openAIStream) Fail(message string) []byte {
	s.out = s.out[:0]
	s.fail(message)
	return s.out
}
