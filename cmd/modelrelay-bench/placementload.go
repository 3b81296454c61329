package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The placement benchmark's workload: multi-turn chats that share one system prompt (and,
// for agents, one set of tools), replayed on the same schedule against every policy. Nothing
// in a request names its conversation (no session key, no user): only the prompt's prefix
// can keep a chat on its replica.
//
// Two ways to pace a conversation:
//
//   - Closed loop: the next turn follows the answer after a think time. How fast the
//     replicas answer sets how fast the load arrives.
//   - Open loop: every turn has a due time, drawn before the run, and is sent at that time or
//     when the previous answer is complete, whichever is later (its prompt contains that
//     answer). The load arrives on the schedule until the replicas fall behind it; how many
//     turns had to wait for their previous answer says how far behind.

// placementShape sizes the workload and fixes its pacing.
type placementShape struct {
	Conversations, Turns int
	Intro                string        // the system prompt's first sentences
	SystemBytes          int           // instructions in the system message, shared by all
	ToolsBytes           int           // tool definitions (`tools`) shared by all; 0: none
	UserMin, UserMax     int           // bytes of each new user message
	DocMin, DocMax       int           // a document of its own before the first question, bytes (0: none)
	DocLead              string        // the words that introduce the document
	Stagger              time.Duration // conversation i starts near i × Stagger
	OpenLoop             bool
	// Pause, closed loop: mean think time between an answer and the next turn. Open loop:
	// mean time between a conversation's due times. Either is uniform in 0.5×..1.5×; the turns
	// of many conversations together arrive close to a Poisson stream all the same, and no
	// conversation's schedule runs far past the others'.
	Pause     time.Duration
	MaxTokens int
	Model     string
}

// chatScript is one conversation, fixed before the run: when it starts, what the user says at
// each turn and when each turn is sent.
type chatScript struct {
	start time.Duration
	users []string
	think []time.Duration // closed loop: the pause after each answer
	due   []time.Duration // open loop: when each turn is due, from the run's start
}

// placementWorkload is everything the runs of one benchmark share.
type placementWorkload struct {
	shape  placementShape
	system string
	tools  json.RawMessage // nil without tools
	chats  []chatScript
}

// newPlacementWorkload draws the workload from seed; the same seed gives the same bytes and
// the same schedule.
func newPlacementWorkload(shape placementShape, seed uint64) placementWorkload {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := placementWorkload{shape: shape, system: shape.Intro + prose(rng, shape.SystemBytes)}
	w.system = w.system[:shape.SystemBytes]
	if shape.ToolsBytes > 0 {
		w.tools = toolDefinitions(rng, shape.ToolsBytes)
	}
	for i := range shape.Conversations {
		c := chatScript{start: time.Duration(i)*shape.Stagger + randDuration(rng, 0, shape.Stagger)}
		// Drawn only when there is a document, so a workload without one keeps its bytes.
		var doc string
		if shape.DocMax > 0 {
			doc = shape.DocLead + prose(rng, shape.DocMin+rng.IntN(shape.DocMax-shape.DocMin+1)) + "\n\n"
		}
		at := c.start
		for turn := range shape.Turns {
			user := prose(rng, shape.UserMin+rng.IntN(shape.UserMax-shape.UserMin+1))
			if turn == 0 {
				user = doc + user
			}
			c.users = append(c.users, user)
			if shape.OpenLoop {
				c.due = append(c.due, at)
				at += randDuration(rng, shape.Pause/2, shape.Pause*3/2)
			} else {
				c.think = append(c.think, randDuration(rng, shape.Pause/2, shape.Pause*3/2))
			}
		}
		w.chats = append(w.chats, c)
	}
	return w
}

// toolNames are what a coding or document agent calls.
var toolNames = []string{"read_file", "search_code", "list_directory", "run_command", "edit_file",
	"search_documents", "fetch_page", "query_logs"}

