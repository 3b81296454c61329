package translate

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
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
	ev           anthropicEvent
}

// NewOpenAIStream translates an Anthropic message stream for an OpenAI client that asked for
// model; includeUsage adds the usage chunk (stream_options.include_usage).
func NewOpenAIStream(model string, includeUsage bool) Stream {
	return &openAIStream{model: model, includeUsage: includeUsage}
}

type anthropicEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		ID    string          `json:"id"`
		Usage *anthropicUsage `json:"usage"`
	} `json:"message"`
	ContentBlock *struct {
		Type string          `json:"type"`
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Text json.RawMessage `json:"text"`
	} `json:"content_block"`
	Delta *struct {
		Type        string          `json:"type"`
		Text        json.RawMessage `json:"text"`
		Thinking    json.RawMessage `json:"thinking"`
		PartialJSON json.RawMessage `json:"partial_json"`
		StopReason  string          `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

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
	e := &s.ev
	*e = anthropicEvent{}
	if json.Unmarshal(bytes.TrimSpace(data), e) != nil {
		return nil
	}
	switch e.Type {
	case "message_start":
		id := ""
		if e.Message != nil {
			id = e.Message.ID
			if u := e.Message.Usage; u != nil {
				s.usage = Usage{u.InputTokens, u.OutputTokens}
			}
		}
		s.start(id)
	case "content_block_start":
		s.start("")
		if b := e.ContentBlock; b != nil {
			switch b.Type {
			case "tool_use":
				if s.tools == nil {
					s.tools = map[int]int{}
				}
				n := len(s.tools)
				s.tools[e.Index] = n
				id, _ := json.Marshal(b.ID)
				name, _ := json.Marshal(b.Name)
				s.chunk(`{"tool_calls":[{"index":` + strconv.Itoa(n) + `,"id":` + string(id) +
					`,"type":"function","function":{"name":` + string(name) + `,"arguments":""}}]}`)
			case "text":
				if isText(b.Text) {
					s.deltaChunk(`{"content":`, b.Text, `}`)
				}
			}
		}
	case "content_block_delta":
		s.start("")
		if d := e.Delta; d != nil {
			switch d.Type {
			case "text_delta":
				if isText(d.Text) {
					s.deltaChunk(`{"content":`, d.Text, `}`)
				}
			case "thinking_delta":
				if isText(d.Thinking) {
					s.deltaChunk(`{"reasoning_content":`, d.Thinking, `}`)
				}
			case "input_json_delta":
				if n, ok := s.tools[e.Index]; ok && isText(d.PartialJSON) {
					s.deltaChunk(`{"tool_calls":[{"index":`+strconv.Itoa(n)+`,"function":{"arguments":`, d.PartialJSON, `}}]}`)
				}
			}
		}
	case "message_delta":
		s.start("")
		if e.Usage != nil {
			s.usage.OutputTokens = e.Usage.OutputTokens
			if e.Usage.InputTokens > 0 {
				s.usage.InputTokens = e.Usage.InputTokens
			}
		}
		if e.Delta != nil && e.Delta.StopReason != "" && s.finish == "" {
			s.finish = finishReason(e.Delta.StopReason)
			s.out = append(s.out, s.head...)
			s.out = append(s.out, `"choices":[{"index":0,"delta":{},"finish_reason":"`...)
			s.out = append(s.out, s.finish...)
			s.out = append(s.out, "\"}]}\n\n"...)
		}
	case "message_stop":
		s.end()
	case "error":
		msg := "the model server reported an error"
		if e.Error != nil && e.Error.Message != "" {
			msg = e.Error.Message
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

func (s *openAIStream) fail(message string) {
	if s.done {
		return
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": "upstream_error", "code": "upstream_error"}})
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
