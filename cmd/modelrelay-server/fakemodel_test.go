package main

// A fake model server that speaks exactly one API family, for the translation tests: it answers
// its own family's path (streaming with real SSE framing, tool calls with arguments in pieces,
// usage, errors in its family's shape), refuses the other family's path with 404, and records
// everything it was sent. No weights: what it says is decided by what it was asked.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

type fakeModel struct {
	family string // "openai" or "anthropic"
	url    string
	// tokenize answers POST /tokenize (vLLM's shape); without it /tokenize is a 404.
	tokenize atomic.Bool
	// readFile is the path a "read the file" prompt makes the fake ask Claude Code's Read tool for.
	readFile string
	// shellFile is the file a "write the proof file" prompt makes the fake ask Codex CLI's
	// exec_command tool to write.
	shellFile string
	// streamAlways makes it stream every answer, whatever the request's "stream" says (some
	// servers and proxies do).
	streamAlways atomic.Bool

	mu   sync.Mutex
	seen []fakeCall
}

type fakeCall struct {
	Path   string
	Header http.Header
	Body   map[string]any
	Status int
	Raw    []byte // the request body as sent
	Answer []byte // what the fake wrote back
}

// tee keeps a copy of what the fake writes.
type tee struct {
	http.ResponseWriter
	buf []byte
}

func (w *tee) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return w.ResponseWriter.Write(p)
}

func (w *tee) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// newFakeModel starts a fake of one family; readFile, when given, is set before it serves.
func newFakeModel(t testing.TB, family string, readFile ...string) *fakeModel {
	t.Helper()
	f := &fakeModel{family: family}
	if len(readFile) > 0 {
		f.readFile = readFile[0]
	}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *fakeModel) calls() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeCall(nil), f.seen...)
}

// callsTo are the recorded calls to path.
func (f *fakeModel) callsTo(path string) []fakeCall {
	var out []fakeCall
	for _, c := range f.calls() {
		if c.Path == path {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeModel) serve(rw http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	json.Unmarshal(raw, &body)
	w := &tee{ResponseWriter: rw}
	var call *fakeCall
	defer func() {
		call.Raw, call.Answer = raw, w.buf
		f.mu.Lock()
		f.seen = append(f.seen, *call)
		f.mu.Unlock()
	}()
	record := func(r *http.Request, body map[string]any, status int) {
		call = &fakeCall{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Status: status}
	}
	own := "/v1/chat/completions"
	if f.family == "anthropic" {
		own = "/v1/messages"
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		record(r, nil, 200)
		fmt.Fprint(w, `{"object":"list","data":[{"id":"fake","object":"model"}]}`)
	case r.Method == http.MethodPost && r.URL.Path == own:
		if f.family == "anthropic" && (r.Header.Get("Anthropic-Version") == "" || r.Header.Get("X-Api-Key") == "") {
			record(r, body, 400)
			http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"anthropic-version and x-api-key are required"}}`, 400)
			return
		}
		reply := f.decide(body)
		status := 200
		if reply.err != "" {
			status = 400
		}
		record(r, body, status)
		if f.family == "openai" {
			f.answerOpenAI(w, body, reply)
		} else {
			f.answerAnthropic(w, body, reply)
		}
	case r.Method == http.MethodPost && r.URL.Path == "/tokenize" && f.tokenize.Load() && f.family == "openai":
		record(r, body, 200)
		msgs, _ := json.Marshal(body["messages"])
		fmt.Fprintf(w, `{"count":%d,"max_model_len":32768,"tokens":[]}`, len(msgs)/3)
	default:
		record(r, body, 404)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"detail":"Not Found: %s"}`, r.URL.Path)
	}
}

// reply is what the fake answers: text, or one tool call, or an error.
type reply struct {
	text     string
	whole    bool // the text is streamed as one event, not in pieces
	toolID   string
	toolName string
	toolArgs string // JSON text
	err      string
}

// decide reads the conversation (either family's shape) and picks the answer.
func (f *fakeModel) decide(body map[string]any) reply {
	msgs, _ := body["messages"].([]any)
	var last map[string]any // the last turn; Claude Code also puts system entries after it
	for i := len(msgs) - 1; i >= 0 && last == nil; i-- {
		if m, _ := msgs[i].(map[string]any); m["role"] != "system" {
			last = m
		}
	}
	if last == nil {
		return reply{text: "nothing asked"}
	}
	if result, ok := toolResultIn(last); ok {
		return reply{text: "The tool said: " + result}
	}
	text, image := userContent(last)
	switch {
	case strings.Contains(text, "error please"):
		return reply{err: "the fake refuses: error please"}
	case strings.Contains(text, "one huge event please"):
		return reply{text: strings.Repeat("x", 1<<20+1), whole: true} // over the relay's 1 MiB event bound
	case image != "":
		return reply{text: "I see an image: " + image}
	case strings.Contains(text, "write the proof file") && f.shellFile != "":
		return reply{toolID: "call_shell_1", toolName: "exec_command", toolArgs: fmt.Sprintf(`{"cmd":"printf codex-was-here > %s"}`, f.shellFile)}
	case strings.Contains(text, "read the file") && f.readFile != "":
		return reply{toolID: "call_read_1", toolName: "Read", toolArgs: fmt.Sprintf(`{"file_path":%q}`, f.readFile)}
	case strings.Contains(text, "weather") && body["tools"] != nil:
		return reply{toolID: "call_weather_1", toolName: "get_weather", toolArgs: `{"city":"Paris","unit":"celsius"}`}
	}
	return reply{text: "Hello from the " + f.family + "-only fake."}
}

