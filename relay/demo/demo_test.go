package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// instant serves without pacing, so the tests wait for nothing.
var instant = Options{FirstToken: -1, PerToken: -1}

func start(t *testing.T, opts Options) string {
	t.Helper()
	srv := httptest.NewServer(New(opts))
	t.Cleanup(srv.Close)
	return srv.URL
}

func post(t *testing.T, base, path, body string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// sse is one server-sent event.
type sse struct {
	name string
	data string
}

func parseSSE(t *testing.T, body []byte) []sse {
	t.Helper()
	var out []sse
	for _, block := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		var e sse
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				e.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.data = strings.TrimPrefix(line, "data: ")
			default:
				t.Fatalf("unexpected line %q in %q", line, body)
			}
		}
		out = append(out, e)
	}
	return out
}

const hello = `[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there, relay!"}]`

// wantText is the demo's answer to a last user message of 19 characters.
const wantText = "Hello from the demo model behind modelrelay. Your last message was 19 characters long. " +
	"Add a backend or a worker for a real model, and the same request will reach it."

var wantOutput = len(strings.Fields(wantText))

// wantInput counts the words of hello: "Be brief." and "Hello there, relay!".
const wantInput = 5

func TestChatWhole(t *testing.T) {
	base := start(t, instant)
	st, h, body := post(t, base, "/v1/chat/completions", `{"model":"demo","messages":`+hello+`}`)
	if st != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		t.Fatalf("%d %v %s", st, h, body)
	}
	var got struct {
		ID      string
		Object  string
		Model   string
		Choices []struct {
			Index   int
			Message struct{ Role, Content string }
			Finish  string `json:"finish_reason"`
		}
		Usage map[string]int
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Object != "chat.completion" || got.Model != "demo" || !strings.HasPrefix(got.ID, "chatcmpl-") || len(got.Choices) != 1 {
		t.Fatalf("answer %s", body)
	}
	c := got.Choices[0]
	if c.Message.Role != "assistant" || c.Message.Content != wantText || c.Finish != "stop" {
		t.Errorf("choice %+v, want text %q", c, wantText)
	}
	want := map[string]int{"prompt_tokens": wantInput, "completion_tokens": wantOutput, "total_tokens": wantInput + wantOutput}
	if !equalCounts(got.Usage, want) {
		t.Errorf("usage %v, want %v", got.Usage, want)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// chunk is the part of an OpenAI stream chunk the tests read.
type chunk struct {
	ID      string
	Object  string
	Model   string
	Choices []struct {
		Delta struct {
			Role    string
			Content *string
		}
		Text   *string
		Finish *string `json:"finish_reason"`
	}
	Usage map[string]int
}

func TestChatStream(t *testing.T) {
	base := start(t, instant)
	for _, withUsage := range []bool{false, true} {
		opts := ""
		if withUsage {
			opts = `,"stream_options":{"include_usage":true}`
		}
		st, h, body := post(t, base, "/v1/chat/completions", `{"model":"demo","stream":true,"messages":`+hello+opts+`}`)
		if st != 200 || h.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%d %v %s", st, h, body)
		}
		events := parseSSE(t, body)
		if last := events[len(events)-1]; last != (sse{data: "[DONE]"}) {
			t.Fatalf("last event %+v", last)
		}
		var chunks []chunk
		for _, e := range events[:len(events)-1] {
			if e.name != "" {
				t.Errorf("OpenAI event with a name: %+v", e)
			}
			var c chunk
			if err := json.Unmarshal([]byte(e.data), &c); err != nil {
				t.Fatalf("%v: %s", err, e.data)
			}
			if c.Object != "chat.completion.chunk" || c.Model != "demo" || c.ID != chunks0ID(chunks, c.ID) {
				t.Errorf("chunk %s", e.data)
			}
			chunks = append(chunks, c)
		}
		if first := chunks[0].Choices[0].Delta; first.Role != "assistant" || first.Content == nil || *first.Content != "" {
			t.Errorf("first chunk %+v, want the assistant role and empty content", first)
		}
		var text strings.Builder
		tokens, finishes := 0, 0
		var usage map[string]int
		for i, c := range chunks {
			if c.Usage != nil {
				if len(c.Choices) != 0 || i != len(chunks)-1 {
					t.Errorf("usage chunk %d of %d has choices %v", i, len(chunks), c.Choices)
				}
				usage = c.Usage
				continue
			}
			ch := c.Choices[0]
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				text.WriteString(*ch.Delta.Content)
				tokens++
			}
			if ch.Finish != nil {
				finishes++
				if *ch.Finish != "stop" {
					t.Errorf("finish_reason %q", *ch.Finish)
				}
			}
		}
		if text.String() != wantText || tokens != wantOutput || finishes != 1 {
			t.Errorf("streamed %q in %d tokens, %d finishes; want %q in %d", text.String(), tokens, finishes, wantText, wantOutput)
		}
		want := map[string]int{"prompt_tokens": wantInput, "completion_tokens": wantOutput, "total_tokens": wantInput + wantOutput}
		switch {
		case withUsage && !equalCounts(usage, want):
			t.Errorf("usage chunk %v, want %v", usage, want)
		case !withUsage && usage != nil:
			t.Errorf("usage %v sent without stream_options.include_usage", usage)
		}
	}
}

