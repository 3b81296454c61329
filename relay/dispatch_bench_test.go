package relay

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"modelrelay/relay/prefix"
)

type nopTarget struct{}

func (nopTarget) serve(context.Context, *Request, call) error { return nil }
func (nopTarget) drained()                                    {}

// benchPool builds a pool of n busy-ish workers serving "m" and a queue of depth requests for a
// model nobody serves right now (so they stay queued), like a loaded relay.
func benchPool(n, depth int) *Pool {
	p := newPool("bench", testConfig(), false)
	for i := 0; i < n; i++ {
		m := &member{id: "w" + strconv.Itoa(i), kind: kindWorker, seq: uint64(i + 1), target: nopTarget{},
			maxConcurrent: 4, reported: i % 3, weight: 1}
		m.setModels([]string{"m", "other-" + strconv.Itoa(i)})
		p.members = append(p.members, m)
	}
	p.knownUntil["queued-model"] = time.Now().Add(time.Hour)
	for i := 0; i < depth; i++ {
		req := &Request{Model: "queued-model", handoff: make(chan handoff, 1)}
		p.queue.push(req, false)
		req.state = stateQueued
	}
	return p
}

// BenchmarkDispatch measures one dispatch decision (pick + assign) and the release that frees
// the slot again (which scans the queue for work the freed member can take).
func BenchmarkDispatch(b *testing.B) {
	for _, n := range []int{16, 1000} {
		b.Run(fmt.Sprintf("targets=%d/queue=1000", n), func(b *testing.B) {
			p := benchPool(n, 1000)
			req := &Request{Model: "m", handoff: make(chan handoff, 1)}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m, queued, err := p.enter(req, false)
				if err != nil || queued || m == nil {
					b.Fatalf("enter: %v %v %v", m, queued, err)
				}
				p.release(m, outcomeOK, time.Millisecond)
			}
		})
	}
}

// placementBody is a chat request of about size bytes: a system prompt and a conversation.
func placementBody(size int) []byte {
	var msgs []string
	msgs = append(msgs, `{"role":"system","content":"`+strings.Repeat("You are a careful assistant. ", 40)+`"}`)
	for i := 0; len(strings.Join(msgs, ",")) < size; i++ {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"question %d: %s"}`, i, strings.Repeat("why does the cache hold this block? ", 8)),
			fmt.Sprintf(`{"role":"assistant","content":"answer %d: %s"}`, i, strings.Repeat("because the prefix was served here. ", 8)))
	}
	return []byte(`{"model":"m","stream":true,"messages":[` + strings.Join(msgs, ",") + `]}`)
}

// BenchmarkPlacementDecision measures what cache-aware placement adds to one dispatch: reading
// the prompt's blocks (4 KB and 32 KB prompts), matching them against 4 targets that each hold
// other conversations, choosing, and recording the choice.
func BenchmarkPlacementDecision(b *testing.B) {
	for _, size := range []int{4 << 10, 32 << 10} {
		b.Run(fmt.Sprintf("prompt=%dKB", size>>10), func(b *testing.B) {
			cfg := testConfig()
			cfg.sched = Scheduling{CacheAware: true}
			cfg.sched.fill()
			p := newPool("bench", cfg, true)
			for i := 0; i < 4; i++ {
				m := &member{id: "u" + strconv.Itoa(i), kind: kindUpstream, seq: uint64(i + 1), target: nopTarget{}, weight: 1}
				m.setModels([]string{"*"})
				p.members = append(p.members, m)
			}
			body := placementBody(size)
			var ps prefix.Parser
			for i := 0; i < 64; i++ { // other conversations the targets served
				var pr prefix.Prompt
				ps.Parse(placementBody(size+i*300), &pr)
				p.prefixes.Record(uint64(i%4+1), pr.Blocks)
			}
			req := &Request{Model: "m", handoff: make(chan handoff, 1), prompt: new(prefix.Prompt)}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ps.Parse(body, req.prompt)
				m, queued, err := p.enter(req, false)
				if err != nil || queued || m == nil {
					b.Fatalf("enter: %v %v %v", m, queued, err)
				}
				p.placed(req, m)
				p.release(m, outcomeOK, time.Millisecond)
			}
		})
	}
}