// toolDefinitions is about n bytes of OpenAI function tools, each with a description and a
// small JSON schema, as agents send with every request.
func toolDefinitions(rng *rand.Rand, n int) json.RawMessage {
	var tools []any
	var prev json.RawMessage
	for i := 0; ; i++ {
		name := toolNames[i%len(toolNames)]
		if i >= len(toolNames) {
			name += fmt.Sprint("_", i/len(toolNames))
		}
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name": name, "description": prose(rng, 80+rng.IntN(160)),
			"parameters": map[string]any{"type": "object", "required": []string{"target"},
				"properties": map[string]any{
					"target": map[string]string{"type": "string", "description": prose(rng, 30+rng.IntN(40))},
					"limit":  map[string]string{"type": "integer", "description": prose(rng, 20+rng.IntN(30))},
				}}}})
		b, err := json.Marshal(tools)
		switch {
		case err != nil:
			return nil
		case len(b) < n:
			prev = b
		case prev != nil && n-len(prev) < len(b)-n:
			return prev
		default:
			return b
		}
	}
}

// scheduleFloor is the shortest total time any placement could reach: each conversation's
// start, pauses or due times, and answers with no prefill and no wait anywhere. When a
// policy's total time is close to it, the run was paced by the schedule, not by the replicas.
func (w placementWorkload) scheduleFloor(p simParams) time.Duration {
	answer := p.Base + time.Duration(w.shape.MaxTokens-1)*p.Decode
	var floor time.Duration
	for _, c := range w.chats {
		d := c.start
		for turn := range c.users {
			switch {
			case turn == 0:
			case w.shape.OpenLoop:
				d = max(d, c.due[turn])
			default:
				d += c.think[turn-1]
			}
			d += answer
		}
		floor = max(floor, d)
	}
	return floor
}

// lastDue is when the schedule's last turn is due (open loop), or 0.
func (w placementWorkload) lastDue() time.Duration {
	var last time.Duration
	for _, c := range w.chats {
		if len(c.due) > 0 {
			last = max(last, c.due[len(c.due)-1])
		}
	}
	return last
}

// promptBytes is the mean and the largest size of a conversation's last prompt (the system
// prompt, tools, every user message and, at a shape's MaxTokens, answers of about
// simTokenBytes each).
func (w placementWorkload) promptBytes() (mean, most int) {
	if len(w.chats) == 0 {
		return 0, 0
	}
	answer := w.shape.MaxTokens * simTokenBytes
	total := 0
	for _, c := range w.chats {
		n := len(w.system) + len(w.tools) + (len(c.users)-1)*answer
		for _, u := range c.users {
			n += len(u)
		}
		total += n
		most = max(most, n)
	}
	return total / len(w.chats), most
}

var proseWords = strings.Fields(`the a GPU cluster job node queue memory kernel driver model batch token
	latency request replica cache prefix deploy restart error log metric budget quota region image
	container scheduler tenant session stream timeout retry upgrade rollback config network storage
	why how when does should could please check my our their it is was not and or with for on in`)