// chunks0ID is the stream's id: the first chunk's (every chunk of a stream shares it).
func chunks0ID(chunks []chunk, id string) string {
	if len(chunks) == 0 {
		return id
	}
	return chunks[0].ID
}

func TestCompletions(t *testing.T) {
	base := start(t, instant)
	st, _, body := post(t, base, "/v1/completions", `{"model":"demo","prompt":"Hello there, relay!"}`)
	var whole chunk
	if st != 200 || json.Unmarshal(body, &whole) != nil || whole.Object != "text_completion" {
		t.Fatalf("%d %s", st, body)
	}
	if c := whole.Choices[0]; c.Text == nil || *c.Text != wantText || *c.Finish != "stop" || whole.Usage["completion_tokens"] != wantOutput || whole.Usage["prompt_tokens"] != 3 {
		t.Errorf("completion %s", body)
	}

	st, _, body = post(t, base, "/v1/completions", `{"model":"demo","prompt":["x","Hello there, relay!"],"stream":true,"stream_options":{"include_usage":true}}`)
	events := parseSSE(t, body)
	if st != 200 || events[len(events)-1].data != "[DONE]" {
		t.Fatalf("%d %s", st, body)
	}
	var text strings.Builder
	var usage map[string]int
	for _, e := range events[:len(events)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(e.data), &c); err != nil || c.Object != "text_completion" {
			t.Fatalf("chunk %s: %v", e.data, err)
		}
		if c.Usage != nil {
			usage = c.Usage
			continue
		}
		text.WriteString(*c.Choices[0].Text)
	}
	if text.String() != wantText || usage["prompt_tokens"] != 4 || usage["completion_tokens"] != wantOutput {
		t.Errorf("streamed %q, usage %v", text.String(), usage)
	}
}

// gotMessage is the part of an Anthropic message the tests read.
type gotMessage struct {
	ID      string
	Type    string
	Role    string
	Model   string
	Content []struct{ Type, Text string }
	Stop    *string `json:"stop_reason"`
	Usage   map[string]int
}

const anthropicHello = `"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"Hello there, relay!"}]}]`

func TestMessagesWhole(t *testing.T) {
	base := start(t, instant)
	st, _, body := post(t, base, "/v1/messages", `{"model":"demo","max_tokens":256,`+anthropicHello+`}`)
	var m gotMessage
	if st != 200 || json.Unmarshal(body, &m) != nil {
		t.Fatalf("%d %s", st, body)
	}
	if m.Type != "message" || m.Role != "assistant" || m.Model != "demo" || !strings.HasPrefix(m.ID, "msg_") ||
		len(m.Content) != 1 || m.Content[0].Type != "text" || m.Content[0].Text != wantText || m.Stop == nil || *m.Stop != "end_turn" {
		t.Errorf("message %s", body)
	}
	if want := map[string]int{"input_tokens": wantInput, "output_tokens": wantOutput}; !equalCounts(m.Usage, want) {
		t.Errorf("usage %v, want %v", m.Usage, want)
	}
}

