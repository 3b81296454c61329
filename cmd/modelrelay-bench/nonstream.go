package main

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// LoadResult is one non-streaming measurement.
type LoadResult struct {
	Requests int64 // completed with a 2xx/3xx
	Errors   int64 // socket errors and other statuses
	Elapsed  time.Duration
	P50, P99 time.Duration
	Tool     string // "wrk" or "go"
}

func (r LoadResult) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// runGoLoad is the fallback generator when wrk is missing: conns loops, each with its own
// keep-alive connection, POSTing completions until the duration is over.
func runGoLoad(ctx context.Context, t Target, conns int, d time.Duration) LoadResult {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	client := &http.Client{Transport: newTransport(conns), Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var (
		mu        sync.Mutex
		latencies []time.Duration
		errors    int64
		wg        sync.WaitGroup
	)
	start := time.Now()
	for range conns {
		wg.Go(func() {
			var mine []time.Duration
			var failed int64
			for ctx.Err() == nil {
				t0 := time.Now()
				if goRequest(ctx, client, t) {
					mine = append(mine, time.Since(t0))
				} else if ctx.Err() == nil {
					failed++
				}
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			errors += failed
			mu.Unlock()
		})
	}
	wg.Wait()
	res := LoadResult{Requests: int64(len(latencies)), Errors: errors, Elapsed: time.Since(start), Tool: "go"}
	res.P50 = percentile(latencies, 50)
	res.P99 = percentile(latencies, 99)
	return res
}

func goRequest(ctx context.Context, client *http.Client, t Target) bool {
	req, err := newCompletionRequest(ctx, t, completionRequest)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err == nil && resp.StatusCode == http.StatusOK
}
