package relay

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"
)

type nopTarget struct{}

func (nopTarget) serve(context.Context, *Request, *responder, func(outcome)) error { return nil }
func (nopTarget) drained()                                                         {}

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