func TestMessagesStream(t *testing.T) {
	base := start(t, instant)
	st, h, body := post(t, base, "/v1/messages", `{"model":"demo","max_tokens":256,"stream":true,`+anthropicHello+`}`)
	if st != 200 || h.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v %s", st, h, body)
	}
	var order []string
	var text strings.Builder
	var startUsage, endUsage map[string]int
	var stop string
	for _, e := range parseSSE(t, body) {
		var ev struct {
			Type    string
			Message gotMessage
			Index   int
			Delta   struct {
				Type, Text string
				Stop       string `json:"stop_reason"`
			}
			Usage map[string]int
		}
		if err := json.Unmarshal([]byte(e.data), &ev); err != nil || ev.Type != e.name {
			t.Fatalf("event %q: data %s (%v)", e.name, e.data, err)
		}
		if len(order) == 0 || order[len(order)-1] != ev.Type {
			order = append(order, ev.Type)
		}
		switch ev.Type {
		case "message_start":
			startUsage = ev.Message.Usage
		case "content_block_delta":
			if ev.Delta.Type != "text_delta" || ev.Index != 0 {
				t.Errorf("delta %s", e.data)
			}
			text.WriteString(ev.Delta.Text)
		case "message_delta":
			endUsage, stop = ev.Usage, ev.Delta.Stop
		}
	}
	wantOrder := "message_start content_block_start ping content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(order, " "); got != wantOrder {
		t.Errorf("events %s, want %s", got, wantOrder)
	}
	if text.String() != wantText || stop != "end_turn" {
		t.Errorf("streamed %q, stop %q", text.String(), stop)
	}
	if startUsage["input_tokens"] != wantInput || endUsage["output_tokens"] != wantOutput || endUsage["input_tokens"] != wantInput {
		t.Errorf("usage at start %v, at end %v", startUsage, endUsage)
	}
}

func TestCountTokens(t *testing.T) {
	base := start(t, instant)
	st, _, body := post(t, base, "/v1/messages/count_tokens", `{"model":"demo",`+anthropicHello+`}`)
	if st != 200 || strings.TrimSpace(string(body)) != `{"input_tokens":5}` {
		t.Errorf("%d %s", st, body)
	}
}

// TestDeterministic: the same prompt gets the same answer and usage, whatever came before;
// the answer follows the last user message's length.
func TestDeterministic(t *testing.T) {
	base := start(t, instant)
	ask := func(content string) string {
		b, _ := json.Marshal(map[string]any{"model": "demo", "messages": []map[string]string{{"role": "user", "content": content}}})
		_, _, body := post(t, base, "/v1/chat/completions", string(b))
		var c struct {
			Choices []struct{ Message struct{ Content string } }
			Usage   map[string]int
		}
		json.Unmarshal(body, &c)
		b, _ = json.Marshal([]any{c.Choices, c.Usage})
		return string(b)
	}
	first := ask("same words")
	ask("something else entirely")
	if again := ask("same words"); again != first {
		t.Errorf("answers differ:\n%s\n%s", first, again)
	}
	if one := ask("é"); !strings.Contains(one, "was 1 character long") {
		t.Errorf("a one-character message: %s", one)
	}
}

