package main

import (
	"context"
	"sync"
	"time"
)

// simGPU is one replica's accelerator as the simulator sees it: prefills run one at a time in
// arrival order. Decode steps of different streams are batched, so they do not slow each
// other; whether they wait for prefill is the scheduler's choice:
//
//   - stallDecode off: decode never waits (prefill and decode on separate hardware, as with
//     disaggregated prefill; the optimistic bound).
//   - stallDecode on, chunk 0: no decode step runs while any prefill is queued: prefill-first
//     scheduling, as vLLM's V0 scheduler without chunked prefill.
//   - stallDecode on, chunk > 0: chunked prefill, as vLLM's V1 scheduler: every GPU step
//     carries the running decodes and at most one chunk of queued prefill, so a decode step
//     that finds the GPU prefilling waits for at most one chunk.
//
// The schedule is arithmetic on one timestamp: no goroutine owns the GPU, and a cancelled
// request only gives up its wait.
type simGPU struct {
	mu          sync.Mutex
	busyUntil   time.Time     // end of the last prefill queued; the GPU is prefilling until then
	busyTotal   time.Duration // prefill time reserved so far, for /stats
	log         []prefillSpan // the first maxPrefillLog prefills, for the benchmark's offered load
	stallDecode bool
	chunk       time.Duration // with stallDecode: the longest a decode step waits (0: no bound)
}

// prefillSpan is one prefill as it reached the GPU: when it was queued and how long it runs.
type prefillSpan struct {
	at time.Time
	d  time.Duration
}

// maxPrefillLog bounds the log of a long-running replica; a benchmark run queues far fewer.
const maxPrefillLog = 1 << 16

// reservePrefill queues a prefill of length d behind the ones already queued and returns
// when it will finish.
func (g *simGPU) reservePrefill(d time.Duration) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	if len(g.log) < maxPrefillLog {
		g.log = append(g.log, prefillSpan{at: now, d: d})
	}
	start := now
	if g.busyUntil.After(start) {
		start = g.busyUntil
	}
	g.busyUntil = start.Add(d)
	g.busyTotal += d
	return g.busyUntil
}

// decodeStep waits until at, then while the GPU is prefilling (for at most one chunk when
// chunk is set), and returns the moment the step happens.
func (g *simGPU) decodeStep(ctx context.Context, at time.Time) (time.Time, error) {
	var limit time.Time // with chunk: the end of the chunk the step rides along with
	for {
		if err := sleepUntil(ctx, at); err != nil {
			return time.Time{}, err
		}
		now := time.Now()
		if !g.stallDecode {
			return now, nil
		}
		g.mu.Lock()
		until := g.busyUntil
		g.mu.Unlock()
		if !until.After(now) {
			return now, nil
		}
		if g.chunk > 0 {
			if limit.IsZero() {
				limit = now.Add(g.chunk)
			}
			if !now.Before(limit) {
				return now, nil
			}
			until = minTime(until, limit)
		}
		at = until
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// BusyTotal is the prefill time reserved so far.
func (g *simGPU) BusyTotal() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.busyTotal
}

// prefillsSince is a copy of the logged prefills queued at or after t, in order.
func (g *simGPU) prefillsSince(t time.Time) []prefillSpan {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []prefillSpan
	for _, s := range g.log {
		if !s.at.Before(t) {
			out = append(out, s)
		}
	}
	return out
}

// sleepUntil returns at t, or early with ctx's error.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