// prose is n bytes of sentences made of random words.
func prose(rng *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(proseWords[rng.IntN(len(proseWords))])
		if rng.IntN(9) == 0 {
			b.WriteString(". ")
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()[:n]
}

func randDuration(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// turnResult is one request as the client saw it.
type turnResult struct {
	ttft   time.Duration // request sent -> first content token
	late   time.Duration // open loop: how long after its due time the turn was sent
	end    time.Time
	target string // the relay's x-modelrelay-target, when it says
	err    error
}

// placementRun is one policy's replay of the workload, client side.
type placementRun struct {
	turns     []turnResult
	start     time.Time
	makespan  time.Duration // first scheduled start -> last answer complete
	failed    int
	firstErr  error
	moves     int // turns served by another target than the conversation's previous turn
	named     int // turns after the first whose target and previous target are both known
	followUps int // turns after a conversation's first
	held      int // open loop: follow-ups sent after their due time, waiting for the previous answer
	lateSum   time.Duration
}

// replay runs every conversation against the relay at addr and waits for all of them.
func (w placementWorkload) replay(ctx context.Context, addr string) placementRun {
	client := &http.Client{Transport: newTransport(w.shape.Conversations), Timeout: 2 * time.Minute}
	defer client.CloseIdleConnections()
	run := placementRun{start: time.Now()}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, chat := range w.chats {
		wg.Go(func() {
			turns := w.converse(ctx, client, addr, chat, run.start)
			mu.Lock()
			defer mu.Unlock()
			run.turns = append(run.turns, turns...)
			run.followUps += max(0, len(turns)-1)
			for i := 1; i < len(turns); i++ {
				if turns[i].late > 0 {
					run.held++
					run.lateSum += turns[i].late
				}
				if prev, cur := turns[i-1].target, turns[i].target; prev != "" && cur != "" {
					run.named++
					if cur != prev {
						run.moves++
					}
				}
			}
		})
	}
	wg.Wait()
	for _, t := range run.turns {
		if t.err != nil {
			run.failed++
			if run.firstErr == nil {
				run.firstErr = t.err
			}
		}
		run.makespan = max(run.makespan, t.end.Sub(run.start))
	}
	return run
}

// converse plays one chat: each turn sends the whole history, after the scripted pause
// (closed loop) or at its due time, once the previous answer is in (open loop). A failed turn
// keeps an empty answer and the chat goes on.
func (w placementWorkload) converse(ctx context.Context, client *http.Client, addr string, chat chatScript, t0 time.Time) []turnResult {
	if sleepUntil(ctx, t0.Add(chat.start)) != nil {
		return nil
	}
	messages := []map[string]string{{"role": "system", "content": w.system}}
	var out []turnResult
	for turn, user := range chat.users {
		var late time.Duration
		switch {
		case turn == 0:
		case w.shape.OpenLoop:
			due := t0.Add(chat.due[turn])
			late = max(0, time.Since(due))
			if sleepUntil(ctx, due) != nil {
				return out
			}
		default:
			if sleepUntil(ctx, time.Now().Add(chat.think[turn-1])) != nil {
				return out
			}
		}
		messages = append(messages, map[string]string{"role": "user", "content": user})
		answer, res := w.ask(ctx, client, addr, messages)
		res.late = late
		out = append(out, res)
		if ctx.Err() != nil {
			return out
		}
		messages = append(messages, map[string]string{"role": "assistant", "content": answer})
	}
	return out
}

// ask sends one streaming completion and reads the answer to [DONE].
func (w placementWorkload) ask(ctx context.Context, client *http.Client, addr string, messages []map[string]string) (string, turnResult) {
	req := map[string]any{"model": w.shape.Model, "messages": messages, "stream": true, "max_tokens": w.shape.MaxTokens}
	if w.tools != nil {
		req["tools"] = w.tools
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", turnResult{end: time.Now(), err: fmt.Errorf("encode request: %w", err)}
	}
	httpReq, err := newCompletionRequest(ctx, Target{Addr: addr}, string(body))
	if err != nil {
		return "", turnResult{end: time.Now(), err: err}
	}
	start := time.Now()
	resp, err := client.Do(httpReq)
	if err != nil {
		return "", turnResult{end: time.Now(), err: fmt.Errorf("completion: %w", err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", turnResult{end: time.Now(), err: fmt.Errorf("completion: status %d", resp.StatusCode)}
	}
	answer, firstToken, err := readChatStream(resp.Body)
	res := turnResult{end: time.Now(), target: resp.Header.Get("X-Modelrelay-Target"), err: err}
	if !firstToken.IsZero() {
		res.ttft = firstToken.Sub(start)
	} else if err == nil {
		res.err = fmt.Errorf("completion: stream without content")
	}
	return answer, res
}

// readChatStream reads OpenAI chat.completion.chunk events to [DONE] and returns the content
// and when its first non-empty piece arrived.
func readChatStream(r io.Reader) (string, time.Time, error) {
	var (
		answer strings.Builder
		first  time.Time
	)
	br := bufio.NewReaderSize(r, 16<<10)
	for {
		line, err := br.ReadBytes('\n')
		line = bytes.TrimRight(line, "\r\n")
		if payload, ok := bytes.CutPrefix(line, dataPrefix); ok {
			if bytes.Equal(payload, []byte("[DONE]")) {
				return answer.String(), first, nil
			}
			var chunk struct {
				Choices []struct {
					Delta struct {
						Content string `json:"content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if jerr := json.Unmarshal(payload, &chunk); jerr != nil {
				return answer.String(), first, fmt.Errorf("stream: bad event: %w", jerr)
			}
			for _, c := range chunk.Choices {
				if c.Delta.Content != "" && first.IsZero() {
					first = time.Now()
				}
				answer.WriteString(c.Delta.Content)
			}
		}
		if err != nil {
			return answer.String(), first, fmt.Errorf("stream ended before [DONE]: %w", err)
		}
	}
}