func TestMaxTokensCutsTheAnswer(t *testing.T) {
	base := start(t, instant)
	_, _, body := post(t, base, "/v1/chat/completions", `{"model":"demo","max_completion_tokens":3,"max_tokens":99,"messages":`+hello+`}`)
	if !strings.Contains(string(body), `"content":"Hello from the"`) || !strings.Contains(string(body), `"finish_reason":"length"`) ||
		!strings.Contains(string(body), `"completion_tokens":3`) {
		t.Errorf("chat: %s", body)
	}
	_, _, body = post(t, base, "/v1/messages", `{"model":"demo","max_tokens":2,"stream":true,`+anthropicHello+`}`)
	if !strings.Contains(string(body), `"stop_reason":"max_tokens"`) || !strings.Contains(string(body), `"output_tokens":2}`) ||
		strings.Count(string(body), "event: content_block_delta") != 2 {
		t.Errorf("messages: %s", body)
	}
}

func TestErrorsInEachDialect(t *testing.T) {
	base := start(t, instant)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, path, body string
		status           int
		kind             string // OpenAI error.type or Anthropic error.type
		code             string // OpenAI error.code
	}{
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-4o",` + msgs + `}`, 404, "invalid_request_error", "model_not_found"},
		{"unknown model", "/v1/completions", `{"model":"gpt-4o","prompt":"hi"}`, 404, "invalid_request_error", "model_not_found"},
		{"unknown model", "/v1/messages", `{"model":"claude","max_tokens":9,` + msgs + `}`, 404, "not_found_error", ""},
		{"unknown model", "/v1/messages/count_tokens", `{"model":"claude",` + msgs + `}`, 404, "not_found_error", ""},
		{"bad JSON", "/v1/chat/completions", `{"model":"demo",`, 400, "invalid_request_error", ""},
		{"bad JSON", "/v1/messages", `{"model":`, 400, "invalid_request_error", ""},
		{"not an object", "/v1/chat/completions", `["demo"]`, 400, "invalid_request_error", ""},
		{"two values", "/v1/messages", `{"model":"demo","max_tokens":9,` + msgs + `} {}`, 400, "invalid_request_error", ""},
		{"no model", "/v1/chat/completions", `{` + msgs + `}`, 400, "invalid_request_error", ""},
		{"no messages", "/v1/chat/completions", `{"model":"demo","messages":[]}`, 400, "invalid_request_error", ""},
		{"bad content", "/v1/messages", `{"model":"demo","max_tokens":9,"messages":[{"role":"user","content":7}]}`, 400, "invalid_request_error", ""},
		{"no max_tokens", "/v1/messages", `{"model":"demo",` + msgs + `}`, 400, "invalid_request_error", ""},
		{"zero max_tokens", "/v1/chat/completions", `{"model":"demo","max_tokens":0,` + msgs + `}`, 400, "invalid_request_error", ""},
		{"no prompt", "/v1/completions", `{"model":"demo"}`, 400, "invalid_request_error", ""},
		{"too large", "/v1/messages", `{"model":"demo","pad":"` + strings.Repeat("x", maxBody) + `"}`, 413, "request_too_large", ""},
		{"no route", "/v1/embeddings", `{"model":"demo","input":"hi"}`, 404, "invalid_request_error", ""},
	}
	for _, tc := range cases {
		st, h, body := post(t, base, tc.path, tc.body)
		label := tc.name + " " + tc.path
		if st != tc.status || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Errorf("%s: %d %q %.200s, want %d JSON", label, st, h.Get("Content-Type"), body, tc.status)
			continue
		}
		var e struct {
			Type  string
			Error struct{ Type, Message, Code string }
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type != tc.kind || e.Error.Code != tc.code {
			t.Errorf("%s: error %s, want type %q code %q", label, body, tc.kind, tc.code)
		}
		if anthropicPath := strings.HasPrefix(tc.path, "/v1/messages"); anthropicPath != (e.Type == "error") {
			t.Errorf("%s: %s is not in its dialect's shape", label, body)
		}
	}
}

