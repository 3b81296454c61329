package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"sync"
	"time"
)

// SSEResult gathers every stream of every round against one target.
type SSEResult struct {
	Streams int
	Failed  int             // error, non-200, fewer than sseEvents events, or no [DONE]
	Chunks  int64           // data events received on every stream, failed ones too ([DONE] not counted)
	TTFB    []time.Duration // request sent -> first data event
	Excess  []time.Duration // each inter-event gap minus the upstream's pacing
}

var (
	dataPrefix = []byte("data: ")
	doneLine   = []byte("data: [DONE]")
)

// add merges another round into r.
func (r *SSEResult) add(o SSEResult) {
	r.Streams += o.Streams
	r.Failed += o.Failed
	r.Chunks += o.Chunks
	r.TTFB = append(r.TTFB, o.TTFB...)
	r.Excess = append(r.Excess, o.Excess...)
}

// runSSE opens streams concurrent streams, one connection each, and records when each data
// event arrives.
func runSSE(ctx context.Context, t Target, streams int) SSEResult {
	client := &http.Client{Transport: newTransport(streams), Timeout: 60 * time.Second}
	defer client.CloseIdleConnections()
	var (
		res SSEResult
		mu  sync.Mutex
		wg  sync.WaitGroup
	)
	for range streams {
		wg.Go(func() {
			one := readStream(ctx, client, t)
			mu.Lock()
			defer mu.Unlock()
			res.Streams++
			res.Chunks += int64(one.chunks)
			if !one.ok {
				res.Failed++
				return
			}
			res.TTFB = append(res.TTFB, one.ttfb)
			res.Excess = append(res.Excess, one.excess...)
		})
	}
	wg.Wait()
	return res
}

type streamResult struct {
	ok     bool
	chunks int // data events received, whether or not the stream then failed
	ttfb   time.Duration
	excess []time.Duration
}

func readStream(ctx context.Context, client *http.Client, t Target) streamResult {
	req, err := newCompletionRequest(ctx, t, streamRequest)
	if err != nil {
		return streamResult{}
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return streamResult{}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return streamResult{}
	}
	var arrivals []time.Time
	done := false
	r := bufio.NewReaderSize(resp.Body, 16<<10)
	for {
		line, err := r.ReadSlice('\n')
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			switch {
			case bytes.Equal(line, doneLine):
				done = true
			case bytes.HasPrefix(line, dataPrefix):
				arrivals = append(arrivals, time.Now())
			}
		}
		if err != nil || done {
			break
		}
	}
	if !done || len(arrivals) < sseEvents {
		return streamResult{chunks: len(arrivals)}
	}
	out := streamResult{ok: true, chunks: len(arrivals), ttfb: arrivals[0].Sub(start)}
	for i := 1; i < len(arrivals); i++ {
		out.excess = append(out.excess, arrivals[i].Sub(arrivals[i-1])-ssePacing)
	}
	return out
}