// toolResultIn finds a tool result in a message of either family.
func toolResultIn(m map[string]any) (string, bool) {
	if m["role"] == "tool" {
		s, _ := m["content"].(string)
		return s, true
	}
	parts, _ := m["content"].([]any)
	for _, p := range parts {
		b, _ := p.(map[string]any)
		if b["type"] == "tool_result" {
			switch c := b["content"].(type) {
			case string:
				return c, true
			case []any:
				var s []string
				for _, x := range c {
					if xb, _ := x.(map[string]any); xb["type"] == "text" {
						s = append(s, fmt.Sprint(xb["text"]))
					}
				}
				return strings.Join(s, ""), true
			}
			return "", true
		}
	}
	return "", false
}

// userContent is the text of a message and a description of its image, in either family.
func userContent(m map[string]any) (text, image string) {
	if s, ok := m["content"].(string); ok {
		return s, ""
	}
	parts, _ := m["content"].([]any)
	var texts strings.Builder // linear in the parts: the memory tests send thousands
	for _, p := range parts {
		b, _ := p.(map[string]any)
		switch b["type"] {
		case "text":
			fmt.Fprint(&texts, b["text"])
		case "image_url": // OpenAI: {"image_url":{"url":"data:image/png;base64,..."}}
			u, _ := b["image_url"].(map[string]any)
			url := fmt.Sprint(u["url"])
			if head, data, ok := strings.Cut(url, ","); ok && strings.HasPrefix(head, "data:") {
				image = fmt.Sprintf("%s, %d base64 characters", strings.TrimSuffix(strings.TrimPrefix(head, "data:"), ";base64"), len(data))
			} else {
				image = url
			}
		case "image": // Anthropic: {"source":{"type":"base64","media_type":…,"data":…}}
			src, _ := b["source"].(map[string]any)
			image = fmt.Sprintf("%s, %d base64 characters", src["media_type"], len(fmt.Sprint(src["data"])))
		}
	}
	return texts.String(), image
}

// pieces splits s the way a model streams: a few characters at a time.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// pieces is the reply's text as the fake streams it.
func (r reply) pieces() []string {
	if r.whole {
		return []string{r.text}
	}
	return pieces(r.text, 4)
}

func sse(w http.ResponseWriter, event string, v any) {
	b, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	w.(http.Flusher).Flush()
}

func (f *fakeModel) answerOpenAI(w http.ResponseWriter, body map[string]any, r reply) {
	if r.err != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error","param":null,"code":null}}`, r.err)
		return
	}
	id := "chatcmpl-fake1"
	model := body["model"]
	prompt, _ := json.Marshal(body["messages"])
	usage := map[string]int{"prompt_tokens": len(prompt) / 4, "completion_tokens": 7, "total_tokens": len(prompt)/4 + 7}
	finish := "stop"
	if r.toolName != "" {
		finish = "tool_calls"
	}
	if stream, _ := body["stream"].(bool); !stream && !f.streamAlways.Load() {
		msg := map[string]any{"role": "assistant", "content": r.text}
		if r.toolName != "" {
			msg["content"] = nil
			msg["tool_calls"] = []any{map[string]any{"id": r.toolID, "type": "function",
				"function": map[string]any{"name": r.toolName, "arguments": r.toolArgs}}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "created": 1700000000, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	sse(w, "", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, p := range r.pieces() {
		sse(w, "", chunk(map[string]any{"content": p}, nil))
	}
	if r.toolName != "" {
		sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": r.toolID, "type": "function",
			"function": map[string]any{"name": r.toolName, "arguments": ""}}}}, nil))
		for _, p := range pieces(r.toolArgs, 7) {
			sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": p}}}}, nil))
		}
	}
	sse(w, "", chunk(map[string]any{}, finish))
	if so, _ := body["stream_options"].(map[string]any); so["include_usage"] == true {
		sse(w, "", map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": model,
			"choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func (f *fakeModel) answerAnthropic(w http.ResponseWriter, body map[string]any, r reply) {
	if r.err != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":%q}}`, r.err)
		return
	}
	id := "msg_fake1"
	model := body["model"]
	prompt, _ := json.Marshal(body["messages"])
	inTokens := len(prompt) / 4
	stop := "end_turn"
	if r.toolName != "" {
		stop = "tool_use"
	}
	if stream, _ := body["stream"].(bool); !stream && !f.streamAlways.Load() {
		var content []any
		if r.text != "" {
			content = append(content, map[string]any{"type": "text", "text": r.text})
		}
		if r.toolName != "" {
			var input any
			json.Unmarshal([]byte(r.toolArgs), &input)
			content = append(content, map[string]any{"type": "tool_use", "id": r.toolID, "name": r.toolName, "input": input})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": inTokens, "output_tokens": 7}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message",
		"role": "assistant", "model": model, "content": []any{}, "stop_reason": nil,
		"usage": map[string]int{"input_tokens": inTokens, "output_tokens": 1}}})
	index := 0
	if r.text != "" {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}})
		sse(w, "ping", map[string]any{"type": "ping"})
		for _, p := range r.pieces() {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": p}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	if r.toolName != "" {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": r.toolID, "name": r.toolName, "input": map[string]any{}}})
		for _, p := range pieces(r.toolArgs, 7) {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": 7}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}