func TestModelsListsTheModel(t *testing.T) {
	base := start(t, Options{Model: "tiny", FirstToken: -1, PerToken: -1})
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string
		Data   []struct{ ID, Object, Type string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || list.Object != "list" || len(list.Data) != 1 ||
		list.Data[0].ID != "tiny" || list.Data[0].Object != "model" || list.Data[0].Type != "model" {
		t.Errorf("models %+v (%v)", list, err)
	}
	if st, _, _ := post(t, base, "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`); st != 404 {
		t.Errorf("the default model on a server of another: %d", st)
	}
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{}
	o.fill()
	if o.Model != "demo" || o.FirstToken != DefaultFirstToken || o.PerToken != DefaultPerToken || o.WriteTimeout != DefaultWriteTimeout {
		t.Errorf("defaults %+v", o)
	}
	o = Options{Model: "m", FirstToken: -1, PerToken: -time.Second, WriteTimeout: time.Second}
	o.fill()
	if o.Model != "m" || o.FirstToken != 0 || o.PerToken != 0 || o.WriteTimeout != time.Second {
		t.Errorf("negative = none: %+v", o)
	}
}

// TestClientGoneEndsTheAnswer: a client that leaves mid-stream or while its answer is
// being "generated" releases the handler at once, however slow the pacing.
func TestClientGoneEndsTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		readFirst        bool
	}{
		{"stream", "/v1/chat/completions", `{"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}]}`, true},
		{"stream", "/v1/messages", `{"model":"demo","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, true},
		{"whole", "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`, false},
	} {
		t.Run(tc.name+tc.path, func(t *testing.T) {
			entered, done := make(chan struct{}), make(chan struct{})
			demo := New(Options{FirstToken: -1, PerToken: time.Hour})
			if !tc.readFirst {
				demo = New(Options{FirstToken: time.Hour})
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(done)
				close(entered)
				demo.ServeHTTP(w, r)
			}))
			defer srv.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+tc.path, strings.NewReader(tc.body))
			answered := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					if tc.readFirst { // the first event has come; the next is an hour away
						_, err = bufio.NewReader(resp.Body).ReadString('\n')
					}
					resp.Body.Close()
				}
				answered <- err
			}()
			<-entered
			if tc.readFirst {
				if err := <-answered; err != nil {
					t.Fatal(err)
				}
			}
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second): // only a hang gets here
				t.Fatal("the handler is still running after its client left")
			}
		})
	}
}

// A body that does not decode is told what is wrong in the API's terms, not Go's.
func TestDecodeErrorsSayWhatIsWrong(t *testing.T) {
	base := start(t, instant)
	for _, c := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"demo","messages":"hi"}`, "messages must be an array"},
		{"/v1/messages", `{"model":"demo","max_tokens":"9","messages":[]}`, "max_tokens must be an integer"},
		{"/v1/messages", `{"model":"demo","messages":[{"role":"user","content":"a"},{"role":1}]}`, "messages[1].role must be a string"},
		{"/v1/chat/completions", `{"model":5}`, "model must be a string"},
		{"/v1/messages", `{"model":"demo"} {}`, "request body is not valid JSON (at byte 18)"},
	} {
		_, _, body := post(t, base, c.path, c.body)
		var e struct{ Error struct{ Message string } }
		if json.Unmarshal(body, &e); e.Error.Message != c.want {
			t.Errorf("%s %s: %s, want message %q", c.path, c.body, body, c.want)
		}
	}
}

// A demo that speaks one family answers the other's paths 404, as such model servers do.
func TestSpeaksOneFamily(t *testing.T) {
	chat := `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`
	msgs := `{"model":"demo","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct {
		speaks     string
		chat, msgs int
	}{{"", 200, 200}, {"openai", 200, 404}, {"anthropic", 404, 200}} {
		opts := instant
		opts.Speaks = c.speaks
		base := start(t, opts)
		if st, _, b := post(t, base, "/v1/chat/completions", chat); st != c.chat {
			t.Errorf("speaks %q: chat %d %s, want %d", c.speaks, st, b, c.chat)
		}
		if st, _, b := post(t, base, "/v1/messages", msgs); st != c.msgs {
			t.Errorf("speaks %q: messages %d %s, want %d", c.speaks, st, b, c.msgs)
		}
	}
}
